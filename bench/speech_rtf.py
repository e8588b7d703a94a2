"""Real-time factor of a speech bundle natively, in the browser's worker and in a bare
onnxruntime-web loop on the same files, side by side; and Speak -> first audio on the TTS page.

Real-time factor = seconds of audio made per second of compute (above 1: faster than real
time). The same text, noise scales at 0 (so every driver makes the same samples from the same
file), spoken once to warm up and once measured, by:
  native     python -m onnxpipe tts (onnxruntime, this process), the bundle's cpu file
  worker     node tests/e2e/run-bundle.mjs --text ... (the real worker: Pyodide -> espeak-ng ->
             onnxruntime-web WASM) on the bundle's wasm file and on its cpu file (--variant cpu),
             with 1 and 2 WASM threads
  bare loop  bench/browser/bare_session.mjs: the voice session alone on onnxruntime-web, fed the
             inputs native onnxpipe gave it for the same sentences (phoneme ids, style rows),
             on both files, 1 and 2 threads, files interleaved in one page
  first audio  bench/browser/tts_first_audio.mjs: the TTS page (its own thread choice) speaking
             a paragraph; milliseconds from the Speak click to the first audio heard (median of 3)
Worker and native time counts phonemization, every session run and copying the samples out,
per sentence; the bare loop times the voice session's run only. A benchmark, not a test: it
prints figures and never fails on speed.

    PYTHONPATH=py python bench/speech_rtf.py [BUNDLE] [--threads 1,2] [--dist dist] [--no-page] [--json]
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
QUIET = {"noise_scale": 0.0, "noise_w": 0.0}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def controls_for(pipe) -> dict:
    """Noise off where the voice has noise controls (Kokoro has none: it is deterministic)."""
    names = {c.name for c in pipe.controls}
    return {k: v for k, v in QUIET.items() if k in names}


def native(bundle: str) -> tuple[dict, list[dict], str]:
    """The native row, the voice session's feeds per sentence (for the bare loop), its name."""
    pipe = onnxpipe.load(bundle)
    controls = controls_for(pipe)
    voice = pipe.spec.pipeline.output.session
    captured: list[dict] = []
    run = pipe.backend.run

    def recording(session, feeds, outputs, bound=None):
        if session.name == voice:
            captured.append({k: v.numpy() for k, v in feeds.items()})
        return run(session, feeds, outputs, bound)

    pipe.speak(TEXT, **controls)                  # warm-up: first runs allocate
    pipe.backend.run = recording
    result = pipe.speak(TEXT, **controls)
    pipe.backend.run = run
    row = {"audio_seconds": result.audio_seconds, "compute_seconds": result.compute_seconds,
           "rtf": result.real_time_factor}
    return row, captured, voice


def voice_files(bundle: str, voice: str) -> dict:
    """{"wasm": file, "cpu": file} of the voice session (the same file twice when there is one)."""
    with open(os.path.join(bundle, "pipeline.json"), encoding="utf-8") as f:
        file = json.load(f)["pipeline"]["sessions"][voice]["file"]
    if isinstance(file, str):
        return {"wasm": file, "cpu": file}
    return {"wasm": file.get("wasm", file.get("cpu")), "cpu": file.get("cpu", file.get("wasm"))}


def worker(bundle: str, threads: int, variant: str | None, controls: dict, dist: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["node", os.path.join(ROOT, "tests", "e2e", "run-bundle.mjs"), bundle, "--text", TEXT,
               "--out", os.path.join(tmp, "b.wav"), "--threads", str(threads), "--repeat", "2", "--json"]
        if variant:
            cmd += ["--variant", variant]
        for name, value in controls.items():
            cmd += ["--set", f"{name}={value}"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, "ONNXPIPE_E2E_DIST": dist})
    result = json.loads(out.stdout)
    return {"audio_seconds": result["audio_seconds"], "compute_seconds": result["compute_seconds"],
            "rtf": result["real_time_factor"], "load_ms": result["browser"]["load_ms"]}


