"""The SmolLM2 bundle's onnxruntime-web WASM variant (model.wasm.onnx), when the bundle is built.

Natively "wasm" is not a provider, so the variant file is run directly with onnxruntime CPU and
compared with fp32. The builder's fp32 export is not kept in the bundle: the reference is the
recorded fp32 greedy tokens below (onnxruntime CPU, genai fp32 export, chat template), or the
greedy tokens of ONNXPIPE_FP32_REFERENCE (an fp32 model.onnx) when that is set.
"""

from __future__ import annotations

import json
import os

import pytest

from onnxpipe.export.manifest import MANIFEST_NAME, file_sha256

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUNDLE = os.path.join(ROOT, "public", "models", "smollm2-135m-instruct")
VARIANT = "model.wasm.onnx"
PROMPT = "What is the capital of France?"
# fp32 greedy tokens for PROMPT ("The capital of France is Paris.<|im_end|>\n<|im_end|>...").
FP32_TOKENS = [504, 3575, 282, 4649, 314, 7042, 30, 2, 198, 2, 1, 9690, 198, 2, 198, 1]

pytestmark = pytest.mark.skipif(not os.path.isfile(os.path.join(BUNDLE, VARIANT)),
                                reason="bundle not built (make models)")


def _prompt_ids() -> list[int]:
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=os.path.join(BUNDLE, "tokenizer.json"))
    with open(os.path.join(BUNDLE, "chat_template.jinja"), encoding="utf-8") as f:
        tokenizer.chat_template = f.read()
    return tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True,
                                         tokenize=True, return_dict=False), tokenizer


def test_variant_files_exist_and_are_in_the_manifest():
    with open(os.path.join(BUNDLE, MANIFEST_NAME), encoding="utf-8") as f:
        entries = {e["path"]: e for e in json.load(f)["files"]}
    for name in (VARIANT, VARIANT + ".data"):
        path = os.path.join(BUNDLE, name)
        assert os.path.isfile(path), name
        assert name in entries, f"{name} missing from manifest.json"
        assert entries[name]["bytes"] == os.path.getsize(path)
        assert entries[name]["sha256"] == file_sha256(path)


def test_pipeline_json_maps_providers_to_variants():
    with open(os.path.join(BUNDLE, "pipeline.json"), encoding="utf-8") as f:
        decoder = json.load(f)["pipeline"]["sessions"]["decoder"]
    assert decoder["file"]["cpu"] == "model.onnx"
    assert decoder["file"]["wasm"] == VARIANT
    for name in set(decoder["file"].values()):
        assert os.path.isfile(os.path.join(BUNDLE, name)), name
    assert decoder["external_data"]["cpu"] == ["model.onnx.data"]
    assert decoder["external_data"]["wasm"] == [VARIANT + ".data"]


def test_variant_io_matches_the_cpu_model():
    import onnx

    cpu = onnx.load(os.path.join(BUNDLE, "model.onnx"), load_external_data=False).graph
    wasm = onnx.load(os.path.join(BUNDLE, VARIANT), load_external_data=False).graph
    assert [i.name for i in wasm.input] == [i.name for i in cpu.input]
    assert [o.name for o in wasm.output] == [o.name for o in cpu.output]
    ops = {n.op_type for n in wasm.node}
    assert not ops & {"MatMulNBits", "GatherBlockQuantized"}, ops  # slow or missing in ort-web


def test_variant_greedy_agrees_with_fp32():
    from onnxpipe.export.wasm_variant import agreement, greedy_tokens

    ids, tokenizer = _prompt_ids()
    reference = FP32_TOKENS
    fp32_model = os.environ.get("ONNXPIPE_FP32_REFERENCE")
    if fp32_model:
        reference = greedy_tokens(fp32_model, ids, len(FP32_TOKENS))
    got = greedy_tokens(os.path.join(BUNDLE, VARIANT), ids, len(reference))
    text = tokenizer.decode(got)
    assert agreement(reference, got) >= 16, (got, text)
    assert "Paris" in text, text
