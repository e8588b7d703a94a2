"""The voice page's end-of-speech decision: VAD hangover (min_silence_ms) vs premature cut-off.

A longer hangover waits longer after every question before anything else can start (it is the
`vad` stage of the voice page's latency); a shorter one ends a question at a pause in its middle.
This renders bench/voice_questions.json with the Piper voice (noise 0, natively): the plain
questions as said, and the paused ones in two parts with a silence between (0.3 to 1.5 s), and runs
the Silero VAD bundle natively (the same segmenter the page's worker runs: speech/segments.py) at
several hangovers. Per hangover: how many plain questions and paused ones come out in more than one
segment (cut), and when the end was decided after the speech ended (ms). The page's controller also
joins a cut question again when speech resumes within CONTINUE_MS (web/src/voice/controller.ts):
the last column says which pauses that rescues.

    python bench/voice_hangover.py [--vad public/models/silero-vad] [--voice public/models/piper-en-us-joe] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "py"))

from onnxpipe import api  # noqa: E402

HANGOVERS_MS = (200, 250, 300, 400, 500, 700, 1000, 1300)   # the page uses 400 (web/src/voice/vad-link.ts)
PAUSES_S = (0.3, 0.5, 0.7, 1.0, 1.5)
PAD_MS, MIN_SPEECH_MS = 200, 250      # web/src/voice/vad-link.ts LISTEN_CONTROLS
CONTINUE_MS = 1500                    # web/src/voice/controller.ts


def render(voice, text: str) -> tuple[array, int]:
    r = voice.speak(text, noise_scale=0, noise_w=0)
    return array("f", r.samples), r.sample_rate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vad", default=str(ROOT / "public/models/silero-vad"))
    ap.add_argument("--voice", default=str(ROOT / "public/models/piper-en-us-joe"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    data = json.loads((ROOT / "bench/voice_questions.json").read_text())
    voice, vad = api.load(a.voice), api.load(a.vad)
    lead, tail = 1.0, 2.0   # silence before and after (longer than any hangover)
    plain, paused = [], []
    for q in data["questions"]:
        s, rate = render(voice, q)
        plain.append((q, s, rate))
    for first, second in data["paused"]:
        (s1, rate), (s2, _) = render(voice, first), render(voice, second)
        for pause in PAUSES_S:
            paused.append((f"{first} [{pause} s] {second}", s1 + array("f", bytes(4 * round(pause * rate))) + s2, rate, pause))

    def segments(samples, rate, hangover):
        pad = array("f", bytes(4 * round(lead * rate)))
        end_pad = array("f", bytes(4 * round(tail * rate)))
        r = vad.detect_speech(pad + samples + end_pad, rate, min_silence_ms=hangover, speech_pad_ms=PAD_MS,
                              min_speech_ms=MIN_SPEECH_MS)
        return r

    def gap_ms(segs):
        """The silence the page sees between two parts (the voice's own pause included)."""
        return ((segs[1][0] + PAD_MS / 1000) - (segs[0][1] - PAD_MS / 1000)) * 1000

    rows = []
    for hangover in HANGOVERS_MS:
        cut_plain, gaps_plain = [], []
        for q, s, rate in plain:
            segs = segments(s, rate, hangover).segments
            if len(segs) != 1:
                cut_plain.append(q)
                gaps_plain.append(gap_ms(segs) if len(segs) == 2 else None)
        cut = {p: 0 for p in PAUSES_S}
        lags = []
        for q, s, rate in plain:
            r = segments(s, rate, hangover)
            # decided when the segmenter saw the silence last long enough: the event's position
            ends = [e for e in r.events if e.type == "speech_end"]
            if ends:   # decided once ``time`` s of audio were seen; the speech ended a padding before ``end``
                lags.append((ends[-1].time - (ends[-1].end - PAD_MS / 1000)) * 1000)
        joined = {p: 0 for p in PAUSES_S}
        for q, s, rate, pause in paused:
            segs = segments(s, rate, hangover).segments
            if len(segs) != 1:
                cut[pause] += 1
                joined[pause] += len(segs) == 2 and gap_ms(segs) <= CONTINUE_MS
        rows.append({"hangover_ms": hangover, "plain_cut": len(cut_plain), "plain": len(plain),
                     "plain_cut_questions": cut_plain,
                     "plain_joined_again_by_continue": sum(g is not None and g <= CONTINUE_MS for g in gaps_plain),
                     "decided_after_ms_p50": round(statistics.median(lags)) if lags else None,
                     "paused_cut": {str(p): cut[p] for p in PAUSES_S}, "paused_each": len(data["paused"]),
                     "joined_again_by_continue": {str(p): joined[p] for p in PAUSES_S}})
    if a.json:
        print(json.dumps({"hangovers": rows, "continue_ms": CONTINUE_MS}))
        return 0
    print(f"{len(plain)} questions; {len(data['paused'])} paused questions at pauses {PAUSES_S} s; "
          f"pad {PAD_MS} ms, min speech {MIN_SPEECH_MS} ms")
    print(f"{'hangover':>9} {'decided after':>14} {'plain cut':>10}  paused questions cut in two, by pause (s)")
    for r in rows:
        cuts = "  ".join(f"{p}:{n}/{r['paused_each']}" for p, n in r["paused_cut"].items())
        print(f"{r['hangover_ms']:>7} ms {str(r['decided_after_ms_p50']) + ' ms':>14} {r['plain_cut']:>4}/{r['plain']:<5}  {cuts}"
              f"   joined again (CONTINUE_MS={CONTINUE_MS}): " + "  ".join(f"{p}:{n}" for p, n in r["joined_again_by_continue"].items())
              + (f"; plain cut: {r['plain_cut_questions']}, joined again {r['plain_joined_again_by_continue']}" if r["plain_cut"] else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
