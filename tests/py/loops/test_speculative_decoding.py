"""Speculative decoding gives the tokens plain decoding gives, with fewer decoder passes.

Drafts are guesses: whatever a drafter proposes, the loop must keep only what the model picks.
So most tests here swap the prompt-lookup drafter for one that proposes the known answer with
a wrong token put in now and then (``Guesser``): every path (all accepted, rejected at once,
rejected mid-draft, a stop id inside a draft, the token budget) is taken on purpose, and the
result must be the tiny fixtures' greedy tokens, which are decisive by construction (their
every step's margin is above 2x the fp32 tolerance, tests/agreement.py): verifying k tokens in
one pass is another computation than one at a time, but on these no near tie can flip a token.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import onnxpipe
from onnxpipe.errors import InputError
from tests.py.ops.reference_sampler import reference_next_token
from onnxpipe.search import speculative
from tests.agreement import FP32_KERNELS, LogitsProbe
from tests.fixtures import tiny_models

CANT_REWIND = {"genai_gemma2": "sliding-window", "novel_recurrent": "can't be cut back",
               "genai_lfm2": "can't be cut back to a position inside a run",
               "genai_qwen35": "can't be cut back to a position inside a run",
               "tjs_lfm2": "can't be cut back to a position inside a run",
               "tjs_qwen35": "can't be cut back to a position inside a run"}
REWINDS = [n for n in tiny_models.NAMES if n not in CANT_REWIND]
LOOKUP = {"method": "prompt_lookup", "max_draft": 5}


class Guesser:
    """Proposes ``answer``'s next ids, one of them wrong in about half the drafts."""

    def __init__(self, answer: list[int], prompt_length: int, seed: int, vocab: int = 300):
        self.answer, self.prompt_length = answer, prompt_length
        self.rng, self.vocab = random.Random(seed), vocab

    def propose(self, ids: list[int], limit: int) -> list[int]:
        done = len(ids) - self.prompt_length
        draft = list(self.answer[done:done + limit])
        if draft and self.rng.random() < 0.5:
            i = self.rng.randrange(len(draft))
            draft[i] = (draft[i] + 1) % self.vocab
        return draft


@pytest.fixture
def guessing(monkeypatch):
    """Install a Guesser for ``answer`` as the prompt_lookup drafter."""
    def install(answer, prompt_length, seed=0):
        monkeypatch.setattr(speculative, "DRAFTERS",
                            {"prompt_lookup": lambda settings: Guesser(answer, prompt_length, seed)})
    return install


@pytest.mark.parametrize("name", REWINDS)
@pytest.mark.parametrize("seed", [0, 1])
def test_any_draft_gives_the_greedy_tokens(name, seed, guessing):
    bundle = tiny_models.ensure(name)
    expected = tiny_models.load_expected(bundle)
    want, ids = expected["greedy_tokens"], expected["input_ids"]
    guessing(want, len(ids), seed)
    pipe = onnxpipe.load(bundle)
    result = pipe.generate(input_ids=ids, max_new_tokens=len(want), do_sample=False, ignore_eos=True,
                           speculative=dict(LOOKUP, max_draft=2 + 3 * seed))
    assert result.tokens == want
    stats = result.speculative
    assert 0 < stats["accepted"] < stats["drafted"]      # some drafts held, some were cut
    assert stats["passes"] < len(want) - 1                # fewer passes than tokens
    assert stats["acceptance_rate"] == pytest.approx(stats["accepted"] / stats["drafted"], abs=1e-4)
    assert pipe.executor.length == len(pipe.history) == len(ids) + len(want) - 1


@pytest.mark.parametrize("name", sorted(CANT_REWIND))
def test_a_state_that_cant_go_back_is_refused(name):
    pipe = onnxpipe.load(tiny_models.ensure(name))
    with pytest.raises(InputError, match=CANT_REWIND[name]):
        pipe.generate(input_ids=[1, 2, 3], max_new_tokens=4, speculative=LOOKUP)