def bare(bundle: str, feeds: list[dict], files: list[str], threads: str, sample_rate: int) -> dict:
    """{(file, threads): row} from bare_session.mjs on the captured feeds."""
    sets = []
    for f in feeds:
        sets.append({name: {"type": {"int64": "int64", "float32": "float32", "int32": "int32"}[str(v.dtype)],
                            "dims": list(v.shape), "data": v.reshape(-1).tolist()} for name, v in f.items()})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "feeds.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(sets, fh)
        out = subprocess.run(["node", os.path.join(ROOT, "bench", "browser", "bare_session.mjs"), bundle, path,
                              ",".join(dict.fromkeys(files)), "--threads", threads, "--rounds", "3"],
                             check=True, capture_output=True, text=True, cwd=ROOT)
    rows = {}
    for t, result in json.loads(out.stdout).items():
        for file, r in result["files"].items():
            audio = r["samples"] / sample_rate
            rows[(file, int(t))] = {"audio_seconds": audio, "compute_seconds": r["ms"] / 1000,
                                    "rtf": audio / (r["ms"] / 1000), "load_ms": r["load_ms"]}
    return rows


def first_audio(bundle: str, dist: str) -> dict:
    out = subprocess.run(["node", os.path.join(ROOT, "bench", "browser", "tts_first_audio.mjs"), "--dist", dist,
                          "--bundle", os.path.basename(os.path.normpath(bundle)), "--runs", "3", "--json"],
                         check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", nargs="?", default=os.path.join("public", "models", "piper-en-us-joe"))
    parser.add_argument("--threads", default="1,2", help="WASM thread counts to measure")
    parser.add_argument("--dist", default="dist", help="the built site (make web) the worker and the TTS page run from")
    parser.add_argument("--no-page", action="store_true", help="leave out the TTS page's first audio")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    counts = [int(t) for t in args.threads.split(",") if t]
    native_row, feeds, voice = native(args.bundle)
    controls = controls_for(onnxpipe.load(args.bundle))
    files = voice_files(args.bundle, voice)
    rows = {"native (cpu file)": native_row}
    for n in counts:
        rows[f"worker, wasm file, {n}t"] = worker(args.bundle, n, None, controls, args.dist)
        if files["cpu"] != files["wasm"]:
            rows[f"worker, cpu file, {n}t"] = worker(args.bundle, n, "cpu", controls, args.dist)
    rate = onnxpipe.load(args.bundle).spec.pipeline.output.audio.sample_rate
    for (file, n), row in bare(args.bundle, feeds, [files["wasm"], files["cpu"]], args.threads, rate).items():
        which = "wasm" if file == files["wasm"] else "cpu"
        rows[f"bare loop, {which} file, {n}t"] = row
    page = None if args.no_page else first_audio(args.bundle, args.dist)
    if args.json:
        print(json.dumps({"rows": rows, "files": files, "first_audio": page}))
        return 0
    name = os.path.basename(os.path.normpath(args.bundle))
    print(f"{name}: {native_row['audio_seconds']:.2f} s of audio, same text, noise 0, warm runs; "
          f"wasm file {files['wasm']}, cpu file {files['cpu']}")
    base = rows.get(f"bare loop, wasm file, {max(counts)}t", native_row)["rtf"]
    print(f"{'driver':<28}{'compute s':>10}{'x real time':>13}{'vs bare wasm ' + str(max(counts)) + 't':>18}")
    for label, row in rows.items():
        print(f"{label:<28}{row['compute_seconds']:>10.3f}{row['rtf']:>13.2f}{row['rtf'] / base:>18.2f}")
    if page is not None:
        m = page["median"]
        print(f"TTS page ({page['threads']} threads): Speak -> first audio {m['page_first_audio_ms']} ms "
              f"(arrival {m['arrival_ms']:.0f} ms; first piece {m['first_piece_audio_s']:.2f} s of audio: "
              f"\"{m['pieces'][0]}\"), paragraph {m['audio_seconds']:.2f} s at {m['rtf']:.2f}x real time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
