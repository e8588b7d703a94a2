"""Kokoro-82M real-time factors natively and in headless Chromium, side by side, with kokoro-js.

Real-time factor = seconds of audio made per second of compute (above 1: faster than real
time). One sentence, voice jm_kumo, one warm-up speech and one measured, by:
  native int8       onnxpipe in this process (onnxruntime) on kokoro.int8.onnx (the package's file)
  native wasm file  the same on kokoro.wasm.onnx (--variant wasm: the browser's file)
  browser int8      node tests/e2e/run-bundle.mjs --text ... --variant cpu (the real worker:
                    Pyodide -> onnxruntime-web WASM) on kokoro.int8.onnx, 1 thread
  browser           the same worker on the bundle's wasm file (kokoro.wasm.onnx: convolutions as
                    uint8 x int8 MatMulInteger, the same integers), 1 and 2 threads
  browser fp16w     the worker on export/kokoro_variant.py's fp16-stored, fp32-compute variant
                    (made once into build/bench/kokoro-82m-float/, a copy of the bundle whose
                    pipeline.json maps wasm to it), 1 thread
  kokoro-js         kokoro-js 1.2.1 (transformers.js 3.8 + its onnxruntime-web) on the same int8
                    weights and sentence (bench/kokoro_js.mjs: its hub requests answered locally;
                    onnxruntime-web's default thread count on 2 cores is 1)
The last column divides each real-time factor by kokoro-js's. kokoro-js is a peer installed
outside package.json (see bench/kokoro_js.mjs); without it that column uses issue 11's figure
(0.40x, 1 thread, a 3.7 s sentence) and says so.
A benchmark, not a test: it prints figures and never fails on speed.

    PYTHONPATH=py python bench/kokoro_rtf.py [BUNDLE] [--threads 1,2] [--no-variant] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import onnxpipe

TEXT = "The quick brown fox jumps over the lazy dog near the quiet river bank."
CONTROLS = {"voice": "jm_kumo"}
KOKORO_JS_RTF = 0.40      # issue 11: kokoro-js 1.2.1, 1 thread, 3.7 s sentence (used when it can't run here)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KOKORO_JS = os.path.join(ROOT, "build", "bench-kokoro-js", "node_modules", "kokoro-js", "dist", "kokoro.web.js")
VARIANT_DIR = os.path.join(ROOT, "build", "bench", "kokoro-82m-float")
VARIANT_FILE = "kokoro.fp16.onnx"


def native(bundle: str, variant: str | None = None) -> dict:
    pipe = onnxpipe.load(bundle, variant=variant)
    pipe.speak(TEXT, **CONTROLS)                  # warm-up: first runs allocate
    result = pipe.speak(TEXT, **CONTROLS)
    return {"audio_seconds": result.audio_seconds, "compute_seconds": result.compute_seconds,
            "rtf": result.real_time_factor}


def browser(bundle: str, threads: int, variant: str | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["node", os.path.join(ROOT, "tests", "e2e", "run-bundle.mjs"), bundle, "--text", TEXT,
               "--out", os.path.join(tmp, "b.wav"), "--threads", str(threads), "--repeat", "2", "--json"]
        if variant:
            cmd += ["--variant", variant]
        for name, value in CONTROLS.items():
            cmd += ["--set", f"{name}={value}"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
    result = json.loads(out.stdout)
    return {"audio_seconds": result["audio_seconds"], "compute_seconds": result["compute_seconds"],
            "rtf": result["real_time_factor"], "file": result["sessions"]["voice"]["file"]}


def variant_bundle(bundle: str) -> str:
    """A copy of the bundle (links to its files) whose wasm file is the fp16-stored variant."""
    from onnxpipe.export.kokoro_variant import make_variant

    os.makedirs(VARIANT_DIR, exist_ok=True)
    target = os.path.join(VARIANT_DIR, VARIANT_FILE)
    source = os.path.join(bundle, "kokoro.int8.onnx")
    if not os.path.exists(target) or os.path.getmtime(target) < os.path.getmtime(source):
        make_variant(source, target, "fp16")
    for name in os.listdir(bundle):
        link = os.path.join(VARIANT_DIR, name)
        if name in ("pipeline.json", "manifest.json") or os.path.lexists(link):
            continue
        os.symlink(os.path.abspath(os.path.join(bundle, name)), link)
    with open(os.path.join(bundle, "pipeline.json"), encoding="utf-8") as f:
        doc = json.load(f)
    doc["pipeline"]["sessions"]["voice"]["file"]["wasm"] = VARIANT_FILE
    with open(os.path.join(VARIANT_DIR, "pipeline.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    return VARIANT_DIR


def kokoro_js_hub(bundle: str) -> str:
    """The files kokoro-js fetches from the hub, made from this bundle (bench/kokoro_js.mjs serves
    them): the same int8 weights with its input/output names (input_ids, waveform), a tokenizer
    over vocab.json (each symbol one token, others removed, "$" = 0 around them), jm_kumo's
    table as the voice it is asked for (af_heart: kokoro-js accepts only its English names)."""
    import numpy as np
    import onnx

    hub = os.path.join(ROOT, "build", "bench", "kokoro-js-hub")
    model = os.path.join(hub, "onnx", "model_quantized.onnx")
    source = os.path.join(bundle, "kokoro.int8.onnx")
    os.makedirs(os.path.dirname(model), exist_ok=True)
    os.makedirs(os.path.join(hub, "voices"), exist_ok=True)
    if not os.path.exists(model) or os.path.getmtime(model) < os.path.getmtime(source):
        graph_model = onnx.load(source)
        renames = {"tokens": "input_ids", "audio": "waveform"}
        for value in list(graph_model.graph.input) + list(graph_model.graph.output):
            value.name = renames.get(value.name, value.name)
        for node in graph_model.graph.node:
            node.input[:] = [renames.get(n, n) for n in node.input]
            node.output[:] = [renames.get(n, n) for n in node.output]
        onnx.save(graph_model, model)
    with open(os.path.join(bundle, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)["vocab"]
    symbols = "".join(sorted(vocab))
    pad = {"id": "$", "type_id": 0}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": "$", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": {"type": "Replace", "pattern": {"Regex": "[^" + "".join(
            "\\" + c if c in "\\]^-[" else c for c in symbols) + "]"}, "content": ""},
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": ""}, "behavior": "Isolated", "invert": False},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": pad}, {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": pad}],
                           "pair": [{"SpecialToken": pad}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": pad}],
                           "special_tokens": {"$": {"id": "$", "ids": [0], "tokens": ["$"]}}},
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"$": 0, **vocab}, "unk_token": "$"},
    }
    files = {"tokenizer.json": tokenizer,
             "tokenizer_config.json": {"model_max_length": 512, "pad_token": "$", "unk_token": "$"},
             "config.json": {"model_type": "style_text_to_speech_2", "architectures": ["StyleTextToSpeech2Model"]}}
    for name, doc in files.items():
        with open(os.path.join(hub, name), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
    from onnxpipe.export.kokoro import sources

    with np.load(sources()["voices"]) as npz:
        npz["jm_kumo"].astype(np.float32).tofile(os.path.join(hub, "voices", "af_heart.bin"))
    return hub


def kokoro_js(bundle: str) -> dict:
    out = subprocess.run(["node", os.path.join(ROOT, "bench", "kokoro_js.mjs"), kokoro_js_hub(bundle),
                          "--text", TEXT, "--json"], check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", nargs="?", default=os.path.join("public", "models", "kokoro-82m"))
    parser.add_argument("--threads", default="1,2", help="WASM thread counts to measure the bundle's wasm file with")
    parser.add_argument("--no-variant", action="store_true", help="skip the float variant")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = {"native int8": native(args.bundle, "cpu"), "native wasm file": native(args.bundle, "wasm"),
            "browser int8, 1 thread": browser(args.bundle, 1, "cpu")}
    for n in [int(t) for t in args.threads.split(",") if t]:
        rows[f"browser, {n} thread{'s' if n > 1 else ''}"] = browser(args.bundle, n)
    if not args.no_variant:
        rows["browser fp16w, 1 thread"] = browser(variant_bundle(args.bundle), 1)
    if os.path.exists(KOKORO_JS):
        rows["kokoro-js 1.2.1 (1 thread)"] = peer = kokoro_js(args.bundle)
        reference, note = peer["rtf"], "kokoro-js measured in this run"
    else:
        reference, note = KOKORO_JS_RTF, (f"kokoro-js not installed: its {KOKORO_JS_RTF}x is issue 11's figure, "
                                          "not measured here")
    if args.json:
        print(json.dumps({"rows": rows, "kokoro_js_rtf": reference, "note": note}))
        return 0
    first = next(iter(rows.values()))
    print(f"{os.path.basename(os.path.normpath(args.bundle))}: {first['audio_seconds']:.2f} s of audio, "
          f"voice {CONTROLS['voice']}, warm run")
    print(f"{'driver':<30}{'compute s':>10}{'x real time':>13}{'vs kokoro-js':>14}")
    for name, row in rows.items():
        print(f"{name:<30}{row['compute_seconds']:>10.3f}{row['rtf']:>13.2f}{row['rtf'] / reference:>14.2f}")
    print(f"({note})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