def test_a_stop_id_inside_an_accepted_draft_ends_there(guessing):
    bundle = tiny_models.ensure("torch_llama")
    expected = tiny_models.load_expected(bundle)
    want, ids = expected["greedy_tokens"], expected["input_ids"]
    stop_at = next(i for i in range(8, len(want)) if want[i] not in want[:i])
    guessing(want, len(ids), seed=3)
    pipe = onnxpipe.load(bundle)
    result = pipe.generate(input_ids=ids, max_new_tokens=len(want), do_sample=False,
                           stop_token_ids=[want[stop_at]], speculative=dict(LOOKUP, max_draft=8))
    assert result.tokens == want[:stop_at + 1] and result.finish_reason == "stop"
    assert pipe.executor.length == len(pipe.history) == len(ids) + stop_at


@pytest.mark.parametrize("budget", [1, 2, 7])
def test_the_token_budget_holds(budget, guessing):
    bundle = tiny_models.ensure("genai_llama")
    expected = tiny_models.load_expected(bundle)
    want, ids = expected["greedy_tokens"], expected["input_ids"]
    guessing(want, len(ids))
    pipe = onnxpipe.load(bundle)
    result = pipe.generate(input_ids=ids, max_new_tokens=budget, do_sample=False, ignore_eos=True,
                           speculative=dict(LOOKUP, max_draft=8))
    assert result.tokens == want[:budget] and result.finish_reason == "length"


def test_stopping_early_leaves_the_state_matching_the_history(guessing):
    bundle = tiny_models.ensure("genai_llama_noshare")     # separate KV tensors: rewinding slices them
    expected = tiny_models.load_expected(bundle)
    want, ids = expected["greedy_tokens"], expected["input_ids"]
    guessing(want, len(ids))
    pipe = onnxpipe.load(bundle)
    taken = []
    stream = pipe.stream(input_ids=ids, max_new_tokens=40, do_sample=False, ignore_eos=True,
                         speculative=dict(LOOKUP, max_draft=8))
    for event in stream:
        taken += event.token_ids
        if len(taken) >= 9:
            break
    stream.close()
    assert taken == want[:len(taken)]
    assert pipe.executor.length == len(pipe.history) == len(ids) + len(taken) - 1
    # and the state goes on from there as if nothing had been drafted
    more = pipe.generation.collect([taken[-1]], len(ids), pipe.loaded.options(
        {"do_sample": False, "ignore_eos": True, "max_new_tokens": 10}))
    assert more.tokens == want[len(taken):len(taken) + 10]


def near_boundary(logits_row, u: float, options: dict, slack: float = 1e-3) -> bool:
    """Would a nudge of the uniform by ``slack`` (or logits by about as much) change the pick?"""
    picks = {reference_next_token(logits_row, uniform=min(max(v, 0.0), 0.999999), **options)
             for v in (u - slack, u, u + slack)}
    return len(picks) > 1


@pytest.mark.parametrize("name", ["genai_qwen2", "tjs_llama", "novel_two_stage"])
def test_sampling_with_a_seed_gives_the_tokens_plain_sampling_gives(name, guessing):
    """A draft token is kept when the model samples that very token at its position, with the
    uniform plain decoding would use there (the draws of discarded positions are handed back):
    for a deterministic draft this is the standard accept-with-probability-p rule, and the output
    distribution, indeed every seeded run, is plain sampling's. Verifying in one pass is another
    computation, so a split is allowed only where the uniform lies within 1e-3 of a boundary."""
    bundle = tiny_models.ensure(name)
    ids = tiny_models.load_expected(bundle)["input_ids"]
    options = {"temperature": 1.3, "top_k": 40, "top_p": 0.95, "min_p": 0.0}
    probe = LogitsProbe()
    pipe = onnxpipe.load(bundle, backend=probe)
    spec_pipe = onnxpipe.load(bundle)
    for seed in range(4):
        probe.clear()
        plain = pipe.generate(input_ids=ids, max_new_tokens=32, do_sample=True, random_seed=seed,
                              ignore_eos=True, **options)
        guessing(plain.tokens, len(ids), seed)
        drafted = spec_pipe.generate(input_ids=ids, max_new_tokens=32, do_sample=True, random_seed=seed,
                                     ignore_eos=True, speculative=dict(LOOKUP, max_draft=4), **options)
        assert drafted.speculative["accepted"] > 0
        split = next((i for i, (a, b) in enumerate(zip(drafted.tokens, plain.tokens)) if a != b), None)
        if split is not None:
            rng = random.Random(seed)
            u = [rng.random() for _ in range(split + 1)][split]
            row = probe.step_logits()[split].tolist()
            assert near_boundary(row, u, options), f"seed {seed}: split at {split} is not a near tie"
        else:
            assert drafted.tokens == plain.tokens


