"""Continuous batching (loops/batched.py): sequences with different prompts, lengths, options and
seeds, joining at different steps, give the tokens each gives alone; cancel, a grammar row and
a stop id end one row and leave the others going; bundles whose state can't be batched say why.
Bundles: genai GroupQueryAttention with a shared buffer and with a separate present (right
placement), transformers.js and a torch export with fp16 caches (left placement).

Exact token ids: the tiny fixtures refuse greedy steps whose top-2 margin is small (the margin
rule of tests/agreement.py; docs/testing.md), and the batched logits differ from batch 1 by
float rounding (~1e-6 on tjs_llama's padded attention, none on GroupQueryAttention's rows), far
below what would move a pick; seeded draws are each row's own."""

from __future__ import annotations

import pytest

import onnxpipe
from onnxpipe.errors import InputError
from onnxpipe.grammar.formats import constraint_from
from onnxpipe.loops import Sequence
from onnxpipe.loops.autoregressive import PREFILL_CHUNK
from onnxpipe.loops.batched import BatchedDecoder, batchable
from onnxpipe.search.detokenize import IncrementalDetokenizer, TextStream
from onnxpipe.search.stopping import stop_ids
from tests.fixtures import tiny_models

BUNDLES = ["genai_llama", "genai_llama_noshare", "genai_qwen3", "tjs_llama", "torch_llama_fp16"]
# (prompt, max_new_tokens, search options, the step it joins at)
ROWS = [
    ([5, 17, 42, 9, 100, 3], 12, {"do_sample": False}, 0),
    ([7, 8, 9], 10, {"do_sample": True, "seed": 1, "temperature": 0.8}, 0),
    ([11] * 20, 14, {"do_sample": True, "seed": 7, "top_k": 5, "repetition_penalty": 1.3}, 2),
    ([2, 4, 6, 8], 9, {"do_sample": False, "repetition_penalty": 1.2}, 5),
]


@pytest.fixture(scope="module", params=BUNDLES)
def pipe(request):
    return onnxpipe.load(tiny_models.ensure(request.param))


def _text(pipe, stop_strings=()):
    text = pipe.loaded.text
    return TextStream(IncrementalDetokenizer(text.decode, skip_special_tokens_ids=frozenset(pipe.loaded.eos)),
                      tuple(stop_strings))


def _seq(pipe, prompt, max_new_tokens, search, cancel=None, grammar=None):
    search = {"ignore_eos": grammar is None, **search}   # a grammar ends on an end id
    loaded = pipe.loaded
    opts = loaded.options(search, max_new_tokens)
    stop = stop_ids(opts, loaded.eos)
    matcher = None
    if grammar is not None:
        compiled, _ = loaded.grammar().compile(constraint_from(grammar))
        matcher = loaded.grammar().matcher(compiled, stop, 1)
    return Sequence([], prompt, opts, stop, loaded.sampler(opts), cancel=cancel, grammar=matcher)


def _alone(pipe, seq) -> list:
    pipe.reset()
    loaded = pipe.loaded
    return list(loaded.loop(loaded.executor).run(seq))


def _batched(pipe, rows, joins) -> dict:
    """Run ``rows`` (sequences) through one BatchedDecoder, row i joining before step joins[i];
    returns id(sequence) -> its responses."""
    decoder = BatchedDecoder(pipe)
    got: dict[int, list] = {}
    step = 0
    while step <= max(joins) or decoder.rows:
        for seq, at in zip(rows, joins):
            if at == step:
                for s, r in decoder.add(seq):
                    got.setdefault(id(s), []).append(r)
        for s, r in decoder.step():
            got.setdefault(id(s), []).append(r)
        step += 1
        assert step < 200
    return got


