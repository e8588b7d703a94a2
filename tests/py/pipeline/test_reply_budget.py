"""A call that names neither max_new_tokens nor max_length gets a 256-token reply, not the whole
context (pipeline/text_generation.py DEFAULT_MAX_NEW_TOKENS); either name takes over. On the tiny
shift-by-one decoder (tests/py/onnx_builders.py: next id = id + 1 mod V), which never ends itself."""

from __future__ import annotations

import onnx_builders as ob

import onnxpipe
from onnxpipe.pipeline.text_generation import DEFAULT_MAX_NEW_TOKENS

CONTEXT = 1024


def test_the_default_reply_budget_and_what_overrides_it(tmp_path):
    pipe = onnxpipe.load(ob.decoder_bundle(tmp_path, ob.decoder_config(max_length=CONTEXT)))
    plain = pipe.generate(input_ids=[1])
    assert DEFAULT_MAX_NEW_TOKENS == 256
    assert len(plain.tokens) == 256 and plain.finish_reason == "length"
    assert [t for e in pipe.stream(input_ids=[1]) for t in e.token_ids] == plain.tokens
    assert len(pipe.generate(input_ids=[1], max_new_tokens=300).tokens) == 300
    assert len(pipe.generate(input_ids=[1], max_tokens=20).tokens) == 20             # the OpenAI spelling
    assert len(pipe.generate(input_ids=[1], max_length=400).tokens) == 399           # prompt + new
    assert len(pipe.generate(input_ids=[1], max_new_tokens=2000).tokens) == CONTEXT - 1   # the context still ends it
