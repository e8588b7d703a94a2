"""pipeline.json validation without sessions: one test per error kind, pinning the message.

Every ConfigError must name the file and the JSON path and say what was expected / found, and
list the valid choices (with a nearest-key suggestion where one is close). These run on plain
dicts (``resolve_document`` + ``validate_spec``); checks that need files or real sessions live in
test_load_errors.py and tests/py/engine/test_wiring_errors.py.
"""

import copy

import pytest

from onnxpipe.config.load import resolve_document
from onnxpipe.config.validate import MAX_FLOW_STEPS, find_cycle, validate_spec
from onnxpipe.errors import ConfigError

FILE = "bundle/pipeline.json"
BASE = {
    "version": 2,
    "pipeline": {"extends": "autoregressive-decoder", "sessions": {"decoder": {"file": "model.onnx"}}},
}


def doc(**changes):
    """BASE with top-level sections replaced / added (deep-copied)."""
    d = copy.deepcopy(BASE)
    for key, value in changes.items():
        d[key] = copy.deepcopy(value)
    return d


def pipe(**fields):
    """BASE with pipeline.* fields replaced / added."""
    d = copy.deepcopy(BASE)
    d["pipeline"].update(copy.deepcopy(fields))
    return d


def check(document):
    spec = resolve_document(document, FILE)
    validate_spec(spec, FILE)
    return spec


def fails(document, path, *parts) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        check(document)
    exc = info.value
    assert exc.file == FILE
    assert exc.path == path, exc.message
    assert exc.message.startswith(f"{FILE}: {path}: "), exc.message
    for part in parts:
        assert part in exc.message, f"{part!r} not in {exc.message!r}"
    return exc


def test_base_document_is_valid():
    spec = check(BASE)
    assert [s.run for s in spec.pipeline.flow] == ["decoder"]
    assert spec.generation.loop == "autoregressive"


# ---- the seed's table (7.4) ---------------------------------------------------------------


def test_flow_step_names_undeclared_session():
    exc = fails(pipe(flow=[{"run": "decodr", "when": "step"}]), "$.pipeline.flow[0].run",
                'Flow step references session "decodr"', "no such session is declared in pipeline.sessions",
                'Did you mean "decoder"?', "Declared sessions: decoder")
    assert exc.kind == "config"


def test_flow_step_undeclared_session_lists_all_declared_and_no_far_fetched_hint():
    d = pipe(sessions={"embed": {"file": "e.onnx"}, "decoder": {"file": "d.onnx"}},
             flow=[{"run": "embed"}, {"run": "vision_encoder"}])
    exc = fails(d, "$.pipeline.flow[1].run", 'session "vision_encoder"', "Declared sessions: decoder, embed")
    assert "Did you mean" not in exc.message


def test_unknown_position_strategy_lists_valid_ones():
    fails(pipe(state={"position_ids": {"strategy": "mrope"}}), "$.pipeline.state.position_ids.strategy",
          'unknown position_ids strategy "mrope"', 'Did you mean "mrope_3d"?',
          "Valid options: auto, default, mrope_3d, windowed")


def test_unknown_position_strategy_without_close_match():
    exc = fails(pipe(state={"position_ids": {"strategy": "spiral"}}), "$.pipeline.state.position_ids.strategy",
                '"spiral"', "Valid options: auto, default, mrope_3d, windowed")
    assert "Did you mean" not in exc.message


def test_dataflow_cycle_prints_the_cycle():
    d = pipe(extends=None, sessions={"a": {"file": "a.onnx"}, "b": {"file": "b.onnx"}},
             flow=[{"run": "a"}, {"run": "b"}],
             dataflow=[{"from": "a.x", "to": "b.x"}, {"from": "b.y", "to": "a.y"}])
    del d["pipeline"]["extends"]
    fails(d, "$.pipeline.dataflow", "Circular dependency detected in dataflow: a → b → a")


