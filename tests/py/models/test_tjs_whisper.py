"""A transformers.js / Optimum Whisper folder (encoder_model.onnx + If-merged
decoder_model_merged.onnx, no pipeline.json) runs unchanged and gives transformers' tokens.

The tjs_whisper fixture's expected.json holds transformers `generate` greedy tokens and margins
on its fixed input_features (margin rule, tests/agreement.py); a second input is checked against
the fixture's own onnxruntime loop over the same files (transformers.js's way of feeding them).
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxpipe
from tests.agreement import FP32_KERNELS, assert_greedy_agrees
from tests.fixtures import tiny_models
from tests.fixtures.tjs_whisper import ort_greedy


@pytest.fixture(scope="module")
def whisper():
    bundle = tiny_models.ensure("tjs_whisper")
    exp = tiny_models.load_expected(bundle)
    feats = np.load(bundle / exp["input_features"])
    return bundle, exp, feats, onnxpipe.load(str(bundle))


def features(feats):
    return {"audio_features": (feats.reshape(-1).tolist(), feats.shape)}


def test_greedy_tokens_equal_transformers(whisper):
    bundle, exp, feats, pipe = whisper
    result = pipe.generate(inputs=features(feats), max_new_tokens=exp["max_new_tokens"])
    assert result.finish_reason == "length"
    assert len(result.tokens) == exp["max_new_tokens"]
    assert_greedy_agrees(result.tokens, exp["greedy_tokens"], exp["margins"], FP32_KERNELS, "tjs_whisper fp32")


def test_a_new_input_recomputes_the_cross_attention_cache(whisper):
    # the .encoder. keys/values come from the first step of each call: another input, other tokens
    bundle, exp, feats, pipe = whisper
    other = (feats[:, :, ::-1] * 0.7).copy()
    want = ort_greedy(bundle, other, exp["decoder_prefix"], 12)
    got = pipe.generate(inputs=features(other), max_new_tokens=12).tokens
    assert got == want and got != exp["greedy_tokens"][:12]
    again = pipe.generate(inputs=features(feats), max_new_tokens=exp["max_new_tokens"]).tokens
    assert_greedy_agrees(again, exp["greedy_tokens"], exp["margins"], FP32_KERNELS, "tjs_whisper again")


def test_translation_of_the_fixture(whisper):
    bundle, exp, _, pipe = whisper
    spec = pipe.loaded.spec
    assert spec.tokens.decoder_prefix == tuple(exp["decoder_prefix"])
    assert spec.tokens.eos == (exp["eos_token_id"],)
    assert spec.generation.suppress_tokens.always == (5, 6, 7, 50)
    assert spec.generation.suppress_tokens.at_start == (11, exp["eos_token_id"])
    assert spec.pipeline.state.cross_kv.past_pattern == "past_key_values.{layer}.encoder.{kv}"
    files = {name: s.file["cpu"] for name, s in spec.pipeline.sessions.items()}
    assert files == {"encoder": "onnx/encoder_model.onnx", "decoder": "onnx/decoder_model_merged.onnx"}
