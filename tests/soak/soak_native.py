"""Soak, natively: chat, speech and transcription generations mixed in ONE process, its
resident memory (VmRSS of /proc/self/status, after gc.collect()) sampled every ``every``
generations; prints progress, then start, end and max, and the growth rule of growth.py.

    python -m tests.soak.soak_native [--generations 1000] [--every 50] [--json]
        [--chat public/models/smollm2-135m-instruct] [--voice public/models/piper-en-us-joe]
        [--asr public/models/whisper-base] [--mix cst]

Natively one process holds all three pipelines, so the generations interleave one by one:
chat (8 greedy tokens of a reply to one of a few questions, a fresh conversation each time),
speech (one sentence), transcription (a sentence the voice spoke at start). Two generations
of each kind run first (warm-up) and the first sample is taken after them. --mix is the repeating
pattern of kinds (c chat, s speech, t transcription; the small test runs transcription, the
slow one, less often). Exits 1 when memory grew beyond the rule.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import onnxpipe

from .growth import growth

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "public" / "models"
QUESTIONS = ["What is the capital of France?", "Name a color.", "Say hello.", "What is two plus two?"]
SENTENCES = ["It is cold outside.", "Close the window, please.", "The kettle is on."]
HEARD = "The quick brown fox jumps over the lazy dog."
KINDS = {"c": "chat", "s": "speech", "t": "transcription"}
# onnxruntime's arenas settle only after a session's second run (Whisper's: +110 MB then)
WARM_UP = 2


def rss_bytes() -> int:
    """This process's resident set now (VmRSS, Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmRSS line (not Linux?)")


class Mix:
    """The three pipelines and the i-th generation of the mix."""

    def __init__(self, chat: Path, voice: Path, asr: Path, mix: str = "cst", tokens: int = 8):
        bad = sorted(set(mix) - set(KINDS))
        if not mix or bad:
            raise ValueError(f"mix: expected letters c (chat), s (speech), t (transcription), found {mix!r}")
        self.mix = mix
        self.chat, self.voice, self.asr = onnxpipe.load(chat), onnxpipe.load(voice), onnxpipe.load(asr)
        self.tokens = tokens
        heard = self.voice.speak(HEARD, noise_scale=0, noise_w=0)
        self.audio, self.rate = heard.samples, heard.sample_rate

    def run(self, i: int) -> str:
        """The i-th generation of the pattern; returns its kind."""
        kind = KINDS[self.mix[i % len(self.mix)]]
        self.run_kind(kind, i // len(self.mix))
        return kind

    def run_kind(self, kind: str, n: int) -> None:
        if kind == "chat":
            self.chat.reset()   # a fresh conversation: the state must not grow with the soak
            self.chat.chat([{"role": "user", "content": QUESTIONS[n % len(QUESTIONS)]}],
                           max_new_tokens=self.tokens, do_sample=False)
        elif kind == "speech":
            self.voice.speak(SENTENCES[n % len(SENTENCES)])
        else:
            self.asr.transcribe(self.audio, self.rate, max_new_tokens=self.tokens * 2)


def soak(mix: Mix, generations: int, every: int, log=lambda m: None) -> dict:
    """Run ``generations`` generations; RSS after warm-up and after every ``every``."""
    for n in range(WARM_UP):
        for kind in KINDS.values():
            mix.run_kind(kind, n)
    gc.collect()
    samples = [rss_bytes()]
    counts = dict.fromkeys(KINDS.values(), 0)
    start = time.perf_counter()
    for i in range(generations):
        counts[mix.run(i)] += 1
        if (i + 1) % every == 0:
            gc.collect()
            samples.append(rss_bytes())
            log(f"# {i + 1}/{generations}: rss {samples[-1] / 2**20:.1f} MiB "
                f"({time.perf_counter() - start:.0f} s)")
    return {"generations": generations, "every": every, "counts": counts,
            "seconds": time.perf_counter() - start, "rss_samples": samples,
            "rss_bytes": growth(samples, "rss_bytes")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generations", type=int, default=1000)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--chat", type=Path, default=MODELS / "smollm2-135m-instruct")
    ap.add_argument("--voice", type=Path, default=MODELS / "piper-en-us-joe")
    ap.add_argument("--asr", type=Path, default=MODELS / "whisper-base")
    ap.add_argument("--mix", default="cst", help="repeating pattern of kinds: c chat, s speech, t transcription")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.generations < 1 or a.every < 1:
        ap.error("--generations and --every want positive integers")
    out = soak(Mix(a.chat, a.voice, a.asr, a.mix), a.generations, a.every, log=lambda m: print(m, file=sys.stderr))
    r = out["rss_bytes"]
    if a.json:
        print(json.dumps(out))
    print(f"native RSS: start {r['first'] / 2**20:.1f} MiB, end {r['last'] / 2**20:.1f} MiB, "
          f"max {r['max'] / 2**20:.1f} MiB; tail - baseline {r['growth'] / 2**20:+.1f} MiB "
          f"(limit {r['limit'] / 2**20:.1f} MiB): {'within noise' if r['ok'] else 'GREW'}", file=sys.stderr)
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
