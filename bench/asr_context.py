"""Whisper's encoder on the speech only (``preprocessing.audio.context`` "speech") against the
whole 30 s window ("window", the reference): faithfulness and transcript time, natively.

Utterances of about 1 to 30 s are rendered by the project's voices (Piper joe, deterministic;
two Kokoro voices; espeak-ng in two voices) and transcribed by the same bundle loaded twice,
once per ``encode`` choice (a temporary copy of the bundle whose pipeline.json differs in that
key only). It prints, per utterance, whether the two transcripts are equal (and whether a
loop-looking decode fell back to the whole window) and the word error rate of each against the
text said, then the total; and the transcript time of 2 s, 5 s and
15 s utterances (median of --repeat runs after a warm-up) with both choices.

--browser 1,2 also takes those clips (resampled to 16 kHz by onnxpipe, written as WAV) to headless
Chromium (WASM), one browser per thread count (bench/browser_asr.mjs): onnxpipe's worker with
each choice, and transformers.js's automatic-speech-recognition pipeline on a folder of the same
weights (bench/whisper_tjs.py builds it; transformers.js from build/bench-node, bench/README.md),
greedy, English, no timestamps: each one's time and transcript per clip, in the same run.

A benchmark, not a test: it never fails on speed or on a differing transcript.

    PYTHONPATH=py python bench/asr_context.py [BUNDLE] [--quick] [--repeat 3] [--voices A,B]
                                              [--skip faithfulness|timings] [--browser 1,2] [--json]

--quick: one short Piper clip (a smoke run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import wave

import onnxpipe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "public", "models")
SENTENCES = [
    "Hello there.",   # the README example: under a second
    "Yes, please.",
    "What time is it?",
    "Turn on the lights in the kitchen.",
    "Can you tell me what the weather will be like tomorrow morning?",
    "It is cold outside. Could you close the window before we leave?",
    "We walked along the river until the sun went down, and then we took the last bus home.",
    "The library opens early in the morning. My sister plays the piano every evening after dinner, "
    "and our neighbors bought a small boat last summer.",
    "The train was late, so we waited on the platform for an hour. He painted the fence green and "
    "planted roses by the gate. Children were laughing in the park near the old church. "
    "Turn left at the bakery and you will see the station.",
    "The doctor said that I should sleep more and walk every day. Please bring me a glass of water "
    "and a piece of bread. Your browser turns this text into speech without a server. The quick "
    "brown fox jumps over the lazy dog. We walked along the river until the sun went down. "
    "Our neighbors bought a small boat last summer, and they sail it on the lake every weekend.",
    "The doctor said that I should sleep more and walk every day. Please bring me a glass of water "
    "and a piece of bread. Your browser turns this text into speech without a server. The quick "
    "brown fox jumps over the lazy dog. The library opens early in the morning. My sister plays the "
    "piano every evening after dinner, and our neighbors bought a small boat last summer.",
]
TIMED = {2: "Turn on the lights in the kitchen.",
         5: SENTENCES[5],
         15: SENTENCES[7] + " Our neighbors bought a small boat last summer."}
KOKORO_VOICES = ("jm_kumo", "jf_alpha")
ESPEAK_VOICES = ("en-us", "en-gb+f3")


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9 ]+", " ", text.lower().replace("'", "").replace("\u2019", "")).split()


def wer(said: str, heard: str) -> tuple[int, int]:
    """(word edits, words said)."""
    a, b = words(said), words(heard)
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1], len(a)


def variant(bundle: str, encode: str, into: str) -> str:
    """A copy of ``bundle`` (files linked) whose preprocessing.audio.context.encode is ``encode``."""
    out = os.path.join(into, encode)
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(bundle):
        if name not in ("pipeline.json", "manifest.json") and not os.path.exists(os.path.join(out, name)):
            os.symlink(os.path.join(os.path.abspath(bundle), name), os.path.join(out, name))
    with open(os.path.join(bundle, "pipeline.json"), encoding="utf-8") as f:
        doc = json.load(f)
    context = doc["preprocessing"]["audio"].get("context")
    if context is None:
        raise SystemExit(f"{bundle}/pipeline.json has no preprocessing.audio.context to switch")
    context["encode"] = encode
    with open(os.path.join(out, "pipeline.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return out


def espeak(text: str, voice: str) -> tuple[list[float], int]:
    with tempfile.NamedTemporaryFile(suffix=".wav") as tmp:
        subprocess.run(["espeak-ng", "-v", voice, "-w", tmp.name, text], check=True, capture_output=True)
        with wave.open(tmp.name, "rb") as w:
            rate, raw = w.getframerate(), w.readframes(w.getnframes())
    import array

    pcm = array.array("h", raw)
    return [s / 32768.0 for s in pcm], rate


def voices(quick: bool):
    """name -> speak(text) -> (samples, rate)."""
    piper = onnxpipe.load(os.path.join(MODELS, "piper-en-us-joe"))
    out = {"piper-joe": lambda t: _speech(piper.speak(t, noise_scale=0, noise_w=0))}
    if quick:
        return out
    kokoro = onnxpipe.load(os.path.join(MODELS, "kokoro-82m"))
    for v in KOKORO_VOICES:
        out[f"kokoro-{v}"] = lambda t, v=v: _speech(kokoro.speak(t, voice=v))
    for v in ESPEAK_VOICES:
        out[f"espeak-{v}"] = lambda t, v=v: espeak(t, v)
    return out


def _speech(result) -> tuple[list[float], int]:
    return list(result.samples), result.sample_rate


def browser(speech: str, window: str, wavs: list[str], threads: str, repeat: int) -> dict:
    """bench/browser_asr.mjs on the clips: onnxpipe (both choices) and transformers.js per thread count."""
    cmd = ["node", os.path.join(ROOT, "bench", "browser_asr.mjs"), "--speech", speech, "--window", window,
           "--threads", threads, "--repeat", str(repeat), *wavs]
    return json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, cwd=ROOT).stdout)


def timed(pipe, samples, rate, repeat: int) -> float:
    pipe.transcribe(samples, rate)   # warm-up: first runs of a shape allocate
    runs = []
    for _ in range(repeat):
        began = time.perf_counter()
        pipe.transcribe(samples, rate)
        runs.append(time.perf_counter() - began)
    return statistics.median(runs)


def print_browser(out: dict, timings: list[dict]) -> None:
    tjs = out.get("transformers_js_version")
    print(f"browser (headless Chromium, WASM), transcript stage per clip, median of the runs after a warm-up; "
          f"transformers.js {tjs or 'not installed'}:")
    for run in out["runs"]:
        print(f"  {run['threads']} thread(s):")
        for i, row in enumerate(timings):
            a, b = run["speech"][i], run["window"][i]
            c = run.get("transformers_js", [None] * len(timings))[i]
            print(f"    ~{row['target_seconds']:2d} s ({out['clips'][i]['seconds']:.1f} s): onnxpipe speech "
                  f"{a['wall_ms']:7.0f} ms, window {b['wall_ms']:7.0f} ms (x{b['wall_ms'] / a['wall_ms']:.2f}), "
                  + (f"transformers.js {c['wall_ms']:7.0f} ms (x{c['wall_ms'] / a['wall_ms']:.2f})" if c else
                     f"transformers.js: {run.get('transformers_js_error', 'not run')}"))
            print(f"      speech:          {a['text']}\n      window:          {b['text']}"
                  + (f"\n      transformers.js: {c['text']}" if c else ""))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", nargs="?", default=os.path.join(MODELS, "whisper-base"))
    parser.add_argument("--quick", action="store_true", help="one short Piper clip")
    parser.add_argument("--repeat", type=int, default=3, help="measured runs per timing (median)")
    parser.add_argument("--voices", help="comma-separated names to render with (default: all), e.g. "
                                         "piper-joe,espeak-en-us")
    parser.add_argument("--skip", choices=("faithfulness", "timings"), help="leave out one half")
    parser.add_argument("--browser", metavar="THREADS",
                        help="also time the clips in headless Chromium (WASM) at these thread counts, e.g. 1,2: "
                             "onnxpipe with each choice and transformers.js's Whisper pipeline")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = {"bundle": args.bundle, "clips": [], "timings": []}
    with tempfile.TemporaryDirectory() as tmp:
        speech = onnxpipe.load(variant(args.bundle, "speech", tmp))
        window = onnxpipe.load(variant(args.bundle, "window", tmp))
        speakers = voices(args.quick)
        chosen = args.voices.split(",") if args.voices else list(speakers)
        unknown = [v for v in chosen if v not in speakers]
        if unknown:
            raise SystemExit(f"--voices: no voice {', '.join(unknown)}; there are {', '.join(speakers)}")
        decodes = [0]   # window decodes, fallbacks to the whole window included
        for pipe in (speech, window):
            decode = pipe.transcription.decode

            def counted(*a, decode=decode, **k):
                decodes[0] += 1
                return decode(*a, **k)
            pipe.transcription.decode = counted
        texts = SENTENCES[2:3] if args.quick else SENTENCES
        totals = {"speech": [0, 0], "window": [0, 0]}
        for name, speak in speakers.items():
            if name not in chosen or args.skip == "faithfulness":
                continue
            for text in texts:
                samples, rate = speak(text)
                before = decodes[0]
                a, b = speech.transcribe(samples, rate), window.transcribe(samples, rate)
                fell_back = decodes[0] - before - len(a.windows) - len(b.windows)
                row = {"voice": name, "seconds": round(len(samples) / rate, 2), "said": text,
                       "speech": a.text, "window": b.text, "equal": a.text == b.text,
                       "windows": len(b.windows), "fell_back": fell_back}
                for key, result in (("speech", a), ("window", b)):
                    edits, n = wer(text, result.text)
                    totals[key][0] += edits
                    totals[key][1] += n
                    row[f"wer_{key}"] = round(edits / n, 4)
                report["clips"].append(row)
                if not args.json:
                    mark = ("same" if row["equal"] else "DIFF") + (" (fell back)" if fell_back else "")
                    print(f"{name:16} {row['seconds']:5.1f} s  {mark}  wer speech {row['wer_speech']:.3f} "
                          f"window {row['wer_window']:.3f}" + ("" if row["equal"] else
                                                               f"\n    speech: {a.text}\n    window: {b.text}"),
                          flush=True)
        clips = report["clips"]
        report["equal"] = sum(c["equal"] for c in clips)
        report["fell_back"] = sum(c["fell_back"] for c in clips)
        report["wer"] = {k: round(e / max(1, n), 4) for k, (e, n) in totals.items()}
        if not args.json and clips:
            print(f"equal transcripts: {report['equal']} of {len(clips)} ({report['fell_back']} fell back to the "
                  f"whole window); word error rate against the text said: "
                  f"speech {report['wer']['speech']:.4f}, window {report['wer']['window']:.4f}")
        piper = speakers["piper-joe"]
        wavs = []
        for target, text in ([] if args.skip == "timings" else [(2, TIMED[2])] if args.quick else TIMED.items()):
            samples, rate = piper(text)
            row = {"target_seconds": target, "seconds": round(len(samples) / rate, 2),
                   "speech_s": timed(speech, samples, rate, args.repeat),
                   "window_s": timed(window, samples, rate, args.repeat)}
            row["speedup"] = round(row["window_s"] / row["speech_s"], 2)
            if args.browser:
                from onnxpipe.audio import encode_wav

                at16k = list(speech.transcription.resample(samples, rate)[0])   # the same samples for every driver
                wav = os.path.join(tmp, f"{target}s.wav")
                with open(wav, "wb") as f:
                    f.write(encode_wav(at16k, 16000))
                wavs.append(wav)
            report["timings"].append(row)
            if not args.json:
                print(f"~{target:2d} s utterance ({row['seconds']:.1f} s): speech {row['speech_s'] * 1000:7.0f} ms, "
                      f"window {row['window_s'] * 1000:7.0f} ms, x{row['speedup']}", flush=True)
        if args.browser and wavs:
            report["browser"] = browser(os.path.join(tmp, "speech"), os.path.join(tmp, "window"), wavs, args.browser,
                                        args.repeat)
            if not args.json:
                print_browser(report["browser"], report["timings"])
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
