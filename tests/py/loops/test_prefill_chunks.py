"""A long prompt is fed in chunks when the caller can cancel, so a cancel lands between chunks.

Chunks are real engine calls on the tiny fixtures; the run_phase spy only records what was fed.
"""

from __future__ import annotations

import pytest

import onnxpipe
from onnxpipe.loops import autoregressive
from tests.fixtures import tiny_models

# 200 ids: one chunk of 128 and the rest; all fixtures' vocabularies hold them, none is an end id
PROMPT = [5 + (i * 37) % 250 for i in range(200)]
GREEDY = {"do_sample": False, "ignore_eos": True, "max_new_tokens": 8, "max_length": 256}


def fed_lengths(pipe, monkeypatch) -> list[int]:
    """Record the number of ids each step-flow call is fed."""
    executor = pipe.loaded.executor
    lengths: list[int] = []
    run_phase = executor.run_phase

    def spy(phase, inputs, *args, **kwargs):
        if phase == "step":
            lengths.append(len(inputs["input_ids"][0]))
        return run_phase(phase, inputs, *args, **kwargs)

    monkeypatch.setattr(executor, "run_phase", spy)
    return lengths


@pytest.mark.parametrize("name", ["genai_llama_noshare", "genai_qwen2", "tjs_llama"])
def test_chunked_prefill_gives_the_tokens_of_one_prefill(name, monkeypatch):
    pipe = onnxpipe.load(tiny_models.ensure(name), **({"dtype": "fp32"} if name.startswith("tjs") else {}))
    whole = pipe.generate(input_ids=PROMPT, **GREEDY)
    lengths = fed_lengths(pipe, monkeypatch)
    chunked = pipe.generate(input_ids=PROMPT, cancel=lambda: False, **GREEDY)
    assert lengths[:2] == [autoregressive.PREFILL_CHUNK, len(PROMPT) - autoregressive.PREFILL_CHUNK]
    assert chunked.tokens == whole.tokens
    assert chunked.finish_reason == "length"


def test_cancel_during_the_prefill_makes_no_token(monkeypatch):
    pipe = onnxpipe.load(tiny_models.ensure("genai_llama_noshare"))
    expected = pipe.generate(input_ids=PROMPT, **GREEDY).tokens
    lengths = fed_lengths(pipe, monkeypatch)
    reads: list[int] = []
    events: list = []
    result = pipe.generate(input_ids=PROMPT, cancel=lambda: reads.append(len(lengths)) or True,
                           on_event=events.append, **GREEDY)
    assert result.finish_reason == "cancelled"
    assert result.tokens == [] and events == []
    assert lengths == [autoregressive.PREFILL_CHUNK], "stopped after the first chunk"
    assert reads[0] == 1, "cancel was read right after the first chunk"
    # the pipeline answers the next request as before
    assert pipe.generate(input_ids=PROMPT, **GREEDY).tokens == expected


def test_short_prompts_and_no_cancel_are_one_call(monkeypatch):
    pipe = onnxpipe.load(tiny_models.ensure("genai_llama_noshare"))
    lengths = fed_lengths(pipe, monkeypatch)
    pipe.generate(input_ids=PROMPT, **GREEDY)   # no cancel: nothing to read between chunks
    pipe.generate(input_ids=PROMPT[:autoregressive.PREFILL_CHUNK], cancel=lambda: False, **GREEDY)
    assert lengths[0] == len(PROMPT)
    assert lengths[GREEDY["max_new_tokens"]] == autoregressive.PREFILL_CHUNK
