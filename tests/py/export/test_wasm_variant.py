"""The SmolLM2 bundle's onnxruntime-web WASM variant (model.wasm.onnx), when the bundle is built.

Natively "wasm" is not a provider, so the variant file is run directly with onnxruntime CPU and
compared with fp32. The builder's fp32 export is not kept in the bundle: the reference is the
recorded fp32 greedy tokens below (onnxruntime CPU, genai fp32 export, chat template), or the
greedy tokens of ONNXPIPE_FP32_REFERENCE (an fp32 model.onnx) when that is set.

The variant stores its MatMul weights as fp16 and computes in fp32 (the Casts fold at load):
measured 224/224 greedy tokens equal to fp32's over 7 chat prompts x 32, teacher-forced top-1
100%. Two of those prompts are checked here, all 32 tokens (the former int8 variant lost the
Romeo prompt at token 10).
"""

from __future__ import annotations

import json
import os

import pytest

from onnxpipe.export.manifest import MANIFEST_NAME, file_sha256

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUNDLE = os.path.join(ROOT, "public", "models", "smollm2-135m-instruct")
VARIANT = "model.wasm.onnx"
# fp32 greedy tokens (32) per chat prompt, with a word the answer must contain.
FP32_TOKENS = {
    # "The capital of France is Paris.<|im_end|>\n<|im_end|>..."
    "What is the capital of France?": ("Paris", [504, 3575, 282, 4649, 314, 7042, 30, 2, 198, 2, 1, 9690, 198, 2,
                                                 198, 1, 4093, 198, 57, 5248, 3946, 288, 7198, 253, 725, 1406, 281,
                                                 260, 2342, 30, 339, 3543]),
    "Who wrote Romeo and Juliet?": ("Shakespeare", [504, 1977, 282, 30493, 284, 29117, 411, 4967, 12081, 314, 10866,
                                                    288, 260, 216, 33, 39, 373, 29, 9051, 3432, 37857, 284, 5720, 30,
                                                    378, 1238, 28, 2855, 281, 216, 33, 37]),
}

pytestmark = pytest.mark.skipif(not os.path.isfile(os.path.join(BUNDLE, VARIANT)),
                                reason="bundle not built (make models)")


def _tokenizer():
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=os.path.join(BUNDLE, "tokenizer.json"))
    with open(os.path.join(BUNDLE, "chat_template.jinja"), encoding="utf-8") as f:
        tokenizer.chat_template = f.read()
    return tokenizer


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


def test_variant_weights_are_fp16_cast_to_fp32():
    import onnx
    from onnx import TensorProto

    graph = onnx.load(os.path.join(BUNDLE, VARIANT), load_external_data=False).graph
    types = {init.name: init.data_type for init in graph.initializer}
    made_by = {o: n for n in graph.node for o in n.output}
    matmuls = [n for n in graph.node if n.op_type == "MatMul"]
    assert len(matmuls) == 30 * 5 + 1  # qkv, o, gate, up, down per layer + lm_head
    for node in matmuls:
        cast = made_by.get(node.input[1])
        assert cast is not None and cast.op_type == "Cast", node.name
        assert types.get(cast.input[0]) == TensorProto.FLOAT16, node.name
    big_fp32 = [i.name for i in graph.initializer if i.data_type == TensorProto.FLOAT and
                len(i.dims) == 2 and i.dims[0] * i.dims[1] > 1 << 20]
    assert not big_fp32, big_fp32  # one fp16 table serves both the embedding and lm_head


@pytest.mark.parametrize("prompt", sorted(FP32_TOKENS))
def test_variant_greedy_equals_fp32(prompt):
    from onnxpipe.export.wasm_variant import agreement, greedy_tokens

    tokenizer = _tokenizer()
    ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                        tokenize=True, return_dict=False)
    word, reference = FP32_TOKENS[prompt]
    fp32_model = os.environ.get("ONNXPIPE_FP32_REFERENCE")
    if fp32_model:
        reference = greedy_tokens(fp32_model, ids, len(reference))
    got = greedy_tokens(os.path.join(BUNDLE, VARIANT), ids, len(reference), threads=1)
    text = tokenizer.decode(got)
    assert agreement(reference, got) == len(reference), (got, text)
    assert word in text, text
