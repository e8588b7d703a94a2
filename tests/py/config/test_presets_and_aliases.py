"""``extends`` presets (the config's own fields win, objects merge by key, lists are replaced
whole) and the older ``when`` spellings (once / prompt -> init, always -> step)."""

import copy
import json

import pytest

from onnxpipe.config.load import resolve_document
from onnxpipe.config.parse import to_json
from onnxpipe.config.presets import PRESETS, apply_preset
from onnxpipe.config.validate import validate_spec

FILE = "pipeline.json"


def resolve(document):
    spec = resolve_document(copy.deepcopy(document), FILE)
    validate_spec(spec, FILE)
    return spec


@pytest.mark.parametrize("alias, phase", [("once", "init"), ("prompt", "init"), ("always", "step"),
                                          ("init", "init"), ("step", "step"), ("final", "final")])
def test_when_aliases_are_accepted_and_mapped(alias, phase):
    spec = resolve({"version": 2, "pipeline": {
        "sessions": {"decoder": {"file": "model.onnx"}},
        "flow": [{"run": "decoder", "when": alias}]}})
    assert spec.pipeline.flow[0].when == phase
    assert to_json(spec)["pipeline"]["flow"][0]["when"] == phase


def test_when_defaults_to_step():
    spec = resolve({"version": 2, "pipeline": {"sessions": {"d": {"file": "m.onnx"}}, "flow": [{"run": "d"}]}})
    assert spec.pipeline.flow[0].when == "step"


def test_preset_fills_what_the_config_leaves_out():
    spec = resolve({"version": 2, "pipeline": {"extends": "encoder-decoder", "sessions": {
        "encoder": {"file": "e.onnx"}, "decoder": {"file": "d.onnx"}}}})
    assert [(s.run, s.when) for s in spec.pipeline.flow] == [("encoder", "init"), ("decoder", "step")]
    assert spec.pipeline.flow[1].cross_attention_from == "encoder"
    assert spec.pipeline.state.cross_cache.source == "encoder"
    assert spec.generation.loop == "autoregressive"
    assert spec.pipeline.extends == "encoder-decoder"


def test_own_list_replaces_preset_list_whole():
    spec = resolve({"version": 2, "pipeline": {
        "extends": "vision-language",
        "sessions": {"decoder": {"file": "d.onnx"}},
        "flow": [{"run": "decoder", "when": "always"}]}})
    # not appended to / merged with the preset's three steps
    assert [(s.run, s.when) for s in spec.pipeline.flow] == [("decoder", "step")]


def test_own_scalar_wins_and_objects_merge_by_key():
    spec = resolve({"version": 2,
                    "pipeline": {"extends": "encoder-decoder",
                                 "sessions": {"encoder": {"file": "e.onnx"}, "decoder": {"file": "d.onnx"}},
                                 "state": {"cross_cache": {"frozen": False},
                                           "kv_cache": {"format": "separate"}}},
                    "generation": {"max_length": 77}})
    # state.cross_cache merged key by key: own frozen, preset's source kept
    assert spec.pipeline.state.cross_cache.source == "encoder"
    assert spec.pipeline.state.cross_cache.frozen is False
    assert spec.pipeline.state.kv_cache.format == "separate"
    # generation merged: preset's loop kept, own max_length
    assert spec.generation.loop == "autoregressive"
    assert spec.generation.max_length == 77


def test_own_loop_overrides_preset_loop():
    spec = resolve({"version": 2,
                    "pipeline": {"extends": "autoregressive-decoder",
                                 "sessions": {"decoder": {"file": "d.onnx"}},
                                 "output": {"session": "decoder", "name": "logits"}},
                    "generation": {"loop": "single_pass"}})
    assert spec.generation.loop == "single_pass"


def test_preset_is_not_changed_by_resolving_or_by_mutating_the_result():
    before = json.dumps(PRESETS, sort_keys=True)
    resolved = apply_preset("autoregressive-decoder", {"version": 2, "pipeline": {"sessions": {}}})
    resolved["pipeline"]["flow"].append({"run": "extra"})
    resolved["generation"]["loop"] = "denoising"
    resolve({"version": 2, "pipeline": {"extends": "autoregressive-decoder",
                                        "sessions": {"decoder": {"file": "d.onnx"}},
                                        "flow": [{"run": "decoder", "when": "once"}]}})
    assert json.dumps(PRESETS, sort_keys=True) == before


def test_preset_errors_are_reported_against_the_resolved_config():
    # the preset's flow names "decoder"; a bundle that calls its session "model" must say so
    with pytest.raises(Exception) as info:
        resolve({"version": 2, "pipeline": {"extends": "autoregressive-decoder",
                                            "sessions": {"model": {"file": "m.onnx"}}}})
    msg = str(info.value)
    assert "$.pipeline.flow[0].run" in msg
    assert 'session "decoder"' in msg and "Declared sessions: model" in msg


def test_every_preset_resolves_with_its_sessions():
    for name, preset in PRESETS.items():
        runs = {s["run"] for s in preset["pipeline"]["flow"]}
        doc = {"version": 2, "pipeline": {"extends": name, "sessions": {r: {"file": f"{r}.onnx"} for r in runs}}}
        if preset["generation"]["loop"] == "single_pass":
            doc["pipeline"]["output"] = {"session": sorted(runs)[0], "name": "waveform"}
        spec = resolve(doc)
        assert [s.run for s in spec.pipeline.flow] == [s["run"] for s in preset["pipeline"]["flow"]]
