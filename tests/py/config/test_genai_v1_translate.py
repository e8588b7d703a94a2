"""genai_config.json (onnxruntime-genai, "v1") -> pipeline.json v2: pure dict tests."""

import copy

import pytest

from onnxpipe.config import genai_v1
from onnxpipe.config.load import resolve_document
from onnxpipe.config.validate import validate_spec
from onnxpipe.errors import ConfigError

GENAI = {
    "model": {
        "type": "llama", "context_length": 128, "vocab_size": 32,
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
        "decoder": {
            "filename": "model.onnx", "num_key_value_heads": 2, "head_size": 8,
            "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
            "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                       "position_ids": "position_ids",
                       "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"},
            "outputs": {"logits": "logits",
                        "present_key_names": "present.%d.key", "present_value_names": "present.%d.value"},
        },
    },
    "search": {"max_length": 64, "past_present_share_buffer": False, "do_sample": False, "top_k": 5,
               "top_p": 0.9, "temperature": 0.7, "num_return_sequences": 1},
}


def genai(**search):
    g = copy.deepcopy(GENAI)
    g["search"].update(search)
    return g


def translated(g):
    doc = genai_v1.translate(g)
    spec = resolve_document(doc, "genai_config.json")
    validate_spec(spec, "genai_config.json")
    return doc, spec


def test_translation_is_a_valid_v2_document():
    doc, spec = translated(genai())
    assert doc["version"] == 2
    assert list(spec.pipeline.sessions) == ["decoder"]
    assert spec.pipeline.sessions["decoder"].file == "model.onnx"
    assert spec.pipeline.sessions["decoder"].execution_provider == ()
    assert [(s.run, s.when) for s in spec.pipeline.flow] == [("decoder", "step")]
    assert spec.generation.loop == "autoregressive"
    assert spec.metadata["source"] == "genai_config.json (v1)"


def test_separate_kv_cache():
    _, spec = translated(genai(past_present_share_buffer=False))
    assert spec.pipeline.state.kv_cache.format == "separate"


def test_share_buffer_kv_cache():
    _, spec = translated(genai(past_present_share_buffer=True))
    assert spec.pipeline.state.kv_cache.format == "shared_buffer"


def test_share_buffer_absent_means_separate():
    g = genai()
    del g["search"]["past_present_share_buffer"]
    assert translated(g)[1].pipeline.state.kv_cache.format == "separate"


def test_percent_d_becomes_layer_placeholder():
    g = genai()
    g["model"]["decoder"]["inputs"].update(past_key_names="past.%d.k", past_value_names="past.%d.v")
    g["model"]["decoder"]["outputs"].update(present_key_names="cur.%d.k", present_value_names="cur.%d.v")
    kv = translated(g)[1].pipeline.state.kv_cache
    assert (kv.past_key_pattern, kv.past_value_pattern) == ("past.{layer}.k", "past.{layer}.v")
    assert (kv.present_key_pattern, kv.present_value_pattern) == ("cur.{layer}.k", "cur.{layer}.v")
    assert (kv.num_heads, kv.head_size) == (2, 8)


def test_default_kv_names_when_absent():
    g = genai()
    for key in ("past_key_names", "past_value_names"):
        del g["model"]["decoder"]["inputs"][key]
    kv = translated(g)[1].pipeline.state.kv_cache
    assert kv.past_key_pattern == "past_key_values.{layer}.key"
    assert kv.present_value_pattern == "present.{layer}.value"


def test_eos_int_and_list():
    assert translated(genai())[1].tokens.eos == (2,)
    g = genai()
    g["model"]["eos_token_id"] = [2, 32000, 32007]
    assert translated(g)[1].tokens.eos == (2, 32000, 32007)
    g["model"]["eos_token_id"] = None
    assert translated(g)[1].tokens.eos == ()


def test_other_token_ids():
    g = genai()
    g["model"]["pad_token_id"] = [5, 6]   # genai allows a list; the first one is the pad id
    tokens = translated(g)[1].tokens
    assert (tokens.bos, tokens.pad) == (1, 5)


def test_search_becomes_generation_sampling_defaults():
    doc, spec = translated(genai())
    s = spec.generation.sampling
    assert (s.do_sample, s.top_k, s.top_p, s.temperature) == (False, 5, 0.9, 0.7)
    # beam search's num_return_sequences carries over; past_present_share_buffer is the KV format's
    assert set(doc["generation"]["sampling"]) == {"do_sample", "top_k", "top_p", "temperature",
                                                  "num_return_sequences"}
    assert spec.generation.max_length == 64


def test_max_length_falls_back_to_context_length():
    g = genai()
    del g["search"]["max_length"]
    assert translated(g)[1].generation.max_length == 128


