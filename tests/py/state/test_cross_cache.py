"""state.cross_cache: an init-phase encoder's outputs bound to the step decoder by handle,
kept across steps, disposed on reset; every misdeclaration refused at load with the JSON path.

On the tiny encoder-decoder of tests/py/tiny_encoder_decoder.py, whose greedy tokens follow the
encoder's output: they show the cross value really reached every step."""

from __future__ import annotations

import numpy as np
import pytest

import onnxpipe
import tiny_encoder_decoder as ted
from onnxpipe.errors import ConfigError
from onnxpipe.state.kv_cache import KVCache

V = ted.V
_bundle, _encoder, _decoder, _features = ted.bundle, ted.make_encoder, ted.make_decoder, ted.features


def test_the_cross_value_reaches_every_step_and_is_freed_on_reset(tmp_path):
    pipe = onnxpipe.load(_bundle(tmp_path), text=False)
    cross = next(c for c in pipe.executor.components if type(c).__name__ == "CrossCache")
    kv = next(c for c in pipe.executor.components if isinstance(c, KVCache))
    assert cross.inputs["decoder"] == {"cross_bias"} and [s.past.name for s in kv.slots] == ["past_key_values.0.key"]
    seen = []
    original = pipe.backend.run

    def spy(session, feeds, outputs, bound=None):
        if session.name == "decoder":
            seen.append(feeds["cross_bias"])
        return original(session, feeds, outputs, bound)

    pipe.loaded.backend.run = spy
    result = pipe.generate(max_new_tokens=4, inputs=_features(5))   # from tokens.decoder_prefix
    assert result.tokens == [5, 5, 5, 5]
    assert len(seen) == 4 and all(t is seen[0] for t in seen)      # one handle, never copied
    assert seen[0] is cross.values["cross_bias"]
    np.testing.assert_array_equal(seen[0].numpy()[0, 5], 100.0)
    assert pipe.generate(max_new_tokens=2, inputs=_features(3)).tokens == [3, 3]   # a new input
    pipe.reset()
    assert cross.values == {}


@pytest.mark.parametrize("changes, path, message", [
    ({"pipeline.state.cross_cache.frozen": False}, "$.pipeline.state.cross_cache.frozen", "not supported"),
    ({"pipeline.state.cross_cache.source": "encodr"}, "$.pipeline.state.cross_cache.source",
     "not a declared session"),
    ({"pipeline.flow": [{"run": "encoder", "when": "step"}, {"run": "decoder", "when": "step"}]},
     "$.pipeline.state.cross_cache.source", "init phase only"),
    ({"pipeline.flow": [{"run": "encoder", "when": "init"},
                        {"run": "decoder", "when": "step", "cross_attention_from": "decoder"}]},
     "$.pipeline.flow[1].cross_attention_from", 'cross_cache.source is "encoder"'),
])
def test_misdeclarations_are_refused(tmp_path, changes, path, message):
    with pytest.raises(ConfigError, match=message) as info:
        onnxpipe.load(_bundle(tmp_path, changes), text=False)
    assert info.value.path == path and info.value.file.endswith("pipeline.json")


def test_a_source_that_feeds_no_step_input_is_refused(tmp_path):
    bundle = _bundle(tmp_path, {"pipeline.dataflow": [
        {"from": "inputs.features", "to": "encoder.features"},
        {"from": "inputs.bias", "to": "decoder.cross_bias"}],
        "pipeline.flow": [{"run": "encoder", "when": "init"}, {"run": "decoder", "when": "step"}]},
        encoder=_encoder(out="unused"))
    with pytest.raises(ConfigError, match="feeds nothing|none of its outputs") as info:
        onnxpipe.load(bundle, text=False)
    assert info.value.path == "$.pipeline.state.cross_cache.source"