def test_dataflow_three_session_cycle():
    d = pipe(sessions={"a": {"file": "a.onnx"}, "b": {"file": "b.onnx"}, "c": {"file": "c.onnx"}},
             flow=[{"run": "a"}, {"run": "b"}, {"run": "c"}],
             dataflow=[{"from": "a.o", "to": "b.i"}, {"from": "b.o", "to": "c.i"}, {"from": "c.o", "to": "a.i"}])
    fails(d, "$.pipeline.dataflow", "a → b → c → a")


def test_self_wire_is_not_a_cycle():
    spec = check(pipe(dataflow=[{"from": "decoder.state_out", "to": "decoder.state_in"}]))
    assert spec.pipeline.dataflow[0].from_ == "decoder.state_out"


def test_find_cycle_directly():
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"x": {"x"}}) == ["x", "x"]  # graph-level; validate drops self edges first


def test_unknown_preset_lists_presets():
    fails(pipe(extends="autoregresive-decoder"), "$.pipeline.extends",
          'Unknown pipeline preset "autoregresive-decoder"', 'Did you mean "autoregressive-decoder"?',
          "Built-in presets: autoregressive-decoder, encoder-decoder, multimodal, speech-language, "
          "text-to-speech, vision-language")


def test_unknown_preset_far_from_any():
    exc = fails(pipe(extends="diffusion"), "$.pipeline.extends", '"diffusion"', "Built-in presets: ")
    assert "Did you mean" not in exc.message


def test_preset_that_is_not_a_string():
    # used to crash with TypeError (unhashable list) before reaching a ConfigError
    fails(pipe(extends=["autoregressive-decoder"]), "$.pipeline.extends",
          "expected a preset name (a string), found a list", "Built-in presets: autoregressive-decoder")
    fails(pipe(extends=3), "$.pipeline.extends", "found integer 3")


def test_no_sessions_shows_minimal_example():
    d = doc()
    del d["pipeline"]["sessions"]
    fails(d, "$.pipeline.sessions", "requires at least one session",
          'Add "sessions": {"decoder": {"file": "model.onnx"}}')


def test_empty_sessions_and_no_pipeline_section():
    fails(pipe(sessions={}), "$.pipeline.sessions", "at least one session")
    fails({"version": 2}, "$.pipeline.sessions", '"sessions": {"decoder": {"file": "model.onnx"}}')


# ---- unknown keys: nearest-key suggestion at every depth --------------------------------


@pytest.mark.parametrize("document, path, key, hint", [
    ({**BASE, "pipelin": {}}, "$.pipelin", "pipelin", "pipeline"),
    ({"version": 2, "pipeline": {"extends": "autoregressive-decoder",
                                 "sesions": {"decoder": {"file": "model.onnx"}}}},
     "$.pipeline.sesions", "sesions", "sessions"),
    (pipe(sessions={"decoder": {"fiel": "model.onnx"}}), "$.pipeline.sessions.decoder.fiel", "fiel", "file"),
    (doc(generation={"sampling": {"temprature": 0.7}}), "$.generation.sampling.temprature",
     "temprature", "temperature"),
    (pipe(flow=[{"run": "decoder", "wen": "step"}]), "$.pipeline.flow[0].wen", "wen", "when"),
    (pipe(dataflow=[{"frm": "decoder.a", "to": "decoder.b"}]), "$.pipeline.dataflow[0].frm", "frm", "from"),
    (pipe(state={"kv_cache": {"past_key_patern": "pk.{layer}"}}), "$.pipeline.state.kv_cache.past_key_patern",
     "past_key_patern", "past_key_pattern"),
    (doc(generation={"max_lenght": 10}), "$.generation.max_lenght", "max_lenght", "max_length"),
])
def test_unknown_key_suggests_nearest(document, path, key, hint):
    fails(document, path, f'unknown key "{key}"', f'Did you mean "{hint}"?', "Valid keys here: ")


def test_unknown_key_lists_valid_keys_of_that_object():
    fails(doc(generation={"sampling": {"temprature": 0.7}}), "$.generation.sampling.temprature",
          "Valid keys here: do_sample, early_stopping, length_penalty, min_p, no_repeat_ngram_size, "
          "num_beams, num_return_sequences, random_seed, repetition_penalty, temperature, top_k, top_p")
    fails(pipe(sesions={}), "$.pipeline.sesions",
          "Valid keys here: dataflow, extends, flow, inputs, output, plugin, sessions, state")