def last_position_only(tmp_path):
    """torch_llama with its logits cut to the last position (as some exports do)."""
    import shutil

    import onnx
    from onnx import helper

    source = tiny_models.ensure("torch_llama")
    target = tmp_path / "last_only"
    shutil.copytree(source, target)
    path = next(p for p in target.glob("*.onnx"))
    model = onnx.load(path)
    out = next(o for o in model.graph.output if o.name == "logits")
    for node in model.graph.node:
        node.output[:] = ["all_logits" if n == "logits" else n for n in node.output]
    model.graph.initializer.append(helper.make_tensor("last", onnx.TensorProto.INT64, [1], [-1]))
    model.graph.initializer.append(helper.make_tensor("end", onnx.TensorProto.INT64, [1], [2**62]))
    model.graph.initializer.append(helper.make_tensor("seq_axis", onnx.TensorProto.INT64, [1], [1]))
    model.graph.node.append(helper.make_node("Slice", ["all_logits", "last", "end", "seq_axis"], ["logits"]))
    del out.type.tensor_type.shape.dim[:]
    onnx.save(model, path)
    return target


def test_a_decoder_that_returns_only_the_last_logits_is_refused_clearly(tmp_path):
    pipe = onnxpipe.load(last_position_only(tmp_path))
    ids = tiny_models.load_expected(tiny_models.ensure("torch_llama"))["input_ids"]
    plain = pipe.generate(input_ids=ids + ids, max_new_tokens=6, do_sample=False, ignore_eos=True)
    assert len(plain.tokens) == 6
    with pytest.raises(InputError, match="needs logits for every fed token"):
        pipe.generate(input_ids=ids + ids, max_new_tokens=20, do_sample=False, ignore_eos=True,
                      speculative={"method": "prompt_lookup", "ngram": 1})
    assert pipe.generate(input_ids=ids, max_new_tokens=3).tokens   # the pipeline stays usable


def test_prompt_lookup_itself_drafts_from_the_prompt():
    """The real drafter on a prompt that holds its own continuation: drafts are taken."""
    bundle = tiny_models.ensure("genai_qwen3")
    expected = tiny_models.load_expected(bundle)
    ids, want = expected["input_ids"], expected["greedy_tokens"]
    pipe = onnxpipe.load(bundle)
    # the prompt, then the model's own answer, then the prompt again: tokens may repeat
    prompt = ids + want[:24] + ids
    plain = pipe.generate(input_ids=prompt, max_new_tokens=24, do_sample=False, ignore_eos=True)
    drafted = pipe.generate(input_ids=prompt, max_new_tokens=24, do_sample=False, ignore_eos=True,
                            speculative={"method": "prompt_lookup", "max_draft": 6, "ngram": 3})
    assert drafted.speculative["drafted"] > 0
    probe = LogitsProbe()
    onnxpipe.load(bundle, backend=probe).generate(input_ids=prompt, max_new_tokens=24, do_sample=False,
                                                  ignore_eos=True)
    from tests.agreement import assert_greedy_agrees, margins
    assert_greedy_agrees(drafted.tokens, plain.tokens, margins(probe.step_logits()), FP32_KERNELS)
    assert np.isfinite(drafted.speculative["acceptance_rate"])
