"""onnxruntime-genai "decoder-pipeline" genai_config.json -> pipeline.json v2: pure dict tests."""

import copy

import pytest

from onnxpipe.config import genai_v1
from onnxpipe.config.load import resolve_document
from onnxpipe.config.validate import validate_spec
from onnxpipe.errors import ConfigError

KV = ["attention_mask", "past_key_values.0.key", "past_key_values.0.value"]
PRESENT = ["present.0.key", "present.0.value"]
GENAI = {
    "model": {
        "type": "decoder-pipeline", "context_length": 128, "vocab_size": 32,
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
        "decoder": {
            "num_key_value_heads": 2, "head_size": 8,
            "session_options": {"log_id": "onnxruntime-genai", "intra_op_num_threads": 2,
                                "provider_options": [{"cpu": {}}]},
            "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                       "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"},
            "outputs": {"logits": "logits",
                        "present_key_names": "present.%d.key", "present_value_names": "present.%d.value"},
            "pipeline": [
                {"embeddings": {"filename": "embeddings.onnx", "inputs": ["input_ids"],
                                "outputs": ["inputs_embeds"]}},
                {"ctx": {"filename": "transformer.onnx", "inputs": ["inputs_embeds"] + KV,
                         "outputs": ["hidden_states"] + PRESENT, "run_on_token_gen": False}},
                {"iter": {"filename": "transformer.onnx", "inputs": ["inputs_embeds"] + KV,
                          "outputs": ["hidden_states"] + PRESENT, "run_on_prompt": False}},
                {"lm_head": {"filename": "lm_head.onnx", "inputs": ["hidden_states"], "outputs": ["logits"],
                             "is_lm_head": True}},
            ],
        },
    },
    "search": {"max_length": 64, "past_present_share_buffer": False},
}


def genai():
    return copy.deepcopy(GENAI)


def stage(g, i):
    return next(iter(g["model"]["decoder"]["pipeline"][i].values()))


def translated(g):
    doc = genai_v1.translate(g)
    spec = resolve_document(doc, "genai_config.json")
    validate_spec(spec, "genai_config.json")
    return doc, spec


def refused(g, path, *words):
    with pytest.raises(ConfigError) as info:
        translated(g)
    assert info.value.path == path
    assert info.value.file == "genai_config.json"
    for word in words:
        assert word in str(info.value)
    return info.value


def test_one_session_and_step_per_stage_in_order():
    doc, spec = translated(genai())
    assert list(spec.pipeline.sessions) == ["embeddings", "ctx", "iter", "lm_head"]
    assert [(s.run, s.when, s.on) for s in spec.pipeline.flow] == [
        ("embeddings", "step", "any"), ("ctx", "step", "prompt"), ("iter", "step", "token_gen"),
        ("lm_head", "step", "any")]
    assert spec.pipeline.sessions["ctx"].file == spec.pipeline.sessions["iter"].file == "transformer.onnx"
    assert doc["pipeline"]["dataflow"] == []   # stages are wired by tensor name
    assert spec.pipeline.state.kv_cache.past_key_pattern == "past_key_values.{layer}.key"
    assert spec.metadata["model_type"] == "decoder-pipeline"


def test_stages_take_the_decoder_session_options_unless_they_have_their_own():
    g = genai()
    stage(g, 3)["session_options"] = {"inter_op_num_threads": 1, "provider_options": []}
    stage(g, 0).update(session_options={"inter_op_num_threads": 3}, inherit_session_options=True)
    sessions = translated(g)[1].pipeline.sessions
    assert sessions["ctx"].execution_provider == ("cpu",)
    assert sessions["ctx"].session_options == {"intra_op_num_threads": 2}
    assert sessions["lm_head"].execution_provider == ()
    assert sessions["lm_head"].session_options == {"inter_op_num_threads": 1}
    assert sessions["embeddings"].execution_provider == ("cpu",)
    assert sessions["embeddings"].session_options == {"intra_op_num_threads": 2, "inter_op_num_threads": 3}


def test_object_form_and_several_stages_in_one_element():
    g = genai()
    stages = g["model"]["decoder"]["pipeline"]
    g["model"]["decoder"]["pipeline"] = {k: v for item in stages for k, v in item.items()}
    assert list(translated(g)[1].pipeline.sessions) == ["embeddings", "ctx", "iter", "lm_head"]
    g["model"]["decoder"]["pipeline"] = [{k: v for item in stages[:2] for k, v in item.items()}] + stages[2:]
    assert list(translated(g)[1].pipeline.sessions) == ["embeddings", "ctx", "iter", "lm_head"]