def test_renamed_input_ids_and_logits_become_wires():
    g = genai()
    g["model"]["decoder"]["inputs"]["input_ids"] = "tokens"
    g["model"]["decoder"]["outputs"]["logits"] = "lm_scores"
    doc, spec = translated(g)
    assert doc["pipeline"]["dataflow"] == [{"from": "inputs.input_ids", "to": "decoder.tokens"},
                                           {"from": "decoder.lm_scores", "to": "outputs.logits"}]
    assert [(w.from_, w.to) for w in spec.pipeline.dataflow] == [
        ("inputs.input_ids", "decoder.tokens"), ("decoder.lm_scores", "outputs.logits")]


def test_default_names_need_no_wires():
    assert translated(genai())[0]["pipeline"]["dataflow"] == []


def test_renamed_position_ids_and_mask():
    g = genai()
    g["model"]["decoder"]["inputs"].update(position_ids="pos", attention_mask="mask")
    state = translated(g)[1].pipeline.state
    assert state.position_ids.input_name == "pos"
    assert state.attention_mask.input_name == "mask"


def test_session_options_and_providers():
    g = genai()
    g["model"]["decoder"]["session_options"] = {
        "log_id": "x", "intra_op_num_threads": 2, "provider_options": [{"cuda": {}}, {"dml": {}}]}
    session = translated(g)[1].pipeline.sessions["decoder"]
    assert session.execution_provider == ("cuda", "dml")
    assert session.session_options == {"intra_op_num_threads": 2}


def test_sliding_window():
    # what the model builder writes for cpu / cuda (onnxruntime-genai 0.18)
    g = genai()
    g["model"]["decoder"]["sliding_window"] = {"window_size": 16, "slide_key_value_cache": False,
                                               "slide_inputs": False, "layers": [0, 2], "cache_slack": 0}
    sw = translated(g)[1].pipeline.state.kv_cache.sliding_window
    assert (sw.window_size, sw.layers, sw.cache_slack) == (16, (0, 2), 0)
    g["model"]["decoder"]["sliding_window"].update(cache_slack=5, alignment="left", pad_value=0)
    assert translated(g)[1].pipeline.state.kv_cache.sliding_window.cache_slack == 5


@pytest.mark.parametrize("window, path, text", [
    # onnxruntime-genai's defaults for absent flags are true: its QNN sliding cache
    ({"window_size": 16}, "slide_key_value_cache",
     "slide_key_value_cache: only false is supported (the bounded cache that GroupQueryAttention "
     "evicts from, as the model builder writes for cpu and cuda); found boolean true (the default when absent)"),
    ({"window_size": 16, "slide_key_value_cache": False, "slide_inputs": True}, "slide_inputs",
     "slide_inputs: only false is supported"),
    ({"window_size": 16, "slide_key_value_cache": False, "slide_inputs": False, "window": 3}, "window",
     'unknown key "window"; valid keys: window_size, layers, cache_slack'),
])
def test_sliding_window_we_cannot_run_is_rejected(window, path, text):
    g = genai()
    g["model"]["decoder"]["sliding_window"] = window
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(g)
    assert info.value.path == f"$.model.decoder.sliding_window.{path}"
    assert info.value.file == "genai_config.json"
    assert text in info.value.message


def test_missing_decoder_section():
    with pytest.raises(ConfigError) as info:
        genai_v1.translate({"model": {"type": "llama"}})
    assert info.value.path == "$.model.decoder"
    assert 'expected a "model.decoder" section (a decoder-only model)' in info.value.message


def test_missing_filename():
    g = genai()
    del g["model"]["decoder"]["filename"]
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(g)
    assert info.value.path == "$.model.decoder.filename"
    assert 'missing "filename"' in info.value.message


@pytest.mark.parametrize("where, path", [
    (lambda g: g.__setitem__("search", []), "$.search"),
    (lambda g: g["model"]["decoder"].__setitem__("inputs", ["input_ids"]), "$.model.decoder.inputs"),
    (lambda g: g["model"]["decoder"].__setitem__("outputs", "logits"), "$.model.decoder.outputs"),
])
def test_wrong_section_types_are_config_errors_not_crashes(where, path):
    g = genai()
    where(g)
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(g)
    assert info.value.path == path
    assert "expected an object" in info.value.message


def test_top_level_not_an_object():
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(["model"])
    assert info.value.path == "$"
    assert "expected an object, found a list" in info.value.message


def test_translate_names_the_given_file():
    with pytest.raises(ConfigError) as info:
        genai_v1.translate({"model": {}}, "/models/x/genai_config.json")
    assert info.value.message.startswith("/models/x/genai_config.json: $.model.decoder: ")


def test_translate_does_not_mutate_its_input():
    g = genai()
    g["model"]["decoder"]["session_options"] = {"log_id": "x", "provider_options": [{"cuda": {}}]}
    before = copy.deepcopy(g)
    genai_v1.translate(g)
    assert g == before