def test_unknown_key_without_close_match_has_no_hint():
    exc = fails(doc(generation={"sampling": {"zzz": 1}}), "$.generation.sampling.zzz", 'unknown key "zzz".')
    assert "Did you mean" not in exc.message


def test_tokens_keeps_model_specific_ids_instead_of_failing():
    spec = check(doc(tokens={"eos": 2, "image_token": 32000}))
    assert spec.tokens.eos == (2,)
    assert spec.tokens.extra == {"image_token": 32000}


def test_metadata_is_free_form():
    spec = check(doc(metadata={"model_type": "llama", "anything": {"nested": [1]}}))
    assert spec.metadata["anything"] == {"nested": [1]}


# ---- wrong types ------------------------------------------------------------------------------


def test_string_where_integer_expected():
    fails(doc(generation={"max_length": "100"}), "$.generation.max_length",
          'expected an integer, found string "100"')


def test_boolean_is_not_an_integer():
    fails(doc(generation={"max_length": True}), "$.generation.max_length", "expected an integer, found boolean")


def test_list_where_object_expected():
    fails(pipe(sessions=[{"file": "model.onnx"}]), "$.pipeline.sessions", "expected an object, found a list")
    fails(doc(generation=[1, 2]), "$.generation", "expected an object, found a list")


def test_object_where_list_expected():
    fails(pipe(flow={"run": "decoder"}), "$.pipeline.flow", "expected a list", "found an object")


def test_wrong_type_inside_a_list_names_the_index():
    fails(doc(tokens={"eos": [2, "x"]}), "$.tokens.eos[1]", 'expected an integer, found string "x"')
    fails(pipe(flow=[{"run": 7}]), "$.pipeline.flow[0].run", "expected a string, found integer 7")


def test_string_where_boolean_expected():
    fails(pipe(sessions={"decoder": {"file": "model.onnx", "optional": "yes"}}),
          "$.pipeline.sessions.decoder.optional", 'expected true or false, found string "yes"')


def test_boolean_where_number_expected():
    fails(doc(generation={"sampling": {"top_p": True}}), "$.generation.sampling.top_p",
          "expected a number, found boolean")


def test_integer_accepted_where_number_expected():
    assert check(doc(generation={"sampling": {"temperature": 1}})).generation.sampling.temperature == 1.0


def test_eos_one_or_many():
    assert check(doc(tokens={"eos": 2})).tokens.eos == (2,)
    assert check(doc(tokens={"eos": [2, 7]})).tokens.eos == (2, 7)


def test_top_level_not_an_object():
    with pytest.raises(ConfigError) as info:
        resolve_document([1, 2], FILE)
    assert info.value.path == "$"
    assert "expected a JSON object at the top level, found a list" in info.value.message


def test_pipeline_not_an_object():
    fails({"version": 2, "pipeline": "decoder"}, "$.pipeline", 'expected an object, found string "decoder"')


# ---- other choice fields ----------------------------------------------------------------------


def test_unknown_kv_cache_format():
    fails(pipe(state={"kv_cache": {"format": "seperate"}}), "$.pipeline.state.kv_cache.format",
          '"seperate"', 'Did you mean "separate"?', "Valid options: auto, separate, combined, shared_buffer")


def test_unknown_generation_loop():
    fails(doc(generation={"loop": "autoregresive"}), "$.generation.loop",
          'Did you mean "autoregressive"?', "Valid options: autoregressive, single_pass, streaming, denoising")


def test_unknown_flow_phase_lists_phases():
    fails(pipe(flow=[{"run": "decoder", "when": "stepp"}]), "$.pipeline.flow[0].when",
          '"stepp"', 'Did you mean "step"?', "Valid options: init, step, final")


def test_unknown_recurrent_dtype():
    fails(pipe(state={"recurrent": [{"input": "h", "output": "h2", "shape": [1], "dtype": "complex64"}]}),
          "$.pipeline.state.recurrent[0].dtype", '"complex64"',
          "Valid options: float32, float16, int64, int32, int8, uint8, bool")


