"""Real-time factor of a speech bundle, natively and in headless Chromium, side by side.

Real-time factor = seconds of audio made per second of compute (above 1: faster than real
time). The same sentence, noise scales at 0 (so both make the same samples), spoken once to
warm up and once measured, by:
  native   python -m onnxpipe tts (onnxruntime, this process)
  browser  node tests/e2e/run-bundle.mjs --text ... (the real worker: Pyodide -> onnxruntime-web
           WASM), with 1 and 2 WASM threads
A benchmark, not a test: it prints figures and never fails on speed.

    PYTHONPATH=py python bench/speech_rtf.py [BUNDLE] [--threads 1,2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import onnxpipe

TEXT = ("Speech synthesis runs entirely in your browser, with no server at all. "
        "The voice reads each sentence as soon as it is ready.")
CONTROLS = {"noise_scale": 0.0, "noise_w": 0.0}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def native(bundle: str) -> dict:
    pipe = onnxpipe.load(bundle)
    pipe.speak(TEXT, **CONTROLS)                  # warm-up: first runs allocate
    result = pipe.speak(TEXT, **CONTROLS)
    return {"audio_seconds": result.audio_seconds, "compute_seconds": result.compute_seconds,
            "rtf": result.real_time_factor}


def browser(bundle: str, threads: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["node", os.path.join(ROOT, "tests", "e2e", "run-bundle.mjs"), bundle, "--text", TEXT,
               "--out", os.path.join(tmp, "b.wav"), "--threads", str(threads), "--repeat", "2", "--json"]
        for name, value in CONTROLS.items():
            cmd += ["--set", f"{name}={value}"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
    result = json.loads(out.stdout)
    return {"audio_seconds": result["audio_seconds"], "compute_seconds": result["compute_seconds"],
            "rtf": result["real_time_factor"], "load_ms": result["browser"]["load_ms"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", nargs="?", default=os.path.join("public", "models", "piper-en-us-joe"))
    parser.add_argument("--threads", default="1,2", help="WASM thread counts to measure")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = {"native": native(args.bundle)}
    for n in [int(t) for t in args.threads.split(",") if t]:
        rows[f"browser wasm {n} thread{'s' if n > 1 else ''}"] = browser(args.bundle, n)
    if args.json:
        print(json.dumps(rows))
        return 0
    base = rows["native"]["rtf"]
    print(f"{os.path.basename(os.path.normpath(args.bundle))}: {rows['native']['audio_seconds']:.2f} s of audio, "
          f"same sentence, noise 0, warm run")
    print(f"{'driver':<26}{'compute s':>10}{'x real time':>13}{'vs native':>11}")
    for name, row in rows.items():
        print(f"{name:<26}{row['compute_seconds']:>10.3f}{row['rtf']:>13.2f}{row['rtf'] / base:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
