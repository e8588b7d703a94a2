"""Generation in one shape: the loop steps a Sequence and every result travels in the
GenerationStep responses it yields (loops/sequence.py); cancel and the per-step mask are
arguments of the sequence, never attributes set on the loop."""

from __future__ import annotations

import pytest

import onnxpipe
from onnxpipe.errors import InputError
from onnxpipe.loops import GenerationStep, Sequence
from onnxpipe.search.stopping import stop_ids
from tests.fixtures import tiny_models

PROMPT = [5, 17, 42, 9, 100, 3]
GREEDY = {"do_sample": False, "ignore_eos": True}


@pytest.fixture(scope="module")
def pipe():
    return onnxpipe.load(tiny_models.ensure("genai_llama_noshare"))


def _sequence(pipe, new_ids, max_new_tokens=6, cancel=None, logit_mask=None, **search):
    loaded = pipe.loaded
    opts = loaded.options({**GREEDY, **search}, max_new_tokens)
    return Sequence([], new_ids, opts, stop_ids(opts, loaded.eos), loaded.sampler(opts),
                    cancel=cancel, logit_mask=logit_mask)


def _run(pipe, seq) -> list[GenerationStep]:
    pipe.reset()
    loaded = pipe.loaded
    return list(loaded.loop(loaded.executor).run(seq))


def test_the_last_response_carries_the_finish_and_the_timings(pipe):
    want = pipe.generate(input_ids=PROMPT, max_new_tokens=6, **GREEDY).tokens
    seq = _sequence(pipe, PROMPT)
    steps = _run(pipe, seq)
    assert [s.token for s in steps] == want
    assert all(s.finish_reason is None and s.timing is None and s.outputs is None for s in steps[:-1])
    last = steps[-1]
    assert last.finish_reason == "length" and last.timing is seq.timing and last.outputs == {}
    assert last.timing.decode_tokens == len(want) - 1 and last.speculation is None
    # the sequence owns its ids: the state holds the prompt and every token but the last
    assert seq.ids == PROMPT + want[:-1] and seq.generated == want
    assert pipe.executor.length == len(seq.ids)


def test_the_loop_holds_no_per_sequence_state(pipe):
    loop = pipe.loaded.loop(pipe.loaded.executor)
    assert set(vars(loop)) == {"executor", "extra"}
    assert not hasattr(loop, "cancel") and not hasattr(loop, "final_outputs") and not hasattr(loop, "sequences")


def test_cancel_is_an_argument_and_ends_with_a_tokenless_response(pipe):
    calls = []
    seq = _sequence(pipe, PROMPT, cancel=lambda: calls.append(1) or len(calls) >= 2)
    steps = _run(pipe, seq)
    assert [s.finish_reason for s in steps] == [None, None, "cancelled"]
    assert steps[-1].token is None and steps[-1].timing is seq.timing
    assert pipe.executor.length == len(seq.ids) == len(PROMPT) + 1


def test_logit_mask_sees_the_generated_ids_and_bans_what_it_returns(pipe):
    want = pipe.generate(input_ids=PROMPT, max_new_tokens=4, **GREEDY).tokens
    seen, banned = [], []

    def ban_greedy(generated):
        seen.append(list(generated))
        banned.append([want[len(generated)]] if len(generated) < len(want) else [])
        return banned[-1]

    got = [s.token for s in _run(pipe, _sequence(pipe, PROMPT, 4, logit_mask=ban_greedy))]
    assert seen == [got[:i] for i in range(len(got))]   # called before every pick
    assert got[0] != want[0] and all(t not in b for t, b in zip(got, banned))


def test_logit_mask_through_generate_and_refused_with_beams(pipe):
    plain = pipe.generate(input_ids=PROMPT, max_new_tokens=3, **GREEDY).tokens
    masked = pipe.generate(input_ids=PROMPT, max_new_tokens=3, logit_mask=lambda g: [plain[0]], **GREEDY)
    assert plain[0] not in masked.tokens
    with pytest.raises(InputError, match="logit_mask: beam search"):
        pipe.generate(input_ids=PROMPT, max_new_tokens=3, num_beams=2, logit_mask=lambda g: (), **GREEDY)


def test_a_conversation_cuts_the_held_ids_through_their_owner(pipe):
    first = pipe.generate(input_ids=PROMPT, max_new_tokens=6, **GREEDY).tokens
    held = pipe.history
    copy = list(held)
    new_ids = pipe.conversation.continue_from(PROMPT + first[:2] + [7])
    assert new_ids == [7] and pipe.history == PROMPT + first[:2]
    assert held == copy[:len(PROMPT) + 2]   # the sequence's own list, cut by the sequence itself
    more = pipe.generation.collect(new_ids, len(PROMPT) + 3, pipe.loaded.options(GREEDY, 3))
    assert len(more.tokens) == 3 and more.cached_tokens == len(PROMPT) + 2
    assert pipe.history is not held and pipe.history[:len(held)] == held
