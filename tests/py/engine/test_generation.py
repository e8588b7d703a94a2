"""Search, stopping, streaming and chat continuation on a tiny onnxruntime-genai model."""

from __future__ import annotations

import pytest

import onnxpipe
from tests.agreement import FP32_KERNELS, LogitsProbe, assert_greedy_agrees, margins
from tests.fixtures import tiny_models


@pytest.fixture(scope="module")
def expected():
    return tiny_models.load_expected(tiny_models.ensure("genai_llama"))


@pytest.fixture(scope="module", params=["genai_llama", "genai_llama_noshare"])
def pipe(request):
    return onnxpipe.load(tiny_models.ensure(request.param))


def test_same_seed_same_tokens(pipe, expected):
    ids = expected["input_ids"]
    opts = dict(do_sample=True, temperature=1.5, top_k=0, top_p=0.95, max_new_tokens=32, ignore_eos=True)
    a = pipe.generate(input_ids=ids, random_seed=11, **opts).tokens
    b = pipe.generate(input_ids=ids, random_seed=11, **opts).tokens
    c = pipe.generate(input_ids=ids, random_seed=12, **opts).tokens
    assert a == b
    assert a != c
    assert a != expected["greedy_tokens"][:32]


def test_top_k_one_is_greedy(pipe, expected):
    result = pipe.generate(input_ids=expected["input_ids"], do_sample=True, top_k=1, random_seed=3,
                           max_new_tokens=16, ignore_eos=True)
    assert result.tokens == expected["greedy_tokens"][:16]


def test_repetition_penalty_changes_greedy_and_avoids_repeats(pipe, expected):
    plain = expected["greedy_tokens"][:48]
    result = pipe.generate(input_ids=expected["input_ids"], repetition_penalty=3.0,
                           max_new_tokens=48, ignore_eos=True)
    assert result.tokens != plain
    runs = max(sum(1 for _ in group) for group in _runs(result.tokens))
    assert runs < max(sum(1 for _ in group) for group in _runs(plain))


def _runs(tokens):
    import itertools

    return (list(g) for _, g in itertools.groupby(tokens))


def test_stop_token_ends_with_stop(pipe, expected):
    target = expected["greedy_tokens"][5]
    first = expected["greedy_tokens"].index(target)
    result = pipe.generate(input_ids=expected["input_ids"], stop_token_ids=[target], max_new_tokens=64)
    assert result.finish_reason == "stop"
    assert result.tokens == expected["greedy_tokens"][:first + 1]


def test_max_length_counts_the_prompt(pipe, expected):
    ids = expected["input_ids"]
    result = pipe.generate(input_ids=ids, max_length=len(ids) + 10, ignore_eos=True)
    assert result.finish_reason == "length"
    assert len(result.tokens) == 10


def test_stream_events_add_up_to_generate(pipe, expected):
    events = list(pipe.stream(input_ids=expected["input_ids"], max_new_tokens=20, ignore_eos=True))
    assert [t for e in events for t in e.token_ids] == expected["greedy_tokens"][:20]
    assert events[-1].finish_reason == "length"
    assert all(e.finish_reason is None for e in events[:-1])


def test_continuing_from_a_shared_prefix_gives_a_fresh_runs_tokens(pipe, expected):
    ids = expected["input_ids"]
    greedy = expected["greedy_tokens"]
    pipe.generate(input_ids=ids, max_new_tokens=12, ignore_eos=True)
    # the state now holds ids + 11 generated tokens; continue from a branch after 6 of them
    follow = ids + greedy[:6] + [5, 9]
    kept = pipe.conversation.continue_from(follow)
    assert kept == [5, 9] and len(pipe.history) == len(ids) + 6
    probe = LogitsProbe()
    fresh = onnxpipe.load(pipe.config.bundle_dir, backend=probe)
    want = fresh.generate(input_ids=follow, max_new_tokens=10, ignore_eos=True).tokens
    got = pipe.generation.collect(kept, len(follow), pipe.loaded.options({"ignore_eos": True}, 10))
    # off the fixture's greedy path nothing guarantees decisive steps: the margin rule
    assert_greedy_agrees(got.tokens, want, margins(probe.step_logits()), FP32_KERNELS, "continued vs fresh")
    assert len(got.tokens) == len(want)
    assert got.cached_tokens == len(follow) - 2