def test_kv_discovery_leaves_cross_inputs_alone(tmp_path):
    """A cross tensor named like a self-KV past is the cross cache's, not the KV cache's."""
    bundle = _bundle(tmp_path, encoder=_encoder(out="past_key_values.1.key"),
                     decoder=_decoder(cross="past_key_values.1.key"))
    pipe = onnxpipe.load(bundle, text=False)
    kv = next(c for c in pipe.executor.components if isinstance(c, KVCache))
    assert [s.past.name for s in kv.slots] == ["past_key_values.0.key"]
    assert pipe.generate(max_new_tokens=3, inputs=_features(2)).tokens == [2, 2, 2]


def test_decoder_prefix_must_fit_the_vocabulary_suppressed_ids_past_it_are_left_out(tmp_path):
    with pytest.raises(ConfigError, match="outside the vocabulary") as info:
        onnxpipe.load(_bundle(tmp_path, {"tokens.decoder_prefix": [0, V]}), text=False)
    assert info.value.path == "$.tokens.decoder_prefix"
    # suppressed ids past the vocabulary can never be picked: left out, not refused (transformers'
    # SuppressTokens processors mask over the vocabulary the same way)
    pipe = onnxpipe.load(_bundle(tmp_path, {"generation.suppress_tokens": {"always": [99]}}), text=False)
    assert pipe.loaded.sampler(pipe.loaded.options()).suppress == {True: (), False: ()}


def test_suppressed_ids_are_never_picked(tmp_path):
    pipe = onnxpipe.load(_bundle(tmp_path, {"generation.suppress_tokens": {"always": [5], "at_start": [4]}}),
                         text=False)
    # the bias wants 5 every step; 5 is never allowed, 4 not as the first token
    tokens = pipe.generate(max_new_tokens=3, inputs=_features(5)).tokens
    assert 5 not in tokens and tokens[0] != 4
    assert tokens == [1, 2, 3]   # the bigram's next best after 0 (5 and the first 4 are out)
    assert pipe.generate(max_new_tokens=3, inputs=_features(5), suppress_tokens=[]).tokens == [5, 5, 5]


def test_at_start_ids_are_only_kept_from_the_first_token(tmp_path):
    pipe = onnxpipe.load(_bundle(tmp_path, {"generation.suppress_tokens": {"at_start": [4]}}), text=False)
    assert pipe.generate(max_new_tokens=3, inputs=_features(4)).tokens == [1, 4, 4]


def test_cross_attention_from_alone_declares_the_cache(tmp_path):
    """Without state.cross_cache, the flow step's cross_attention_from makes the same frozen
    cache: the same tokens, one handle for every step."""
    pipe = onnxpipe.load(_bundle(tmp_path, {"pipeline.state": None}), text=False)
    cross = next(c for c in pipe.executor.components if type(c).__name__ == "CrossCache")
    assert cross.source == "encoder" and cross.inputs["decoder"] == {"cross_bias"}
    assert pipe.generate(max_new_tokens=4, inputs=_features(5)).tokens == [5, 5, 5, 5]
    assert pipe.generate(max_new_tokens=2, inputs=_features(3)).tokens == [3, 3]


@pytest.mark.parametrize("flow, path, message", [
    ([{"run": "encoder", "when": "init"}, {"run": "decoder", "when": "step", "cross_attention_from": "encodr"}],
     "$.pipeline.flow[1].cross_attention_from", "not a declared session"),
    ([{"run": "encoder", "when": "step", "cross_attention_from": "encoder"},
      {"run": "decoder", "when": "step", "cross_attention_from": "encoder"}],
     "$.pipeline.flow[0].cross_attention_from", "init phase only"),
    ([{"run": "encoder", "when": "init"}, {"run": "decoder", "when": "step", "cross_attention_from": "encoder"},
      {"run": "encoder", "when": "final", "cross_attention_from": "decoder"}],
     "$.pipeline.flow[2].cross_attention_from", 'an earlier step names "encoder"'),
])
def test_cross_attention_from_alone_is_checked(tmp_path, flow, path, message):
    with pytest.raises(ConfigError, match=message) as info:
        onnxpipe.load(_bundle(tmp_path, {"pipeline.state": None, "pipeline.flow": flow}), text=False)
    assert info.value.path == path
