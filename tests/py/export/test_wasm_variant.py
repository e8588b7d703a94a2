"""The SmolLM2 bundle's onnxruntime-web WASM variant (model.wasm.onnx), when the bundle is built.

Natively "wasm" is not a provider, so the variant file is run through onnxpipe with onnxruntime
CPU (``variant="wasm"``) and compared with the fp32 model it was made from: the package's GGUF
dequantized by transformers and run in torch now, greedy, with its logits.

The variant stores its MatMul weights as fp16 and computes in fp32 (the Casts fold at load):
measured 224/224 greedy tokens equal to fp32's over 7 chat prompts x 32, teacher-forced top-1
100%. Two of those prompts are checked here, all 32 tokens, under the margin rule of
tests/agreement.py (the former int8 variant lost the Romeo prompt at token 10).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from onnxpipe.export.manifest import MANIFEST_NAME, file_sha256
from tests.agreement import LogitsProbe, assert_greedy_agrees, margins, max_logit_difference

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUNDLE = os.path.join(ROOT, "public", "models", "smollm2-135m-instruct")
VARIANT = "model.wasm.onnx"
NEW_TOKENS = 32
# chat prompts, with a word fp32's answer contains
PROMPTS = {"What is the capital of France?": "Paris", "Who wrote Romeo and Juliet?": "Shakespeare"}
# fp16-rounded weights vs fp32 (torch): the reference's top-10 logits differ by <= 0.017 on these
# prompts here; greedy may split only where fp32's margin is below 2x this
FP16_WEIGHTS = 0.05

pytestmark = pytest.mark.skipif(not os.path.isfile(os.path.join(BUNDLE, VARIANT)),
                                reason="bundle not built (make models)")


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
    # the faithful file on every provider (bench/native_variants.py: the builder's int4 file agrees
    # with fp32 on no chat prompt); the int4 file is the one onnxruntime-genai opens
    for provider in ("cpu", "webgpu", "default"):
        assert decoder["file"][provider] == VARIANT
        assert decoder["external_data"][provider] == [VARIANT + ".data"]
    # the wasm provider's graph is the variant's with attention in standard ops, on its weights
    # (tests/py/export/test_unfused_attention.py)
    assert decoder["file"]["wasm"] == "model.web.onnx"
    assert decoder["external_data"]["wasm"] == [VARIANT + ".data"]
    assert decoder["file"]["int4"] == "model.onnx"
    assert decoder["external_data"]["int4"] == ["model.onnx.data"]
    for name in set(decoder["file"].values()):
        assert os.path.isfile(os.path.join(BUNDLE, name)), name


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


@pytest.fixture(scope="module")
def fp32():
    """The fp32 model the variant was made from (transformers, torch)."""
    from onnxpipe.export import smollm2

    return smollm2.load_fp32(smollm2.find_gguf())[0]


def fp32_greedy(model, ids: list[int], n: int) -> tuple[list[int], np.ndarray]:
    """Greedy tokens (no stop) and the logits of each step, torch with its KV cache."""
    import torch

    tokens, logits, past, feed = [], [], None, ids
    with torch.no_grad():
        for _ in range(n):
            out = model(torch.tensor([feed]), past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits.append(out.logits[0, -1].float().numpy())
            tokens.append(int(logits[-1].argmax()))
            feed = [tokens[-1]]
    return tokens, np.stack(logits)


@pytest.mark.parametrize("prompt", sorted(PROMPTS))
def test_variant_greedy_follows_fp32(prompt, fp32):
    import onnxpipe

    probe = LogitsProbe()
    pipe = onnxpipe.load(BUNDLE, backend=probe, variant="wasm")
    ids = pipe.chat_prompt_ids([{"role": "user", "content": prompt}])
    want, want_logits = fp32_greedy(fp32, ids, NEW_TOKENS)
    assert PROMPTS[prompt] in pipe.text.decode(want)
    got = pipe.generate(input_ids=ids, max_new_tokens=NEW_TOKENS, ignore_eos=True).tokens
    agreed = assert_greedy_agrees(got, want, margins(want_logits), FP16_WEIGHTS, prompt)
    steps = agreed.shared_steps
    assert max_logit_difference(probe.step_logits()[:steps], want_logits[:steps], top=10) <= FP16_WEIGHTS
