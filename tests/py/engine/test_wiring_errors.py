"""I/O-level validation when the sessions open (engine/wiring.py, build.py, state): real tiny
ONNX sessions built in tmp_path, loaded with onnxpipe.load. Each error names pipeline.json, the
JSON path, and what the sessions actually have."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import onnx_builders as ob  # noqa: E402

import onnxpipe  # noqa: E402
from onnxpipe.errors import ConfigError, InputError  # noqa: E402


def load_fails(folder: Path, path: str, *parts: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(folder)
    exc = info.value
    pj = str(folder / "pipeline.json")
    assert exc.file == pj
    assert exc.path == path, exc.message
    assert exc.message.startswith(f"{pj}: {path}: "), exc.message
    for part in parts:
        assert part in exc.message, f"{part!r} not in {exc.message!r}"
    return exc


def two(tmp_path, **pipeline) -> Path:
    return ob.two_session_bundle(tmp_path / "two", ob.two_session_config(**pipeline))


def dec(tmp_path, config=None, **model) -> Path:
    return ob.decoder_bundle(tmp_path / "dec", config, **model)


# ---- bundles that work (so the errors below are about the config, not the builders) --------


def test_two_session_bundle_matches_by_name_and_generates(tmp_path):
    pipe = onnxpipe.load(two(tmp_path))
    assert pipe.structure == "multi-session"
    assert pipe.generate(input_ids=[1, 2, 3], max_new_tokens=4).tokens == [4, 5, 6, 7]


def test_explicit_wires_work(tmp_path):
    folder = two(tmp_path, dataflow=[{"from": "embed.inputs_embeds", "to": "head.inputs_embeds"},
                                     {"from": "head.logits", "to": "outputs.logits"}])
    assert onnxpipe.load(folder).generate(input_ids=[9], max_new_tokens=2).tokens == [10, 11]


def test_renamed_io_wired_explicitly(tmp_path):
    config = ob.decoder_config(dataflow=[{"from": "inputs.input_ids", "to": "decoder.tok"},
                                         {"from": "decoder.scores", "to": "outputs.logits"}])
    folder = dec(tmp_path, config, input_name="tok", output_name="scores")
    assert onnxpipe.load(folder).generate(input_ids=[3], max_new_tokens=3).tokens == [4, 5, 6]


# ---- the seed's table: a wire names an output the session doesn't have ---------------------


def test_wire_names_output_the_session_does_not_have(tmp_path):
    folder = two(tmp_path, dataflow=[{"from": "embed.hidden_states", "to": "head.inputs_embeds"}])
    load_fails(folder, "$.pipeline.dataflow[0].from",
               'Dataflow wire references output "hidden_states" but session "embed" has no such output',
               "(available outputs: inputs_embeds)")


def test_wire_to_pipeline_output_from_missing_tensor(tmp_path):
    folder = dec(tmp_path, ob.decoder_config(dataflow=[{"from": "decoder.scores", "to": "outputs.logits"}]))
    load_fails(folder, "$.pipeline.dataflow[0].from", 'output "scores"', 'session "decoder"',
               "(available outputs: logits)")


def test_wire_to_input_the_session_lacks(tmp_path):
    folder = two(tmp_path, dataflow=[{"from": "embed.inputs_embeds", "to": "head.embeddings"}])
    load_fails(folder, "$.pipeline.dataflow[0].to",
               'Dataflow wire references input "embeddings" but session "head" has no such input',
               "(available inputs: inputs_embeds)")


def test_wire_from_pipeline_input_to_missing_tensor(tmp_path):
    folder = dec(tmp_path, ob.decoder_config(dataflow=[{"from": "inputs.input_ids", "to": "decoder.tokens"}]))
    load_fails(folder, "$.pipeline.dataflow[0].to", 'input "tokens"', "(available inputs: input_ids)")


# ---- order ---------------------------------------------------------------------------------


def test_wire_from_a_session_that_runs_later(tmp_path):
    folder = two(tmp_path, flow=[{"run": "head"}, {"run": "embed"}],
                 dataflow=[{"from": "embed.inputs_embeds", "to": "head.inputs_embeds"}])
    load_fails(folder, "$.pipeline.dataflow[0]",
               'wire from "embed.inputs_embeds" to "head.inputs_embeds"',
               'session "embed" runs after "head" in the flow', 'Move "embed" earlier in pipeline.flow')


def test_name_match_from_a_session_that_runs_later(tmp_path):
    # no wire: the tensor exists, but only as an output of a later step -> say so, don't
    # suggest wiring it from the caller
    folder = two(tmp_path, flow=[{"run": "head"}, {"run": "embed"}])
    exc = load_fails(folder, "$.pipeline.flow",
                     'input "inputs_embeds" of session "head" is an output of session "embed"',
                     '"embed" runs after "head"', 'Move "embed" earlier in pipeline.flow')
    assert "inputs.inputs_embeds" not in exc.message


def test_init_phase_runs_before_step_whatever_the_flow_order(tmp_path):
    folder = two(tmp_path, flow=[{"run": "head", "when": "step"}, {"run": "embed", "when": "init"}])
    # embed runs once (init) and head every step: a wire-free name match is fine at load time
    assert onnxpipe.load(folder).structure == "multi-session"


# ---- inputs nothing feeds ------------------------------------------------------------------


def test_session_input_nothing_feeds(tmp_path):
    folder = dec(tmp_path, extra_inputs=("bias",))
    load_fails(folder, "$.pipeline.dataflow",
               'input "bias" of session "decoder" is fed by nothing',
               "not a pipeline input (", "input_ids",
               'Wire it, e.g. {"from": "inputs.input_ids", "to": "decoder.bias"}')


def test_renamed_input_ids_not_wired(tmp_path):
    folder = dec(tmp_path, input_name="tok")
    load_fails(folder, "$.pipeline.dataflow", 'input "tok" of session "decoder" is fed by nothing',
               "input_ids)", 'Wire it, e.g. {"from": "inputs.input_ids", "to": "decoder.tok"}')


def test_a_pipeline_input_the_loop_never_gives_is_asked_of_the_caller(tmp_path):
    # a wire from inputs.bias makes "bias" the caller's to give: a call without it fails before
    # anything runs (it used to crash mid-run with KeyError('bias'))
    config = ob.decoder_config(dataflow=[{"from": "inputs.bias", "to": "decoder.bias"}])
    pipe = onnxpipe.load(dec(tmp_path, config, extra_inputs=("bias",)))
    with pytest.raises(InputError) as info:
        pipe.generate(input_ids=[1, 2], max_new_tokens=2)
    assert 'needs input(s) bias: pass inputs={"bias": (values, shape)}' in info.value.message
    # given, it is fed on every step: +0 keeps the argmax (id + 1), +1 on all logits too
    assert pipe.generate(input_ids=[1, 2], max_new_tokens=3, inputs={"bias": ([0.5], (1,))}).tokens == [3, 4, 5]


def test_wire_from_misspelt_loop_input(tmp_path):
    config = ob.decoder_config(dataflow=[{"from": "inputs.input_id", "to": "decoder.tok"}])
    load_fails(dec(tmp_path, config, input_name="tok"), "$.pipeline.dataflow[0].from",
               'pipeline input "input_id" is never given', 'Did you mean "inputs.input_ids"?')


def test_no_output_for_the_loop_to_read(tmp_path):
    config = ob.decoder_config(dataflow=[{"from": "inputs.input_ids", "to": "decoder.tok"}])
    folder = dec(tmp_path, config, input_name="tok", output_name="out_scores")
    load_fails(folder, "$.pipeline.dataflow",
               'no session has an output named "logits" for the loop to read',
               '(session "decoder" has: out_scores)',
               '{"from": "decoder.out_scores", "to": "outputs.logits"}')


# ---- state / output declarations that don't match the session -------------------------------


def test_kv_cache_format_separate_but_no_past_inputs(tmp_path):
    folder = dec(tmp_path, ob.decoder_config(state={"kv_cache": {"format": "separate"}}))
    load_fails(folder, "$.pipeline.state.kv_cache",
               'kv_cache format "separate" but', "has an input matching its past patterns",
               "decoder: input_ids")


def test_kv_cache_auto_without_past_inputs_is_fine(tmp_path):
    folder = dec(tmp_path, ob.decoder_config(state={"kv_cache": {"format": "auto"}}))
    assert onnxpipe.load(folder).generate(input_ids=[0], max_new_tokens=1).tokens == [1]


def test_recurrent_state_the_sessions_lack(tmp_path):
    config = ob.decoder_config(state={"recurrent": [{"input": "h", "output": "h_next", "shape": [1, 4]}]})
    load_fails(dec(tmp_path, config), "$.pipeline.state.recurrent[0]",
               'no session has input "h" and output "h_next"')


def test_output_name_the_session_lacks(tmp_path):
    config = ob.decoder_config(output={"session": "decoder", "name": "probs"})
    load_fails(dec(tmp_path, config), "$.pipeline.output.name",
               'session "decoder" has no output "probs" (available outputs: logits)')


def test_unknown_session_option(tmp_path):
    config = ob.decoder_config(sessions={"decoder": {"file": "model.onnx",
                                                     "session_options": {"intra_op_threads": 1}}})
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(dec(tmp_path, config))
    msg = info.value.message
    assert 'unknown session option "intra_op_threads"' in msg
    assert "sessions.decoder.session_options.intra_op_threads" in msg
    assert "intra_op_num_threads" in msg   # listed among the valid ones
