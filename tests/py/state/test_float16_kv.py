"""float16 end to end on onnxruntime: fp16 KV caches (separate and shared_buffer), fp16 logits
through the sampler graph, chat continuation (the float16 rewind graph).

Files are made by onnxpipe.export.precision.to_fp16 (inputs, KV and logits float16, as in
onnx-community's model_fp16.onnx). References: onnxruntime run by hand on the same file (exact:
same engine, same file, same feeding), the fp32 source under the margin rule (tests/agreement.py)
with FP16_LOGITS.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import onnxpipe
from onnxpipe.export.precision import to_fp16
from onnxpipe.state.kv_cache import KVCache
from tests.agreement import LogitsProbe, assert_greedy_agrees, margins
from tests.fixtures import tiny_models
from tests.fixtures.precision_variants import FP16_LOGITS, ort_greedy


def _kv(pipe) -> KVCache:
    (kv,) = [c for c in pipe.loaded.executor.components if isinstance(c, KVCache)]
    return kv


@pytest.fixture(scope="module")
def fp16_bundle():
    return tiny_models.ensure("torch_llama_fp16")


@pytest.fixture(scope="module")
def expected(fp16_bundle):
    return tiny_models.load_expected(fp16_bundle)


def test_greedy_equals_onnxruntime_on_the_same_file(fp16_bundle, expected):
    probe = LogitsProbe()
    pipe = onnxpipe.load(fp16_bundle, backend=probe)
    kv = _kv(pipe)
    assert kv.format == "separate" and {s.past.dtype for s in kv.slots} == {"float16"}
    assert pipe.loaded.executor.backend is probe
    steps = expected["max_new_tokens"]
    result = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=steps, ignore_eos=True)
    tokens, logits = ort_greedy(fp16_bundle / "model.onnx", expected["input_ids"], steps)
    assert result.tokens == tokens == expected["greedy_tokens"]
    # the sampler graph got the model's float16 logits themselves, bit for bit
    assert all(seen.dtype == np.float32 for seen in probe.seen)  # LogitsProbe widens, exactly
    np.testing.assert_array_equal(probe.step_logits(), logits)


def test_sampling_on_float16_logits_is_seeded_and_stays_in_the_vocabulary(fp16_bundle, expected):
    pipe = onnxpipe.load(fp16_bundle)
    opts = dict(do_sample=True, temperature=1.2, top_k=50, top_p=0.95, max_new_tokens=24, ignore_eos=True)
    a = pipe.generate(input_ids=expected["input_ids"], random_seed=5, **opts).tokens
    b = pipe.generate(input_ids=expected["input_ids"], random_seed=5, **opts).tokens
    assert a == b and len(a) == 24 and a != expected["greedy_tokens"][:24]


def test_chat_continuation_rewinds_a_float16_cache(fp16_bundle, expected):
    ids, greedy = expected["input_ids"], expected["greedy_tokens"]
    pipe = onnxpipe.load(fp16_bundle)
    pipe.generate(input_ids=ids, max_new_tokens=12, ignore_eos=True)
    follow = ids + greedy[:6] + [5, 9]        # a branch after 6 of the 11 cached tokens
    kept = pipe.conversation.continue_from(follow)  # slices each float16 cache (slice_seq_many_graph)
    assert kept == [5, 9] and len(pipe.history) == len(ids) + 6
    caches = [s.value.numpy() for s in _kv(pipe).slots]
    assert {c.dtype for c in caches} == {np.dtype(np.float16)}
    assert {c.shape[2] for c in caches} == {len(ids) + 6}
    got = pipe.generation.collect(kept, len(follow), pipe.loaded.options({"ignore_eos": True}, 10))
    assert got.cached_tokens == len(follow) - 2
    # a fresh run of the whole branch by hand: other chunking, other fp16 rounding of the cache
    want, logits = ort_greedy(fp16_bundle / "model.onnx", follow, 10)
    assert_greedy_agrees(got.tokens, want, margins(logits), FP16_LOGITS, "continued vs fresh (fp16)")


@pytest.fixture(scope="module")
def genai_fp16(tmp_path_factory):
    """fp16 copies of the onnxruntime-genai fixtures (GroupQueryAttention), share buffer on/off."""
    out = {}
    for name in ("genai_llama", "genai_llama_noshare"):
        src = tiny_models.ensure(name)
        dst = tmp_path_factory.mktemp(name + "_fp16")
        for f in ("genai_config.json", "tokenizer.json", "tokenizer_config.json"):
            shutil.copy(src / f, dst / f)
        model = json.loads((src / "genai_config.json").read_text())["model"]["decoder"]["filename"]
        to_fp16(src / model, dst / model)
        out[name] = dst
    return out


def test_shared_buffer_float16_cache_agrees_with_fp32(genai_fp16):
    expected = tiny_models.load_expected("genai_llama")
    steps = 40
    runs = {}
    for name, bundle in genai_fp16.items():
        pipe = onnxpipe.load(bundle)
        kv = _kv(pipe)
        assert kv.format == ("shared_buffer" if name == "genai_llama" else "separate")
        assert {s.past.dtype for s in kv.slots} == {"float16"}
        runs[name] = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=steps, ignore_eos=True).tokens
        if kv.format == "shared_buffer":
            assert kv.capacity >= len(expected["input_ids"]) + steps - 1
    probe = LogitsProbe()
    fp32 = onnxpipe.load(tiny_models.ensure("genai_llama"), backend=probe)
    want = fp32.generate(input_ids=expected["input_ids"], max_new_tokens=steps, ignore_eos=True).tokens
    assert want == expected["greedy_tokens"][:steps]
    for name, tokens in runs.items():
        assert_greedy_agrees(tokens, want, margins(probe.step_logits()), FP16_LOGITS, f"{name} fp16 vs fp32")
