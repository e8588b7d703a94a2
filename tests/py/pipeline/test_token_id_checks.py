"""Which token ids are checked against the vocabulary, and where (issue 29's regression).

An id fed to the model (decoder_prefix, decoder_start at every start; bos where a call starts from
it: test_start_ids.py) must be in the vocabulary. An id only compared with sampled ids or written
into returned sequences is never refused: pad (it only fills returned sequences up), end and stop
ids, suppressed ids (transformers' processors mask over the vocabulary; ids past it can't be
picked anyway). genai_qwen2_padout is onnxruntime-genai's own builder output with pad_token_id ==
vocab_size, which onnxruntime-genai runs; its expected.json holds onnxruntime-genai's tokens.
"""

from __future__ import annotations

import pytest

import onnxpipe
from onnxpipe.pipeline.text_generation import padded
from tests.fixtures import tiny_models


@pytest.fixture(scope="module")
def padout():
    bundle = tiny_models.ensure("genai_qwen2_padout")
    return onnxpipe.load(bundle), tiny_models.load_expected(bundle)


def test_pad_equal_to_the_vocabulary_size_loads_and_gives_genai_tokens(padout):
    pipe, expected = padout
    assert pipe.spec.tokens.pad == pipe.loaded.vocab_size == 384
    assert expected["oracles"]["onnxruntime_genai"]["agreed"]
    got = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=expected["max_new_tokens"])
    assert got.tokens == expected["greedy_tokens"]


def test_ids_past_the_vocabulary_that_are_only_compared_are_not_refused(padout):
    """Stop ids and suppressed ids past the vocabulary, with end ids masked under a minimum
    length: nothing changes, as in transformers."""
    pipe, expected = padout
    got = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=12, stop_token_ids=[384, 9999],
                        suppress_tokens=[384], suppress_tokens_at_start=[500], min_new_tokens=4)
    assert got.tokens == expected["greedy_tokens"][:12]
    beams = pipe.generate(input_ids=expected["input_ids"], max_new_tokens=6, num_beams=2,
                          num_return_sequences=2, suppress_tokens=[384])
    assert len(beams.sequences) == 2 and beams.padded is not None


def test_a_pad_past_the_vocabulary_fills_returned_sequences_as_transformers_does():
    assert padded([{"tokens": [5, 6, 7]}, {"tokens": [5]}], 384) == [[5, 6, 7], [5, 384, 384]]