# ---- missing / required ---------------------------------------------------------------------


def test_missing_version():
    d = doc()
    del d["version"]
    fails(d, "$.version", 'missing "version": 2', "genai_config.json")


def test_version_1_in_pipeline_json():
    fails(doc(version=1), "$.version", "expected version 2, found 1")


def test_version_as_string():
    fails(doc(version="2"), "$.version", 'expected an integer, found string "2"')


def test_session_without_file():
    fails(pipe(sessions={"decoder": {"optional": True}}), "$.pipeline.sessions.decoder.file",
          'missing required key "file"')


def test_wire_without_from():
    fails(pipe(dataflow=[{"to": "decoder.x"}]), "$.pipeline.dataflow[0].from", 'missing required key "from"')


# ---- cross-references that need no session I/O ------------------------------------------------


def test_wire_endpoint_without_a_dot():
    fails(pipe(dataflow=[{"from": "decoder", "to": "decoder.x"}]), "$.pipeline.dataflow[0].from",
          'expected "session.tensor", found "decoder"')


def test_wire_names_undeclared_session():
    fails(pipe(dataflow=[{"from": "decodr.logits", "to": "outputs.logits"}]), "$.pipeline.dataflow[0].from",
          'wire names session "decodr", which is not declared', 'Did you mean "decoder"?',
          "Valid: decoder, inputs")


def test_wire_direction_of_pipeline_io():
    # outputs.* can only be a target and inputs.* only a source
    fails(pipe(dataflow=[{"from": "decoder.x", "to": "inputs.x"}]), "$.pipeline.dataflow[0].to",
          'session "inputs"', 'Did you mean "outputs"?', "Valid: decoder, outputs")


def test_pipeline_io_wires_are_accepted():
    spec = check(pipe(dataflow=[{"from": "inputs.input_ids", "to": "decoder.tok"},
                                {"from": "decoder.scores", "to": "outputs.logits"}]))
    assert len(spec.pipeline.dataflow) == 2


def test_output_names_undeclared_session():
    fails(pipe(output={"session": "vocoder", "name": "waveform"}), "$.pipeline.output.session",
          'output names session "vocoder"', "Declared sessions: decoder")


def test_single_pass_needs_output():
    fails(doc(generation={"loop": "single_pass"}), "$.pipeline.output",
          'a single_pass pipeline needs "output"', '"session": "decoder"')


def test_repeat_below_one():
    fails(pipe(flow=[{"run": "decoder", "repeat": 0}]), "$.pipeline.flow[0].repeat", "expected repeat >= 1, found 0")


def test_per_image_needs_loop_over():
    fails(pipe(flow=[{"run": "decoder", "loop": "per_image"}]), "$.pipeline.flow[0].loop_over",
          'loop "per_image" needs "loop_over"')


# ---- flow size --------------------------------------------------------------------------------


def test_too_many_flow_steps():
    assert MAX_FLOW_STEPS == 10
    fails(pipe(flow=[{"run": "decoder"}] * 11), "$.pipeline.flow", "at most 10 flow steps are allowed, found 11")


def test_ten_flow_steps_are_fine():
    assert len(check(pipe(flow=[{"run": "decoder"}] * 10)).pipeline.flow) == 10


def test_empty_flow_shows_example():
    fails(pipe(flow=[]), "$.pipeline.flow", "expected at least one flow step",
          '"extends": "autoregressive-decoder"')


def test_model_specific_ids_must_be_read_by_something():
    fails(doc(tokens={"eos": [2], "vision_start": 7}, pipeline={**BASE["pipeline"], "state": {
        "position_ids": {"strategy": "default"}}}), "$.tokens.vision_start", "read by no part of this pipeline")
    fails(doc(tokens={"eos": [2], "image_token": "x"}), "$.tokens.image_token", "expected a token id")
    check(doc(tokens={"eos": [2], "image_token": 151655}))   # auto positions may be mrope_3d: read there
