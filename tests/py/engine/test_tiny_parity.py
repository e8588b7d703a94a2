"""Greedy tokens on tiny random-weight models equal the oracles', token for token (every greedy
step of a fixture is decisive: see tests/agreement.py).

genai_* fixtures are onnxruntime-genai bundles loaded unchanged (genai_config.json only);
their expected tokens are what transformers' generate and onnxruntime-genai both produced.
torch_llama is a plain torch.onnx export with past_key_values.{i}.key naming; novel_* are
architectures written for these tests, run from their pipeline.json with no code change.
"""

from __future__ import annotations

import pytest

import onnxpipe
from tests.agreement import FP32_KERNELS
from tests.fixtures import tiny_models


@pytest.mark.parametrize("name", tiny_models.NAMES)
def test_greedy_tokens_equal_the_oracles(name):
    bundle = tiny_models.ensure(name)
    expected = tiny_models.load_expected(bundle)
    # decisive by construction: every step's margin is above 2x the fp32 kernel tolerance, so
    # the margin rule (tests/agreement.py) leaves no step where the tokens may differ
    assert expected["min_logit_margin"] >= 2 * FP32_KERNELS
    pipe = onnxpipe.load(bundle)
    result = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=expected["max_new_tokens"],
                           do_sample=False, ignore_eos=True)
    assert result.tokens == expected["greedy_tokens"]
    assert result.finish_reason == "length"


@pytest.mark.parametrize("name", ["novel_recurrent", "novel_two_stage"])
def test_novel_architectures_have_no_preset_and_custom_names(name):
    bundle = tiny_models.ensure(name)
    spec = onnxpipe.load(bundle).spec
    assert spec.pipeline.extends is None
    assert any(w.to.startswith("outputs.") or w.from_.startswith("inputs.") for w in spec.pipeline.dataflow)
