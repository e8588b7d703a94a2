"""Real-time factor of a transcription bundle (Whisper base), natively and in headless Chromium.

Real-time factor = seconds of audio transcribed per second of compute (above 1: faster than
real time). The same WAV (sentences the Piper voice speaks, 22050 Hz, so the resampling graph
runs too) is transcribed once to warm up and once measured, by:
  native   Pipeline.transcribe (onnxruntime, this process)
  browser  node tests/e2e/run-bundle.mjs --audio ... (the real worker: Pyodide -> onnxruntime-web
           WASM), with 1 and 2 WASM threads
The tokens of every run are compared with the native ones. A benchmark, not a test: it prints
figures and never fails on speed.

    PYTHONPATH=py python bench/asr_rtf.py [BUNDLE] [--voice PIPER_BUNDLE] [--threads 1,2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import onnxpipe

TEXT = ("Speech recognition runs entirely in your browser, with no server at all. "
        "It hears each sentence and writes it down. The weather will be sunny tomorrow.")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def render(voice: str, path: str) -> None:
    result = onnxpipe.load(voice).speak(TEXT, noise_scale=0, noise_w=0)
    with open(path, "wb") as f:
        f.write(result.wav())


def native(bundle: str, wav: str) -> dict:
    from onnxpipe.audio import decode_wav

    with open(wav, "rb") as f:
        samples, rate, _ = decode_wav(f.read())
    pipe = onnxpipe.load(bundle)
    pipe.transcribe(samples, rate)                     # warm-up: first runs allocate
    result = pipe.transcribe(samples, rate)
    return {"audio_seconds": result.audio_seconds, "compute_seconds": result.compute_seconds,
            "rtf": result.audio_seconds / result.compute_seconds, "tokens": result.tokens,
            "text": result.text}


def browser(bundle: str, wav: str, threads: int) -> dict:
    cmd = ["node", os.path.join(ROOT, "tests", "e2e", "run-bundle.mjs"), bundle, "--audio", wav,
           "--threads", str(threads), "--repeat", "2", "--json"]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout)
    return {"audio_seconds": out["audio_seconds"], "compute_seconds": out["compute_seconds"],
            "rtf": out["audio_seconds"] / out["compute_seconds"], "tokens": out["tokens"],
            "threads": out["threads"], "load_ms": out["browser"]["load_ms"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", nargs="?", default=os.path.join("public", "models", "whisper-base"))
    parser.add_argument("--voice", default=os.path.join("public", "models", "piper-en-us-joe"))
    parser.add_argument("--threads", default="1,2", help="WASM thread counts to measure")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wav = os.path.join(tmp, "speech.wav")
        render(args.voice, wav)
        rows = {"native": native(args.bundle, wav)}
        for n in [int(t) for t in args.threads.split(",") if t]:
            rows[f"browser wasm {n} thread{'s' if n > 1 else ''}"] = browser(args.bundle, wav, n)
    reference = rows["native"]["tokens"]
    for row in rows.values():
        row["same_tokens_as_native"] = row.pop("tokens") == reference
    if args.json:
        print(json.dumps({"text": rows["native"].pop("text"), "rows": rows}))
        return 0
    print(f"transcript: {rows['native'].pop('text')}")
    print(f"{'runtime':<24}{'audio s':>9}{'compute s':>11}{'x real time':>13}  same tokens")
    for name, row in rows.items():
        print(f"{name:<24}{row['audio_seconds']:>9.2f}{row['compute_seconds']:>11.2f}{row['rtf']:>13.2f}  "
              f"{row['same_tokens_as_native']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
