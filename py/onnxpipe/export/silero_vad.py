"""Build the Silero VAD v5 bundle from the npm package `@ricky0123/vad-web` (a devDependency).

    PYTHONPATH=py python -m onnxpipe.export.silero_vad [OUT_DIR]

The package ships Silero's own ONNX export as ``dist/silero_vad_v5.onnx``. We copy it next to
the committed pipeline.json after checking its hash, check that pipeline.json's declarations
(recurrent state, streamed input, sample rate input, output) fit the model's real I/O, and
write manifest.json. A `.built` stamp makes a second run a no-op.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

from onnxpipe.export import build_stamp
from onnxpipe.export.manifest import file_sha256

PACKAGE = "@ricky0123/vad-web"
VERSION = "0.0.31"
MODEL = "silero_vad_v5.onnx"
SHA256 = "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f"   # of the 0.0.31 file
RECIPE_VERSION = 1
DEFAULT_OUT = os.path.join("public", "models", "silero-vad")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PACKAGE_DIR = os.path.join(ROOT, "node_modules", *PACKAGE.split("/"))


def log(msg: str) -> None:
    print(f"[silero-vad] {msg}", flush=True)


def package_model() -> str:
    """The model file inside the installed npm package (its version checked)."""
    meta = os.path.join(PACKAGE_DIR, "package.json")
    if not os.path.isfile(meta):
        raise SystemExit(f"{PACKAGE} is not installed in node_modules (npm ci; it is a devDependency)")
    with open(meta, encoding="utf-8") as f:
        version = json.load(f)["version"]
    if version != VERSION:
        raise SystemExit(f"{PACKAGE} {version} is installed; this builder is for {VERSION} (npm ci)")
    path = os.path.join(PACKAGE_DIR, "dist", MODEL)
    if not os.path.isfile(path):
        raise SystemExit(f"{PACKAGE}: dist/{MODEL} is missing")
    if file_sha256(path) != SHA256:
        raise SystemExit(f"{PACKAGE}: dist/{MODEL} sha256 differs from the {VERSION} release (npm ci)")
    return path


def check_pipeline_json(out_dir: str) -> None:
    """Load the bundle: every declaration is checked against the model's own inputs and outputs."""
    from onnxpipe.api import load

    pipe = load(out_dir, text=False)
    if pipe.kind != "voice-activity":
        raise SystemExit(f"{out_dir}/pipeline.json does not load as a voice activity detector ({pipe.kind})")


def build(out_dir: str, force: bool = False) -> bool:
    """Build (or confirm) the bundle; True when something was written."""
    source = package_model()
    inputs = {"recipe_version": RECIPE_VERSION, "package": PACKAGE, "version": VERSION, "sha256": SHA256}
    if not force and build_stamp.up_to_date(out_dir, inputs, (MODEL,)):
        log(f"{out_dir} is up to date")
        return False
    shutil.copyfile(source, os.path.join(out_dir, MODEL))
    check_pipeline_json(out_dir)
    build_stamp.finish(out_dir, inputs, log)
    return True


def main(argv: list[str] | None = None) -> int:
    return build_stamp.main(__doc__, DEFAULT_OUT, build, argv)


if __name__ == "__main__":
    sys.exit(main())