def test_output_names_forwarder_becomes_wires_to_the_stages_that_read_the_new_name():
    g = genai()
    stage(g, 0)["output_names_forwarder"] = {"inputs_embeds": "embeds"}
    for i in (1, 2):
        stage(g, i)["inputs"][0] = "embeds"
    doc, _ = translated(g)
    assert doc["pipeline"]["dataflow"] == [{"from": "embeddings.inputs_embeds", "to": "ctx.embeds"},
                                           {"from": "embeddings.inputs_embeds", "to": "iter.embeds"}]


def test_renamed_input_ids_and_logits_are_wired_to_their_stages():
    g = genai()
    g["model"]["decoder"]["inputs"]["input_ids"] = "tokens"
    g["model"]["decoder"]["outputs"]["logits"] = "scores"
    stage(g, 0)["inputs"] = ["tokens"]
    stage(g, 3)["outputs"] = ["scores"]
    doc, _ = translated(g)
    assert doc["pipeline"]["dataflow"] == [{"from": "inputs.input_ids", "to": "embeddings.tokens"},
                                           {"from": "lm_head.scores", "to": "outputs.logits"}]


def test_accepted_hints_and_a_stage_that_never_runs():
    g = genai()
    stage(g, 2)["reset_session_idx"] = 1   # frees memory in genai; same results
    g["model"]["decoder"]["pipeline"].append(
        {"unused": {"filename": "x.onnx", "run_on_prompt": False, "run_on_token_gen": False}})
    assert "unused" not in translated(g)[1].pipeline.sessions


def test_refusals_name_the_stage_key_in_genai_config():
    g = genai()
    stage(g, 1)["run_options"] = {"qnn.htp_perf_mode": "burst"}
    refused(g, "$.model.decoder.pipeline[1].ctx.run_options", "run_options", "not supported")
    g = genai()
    stage(g, 3)["lm_head_flag"] = True
    refused(g, "$.model.decoder.pipeline[3].lm_head.lm_head_flag", 'unknown key "lm_head_flag"', "is_lm_head")
    g = genai()
    del stage(g, 0)["filename"]
    refused(g, "$.model.decoder.pipeline[0].embeddings.filename", 'missing "filename"')
    g = genai()
    stage(g, 2)["reset_session_idx"] = 4
    refused(g, "$.model.decoder.pipeline[2].iter.reset_session_idx", "decoder-pipeline stage", "-1..3", "found integer 4")
    g = genai()
    stage(g, 1)["run_on_prompt"] = "yes"
    refused(g, "$.model.decoder.pipeline[1].ctx.run_on_prompt", "true or false", 'string "yes"')
    g = genai()
    stage(g, 1)["inputs"] = "inputs_embeds"
    refused(g, "$.model.decoder.pipeline[1].ctx.inputs", "list of tensor names")
    g = genai()
    g["model"]["decoder"]["pipeline"][1] = {"ctx.v2": stage(g, 1)}
    refused(g, "$.model.decoder.pipeline[1].ctx.v2", 'stage name "ctx.v2"')
    g = genai()
    g["model"]["decoder"]["pipeline"][2] = {"ctx": stage(g, 2)}
    refused(g, "$.model.decoder.pipeline[2].ctx", "used twice")


def test_refusals_of_the_whole_pipeline():
    g = genai()
    g["model"]["decoder"]["sliding_window"] = {"window_size": 16, "slide_key_value_cache": False,
                                               "slide_inputs": False}
    refused(g, "$.model.decoder.sliding_window", "decoder-pipeline with a sliding window")
    g = genai()
    del g["model"]["decoder"]["pipeline"]
    refused(g, "$.model.decoder.pipeline", 'missing "pipeline"', "decoder-pipeline")
    g = genai()
    g["model"]["type"] = "llama"   # genai runs a pipeline only for its own model type
    refused(g, "$.model.decoder.filename", 'missing "filename"', 'model.type "decoder-pipeline"', 'string "llama"')
    g = genai()
    for i in range(4):
        stage(g, i).update(run_on_prompt=False, run_on_token_gen=False)
    refused(g, "$.model.decoder.pipeline", "no stage runs")
    g = genai()
    g["model"]["decoder"]["outputs"]["logits"] = "scores"
    refused(g, "$.model.decoder.outputs.logits", '"scores"', "0 stages")
    g = genai()
    stage(g, 3)["run_on_token_gen"] = False   # logits made on prompt passes only
    refused(g, "$.model.decoder.outputs.logits", 'the decoder reads "logits" on token_gen passes',
            "lm_head", "run_on_token_gen false", "decoder-pipeline")
    g = genai()
    stage(g, 2)["run_on_token_gen"] = False   # no stage makes hidden_states when generating
    refused(g, "$.model.decoder.pipeline[3].lm_head.inputs", 'lm_head reads "hidden_states" on token_gen',
            "(ctx)")   # iter now never runs
    g = genai()
    g["model"]["decoder"]["pipeline"] = "stages.json"
    refused(g, "$.model.decoder.pipeline", 'string "stages.json"')