def test_rows_joining_at_different_steps_give_their_tokens_alone(pipe):
    assert batchable(pipe) is None
    want = [[r.token for r in _alone(pipe, _seq(pipe, p, n, s))] for p, n, s, _ in ROWS]
    rows = [_seq(pipe, p, n, s) for p, n, s, _ in ROWS]
    got = _batched(pipe, rows, [at for *_, at in ROWS])
    for seq, tokens, (_, n, _, _) in zip(rows, want, ROWS):
        responses = got[id(seq)]
        assert [r.token for r in responses] == tokens
        assert [r.finish_reason for r in responses] == [None] * (n - 1) + ["length"]
        assert responses[-1].timing is seq.timing and seq.generated == tokens
        assert seq.ids == seq.new_ids + tokens[:-1]


def test_sixteen_rows_with_their_own_seeds_and_options(pipe):
    kinds = [{"do_sample": True, "temperature": 0.9}, {"do_sample": True, "top_k": 8, "top_p": 0.9},
             {"do_sample": False}, {"do_sample": True, "min_p": 0.05, "repetition_penalty": 1.1}]
    specs = [([3 + i, 40 + 2 * i, 7] * (1 + i % 3), 6 + i % 5, {**kinds[i % 4], "seed": i}) for i in range(16)]
    want = [[r.token for r in _alone(pipe, _seq(pipe, *spec))] for spec in specs]
    rows = [_seq(pipe, *spec) for spec in specs]
    got = _batched(pipe, rows, [i // 2 for i in range(16)])
    assert [[r.token for r in got[id(s)]] for s in rows] == want


def test_a_removed_row_gives_no_more_responses_and_the_others_go_on(pipe):
    want = [[r.token for r in _alone(pipe, _seq(pipe, p, n, s))] for p, n, s, _ in ROWS[:3]]
    rows = [_seq(pipe, p, n, s) for p, n, s, _ in ROWS[:3]]
    decoder = BatchedDecoder(pipe)
    got = {id(s): [] for s in rows}
    for seq in rows:
        got[id(seq)] += [r.token for _, r in decoder.add(seq)]
    for _ in range(2):
        for s, r in decoder.step():
            got[id(s)].append(r.token)
    decoder.remove(rows[1])
    with pytest.raises(InputError, match="not a row"):
        decoder.remove(rows[1])
    while decoder.rows:
        for s, r in decoder.step():
            got[id(s)].append(r.token)
    assert got[id(rows[0])] == want[0] and got[id(rows[2])] == want[2]
    assert got[id(rows[1])] == want[1][:3]


def test_a_cancelled_row_leaves_and_the_others_go_on(pipe):
    calls = []
    cancelled = _seq(pipe, [9, 9, 9, 1], 20, {"do_sample": False},
                     cancel=lambda: calls.append(1) or len(calls) >= 4)
    others = [_seq(pipe, p, n, s) for p, n, s, _ in ROWS[:2]]
    want = [[r.token for r in _alone(pipe, _seq(pipe, p, n, s))] for p, n, s, _ in ROWS[:2]]
    alone_cancelled = _alone(pipe, _seq(pipe, [9, 9, 9, 1], 20, {"do_sample": False}))
    got = _batched(pipe, [cancelled, *others], [0, 0, 1])
    mine = got[id(cancelled)]
    assert [r.finish_reason for r in mine][-1] == "cancelled" and mine[-1].token is None
    assert [r.token for r in mine[:-1]] == [r.token for r in alone_cancelled[:len(mine) - 1]]
    assert len(mine) - 1 == 4   # read before each step after the first token: 4 tokens, then cancelled
    assert [[r.token for r in got[id(s)]] for s in others] == want


def test_a_long_prompt_cancelled_between_prefill_chunks_never_joins(pipe):
    calls = []
    seq = _seq(pipe, list(range(5, 5 + PREFILL_CHUNK + 20)), 4, {"do_sample": False},
               cancel=lambda: calls.append(1) or True)
    decoder = BatchedDecoder(pipe)
    [(s, response)] = decoder.add(seq)
    assert response.finish_reason == "cancelled" and response.token is None and calls == [1]
    assert seq.ids == seq.new_ids[:PREFILL_CHUNK] and decoder.rows == 0
    [(_, first)] = decoder.add(_seq(pipe, [5, 6, 7], 4, {"do_sample": False}))   # the executor was left clean
    assert first.token is not None and decoder.rows == 1


def test_a_grammar_row_follows_its_grammar_beside_free_rows(pipe):
    regex = {"type": "regex", "regex": "[a-f]{3}(x|yz)"}
    want = [r.token for r in _alone(pipe, _seq(pipe, [5, 6, 7], 12, {"do_sample": False}, grammar=regex))]
    free = [[r.token for r in _alone(pipe, _seq(pipe, p, n, s))] for p, n, s, _ in ROWS[:2]]
    ruled = _seq(pipe, [5, 6, 7], 12, {"do_sample": False}, grammar=regex)
    rows = [_seq(pipe, p, n, s) for p, n, s, _ in ROWS[:2]]
    got = _batched(pipe, [rows[0], ruled, rows[1]], [0, 1, 1])
    assert [r.token for r in got[id(ruled)]] == want
    assert got[id(ruled)][-1].finish_reason == "stop" and ruled.grammar.terminated
    assert [[r.token for r in got[id(s)]] for s in rows] == free


def test_a_row_with_a_stop_string_ends_where_it_ends_alone(pipe):
    free = _seq(pipe, [5, 17, 42, 9], 16, {"do_sample": False})
    free.text = _text(pipe)
    whole = "".join(r.text for r in _alone(pipe, free))
    stop = whole[len(whole) // 2:len(whole) // 2 + 3]
    assert stop.strip()
    runs = []
    for batched in (False, True):
        seq = _seq(pipe, [5, 17, 42, 9], 16, {"do_sample": False, "stop_strings": [stop]})
        seq.text = _text(pipe, [stop])
        other = _seq(pipe, *ROWS[1][:3])
        if batched:
            got = _batched(pipe, [other, seq], [0, 1])[id(seq)]
        else:
            got = _alone(pipe, seq)
        runs.append([(r.token, r.text, r.finish_reason) for r in got])
    assert runs[0] == runs[1] and runs[1][-1][2] == "stop"
    assert stop not in "".join(t for _, t, _ in runs[1]) and len(runs[1]) < 16


def test_a_row_ending_on_a_stop_id_at_its_first_token_never_joins(pipe):
    first = _alone(pipe, _seq(pipe, [5, 17, 42], 3, {"do_sample": False}))[0].token
    seq = _seq(pipe, [5, 17, 42], 3, {"do_sample": False, "stop_token_ids": [first]})
    decoder = BatchedDecoder(pipe)
    [(s, response)] = decoder.add(seq)
    assert s is seq and response.token == first and response.finish_reason == "stop"
    assert decoder.rows == 0 and decoder.step() == []


def test_refusals_name_what_to_change(pipe):
    decoder = BatchedDecoder(pipe, max_rows=1)
    held = _seq(pipe, [5, 6], 4, {"do_sample": False})
    held.ids = [1, 2]
    with pytest.raises(InputError, match="held ids"):
        decoder.add(held)
    with pytest.raises(InputError, match="num_beams"):
        decoder.add(_seq(pipe, [5, 6], 4, {"do_sample": False, "num_beams": 2}))
    decoder.add(_seq(pipe, [5, 6], 4, {"do_sample": False}))
    with pytest.raises(InputError, match="full"):
        decoder.add(_seq(pipe, [5, 6], 4, {"do_sample": False}))
    decoder.close()
    assert decoder.rows == 0


@pytest.mark.parametrize("name, why", [
    ("novel_recurrent", "state component Recurrent holds per-sequence values"),
    ("genai_gemma2", "sliding-window layers"),
    ("chatterbox_twin", "plugin"),
])
def test_bundles_that_cannot_batch_say_why(name, why):
    other = onnxpipe.load(tiny_models.ensure(name))
    assert why in batchable(other)
    with pytest.raises(InputError, match="run one sequence at a time"):
        BatchedDecoder(other)
