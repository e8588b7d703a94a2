"""Per-call search options stay inside the ranges pipeline.json declares for the same keys, and
temperature 0 means greedy wherever it is written."""

import dataclasses

import pytest

from onnxpipe.config.schema import Generation, Sampling
from onnxpipe.errors import InputError
from onnxpipe.search.options import RANGES, SearchOptions, defaults_from, problems, resolve


@pytest.mark.parametrize("override, message", [
    ({"length_penalty": 1000, "num_beams": 2}, 'search option "length_penalty": expected a number in -10..10'),
    ({"random_seed": -5}, 'search option "random_seed": expected a number in -1..'),
    ({"top_k": 2 ** 40}, 'search option "top_k": expected a number in 0..2147483647 (tokens)'),
    ({"temperature": float("nan")}, 'search option "temperature": expected a number in 0..1000'),
    ({"min_new_tokens": 2 ** 30}, 'search option "min_new_tokens": expected a number in 0..16777216'),
    ({"speculative": {"method": "prompt_lookup", "max_draft": 4, "ngram": 10 ** 9}},
     'search option "speculative.ngram": expected an integer in 1..1024 (tokens), found 1000000000'),
])
def test_a_call_override_outside_the_declared_range_is_refused(override, message):
    with pytest.raises(InputError) as error:
        resolve(SearchOptions(), override)
    assert message in str(error.value)


def test_every_ranged_sampling_key_is_checked_per_call():
    ranged = {f.name for cls in (Sampling, Generation) for f in dataclasses.fields(cls)
              if f.metadata.get("range") is not None and f.name in {g.name for g in dataclasses.fields(SearchOptions)}}
    assert set(RANGES) == ranged and {"temperature", "top_k", "length_penalty", "max_length"} <= ranged


def test_temperature_zero_means_greedy_in_pipeline_json_and_in_a_call():
    opts = defaults_from(Generation(sampling=Sampling(do_sample=True, temperature=0.0)))
    assert (opts.do_sample, opts.temperature) == (False, 1.0) and problems(opts) == []
    called = resolve(SearchOptions(do_sample=True), {"temperature": 0})
    assert (called.do_sample, called.temperature) == (False, 1.0)
