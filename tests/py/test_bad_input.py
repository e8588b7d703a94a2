"""Bad input at run time and from the CLI, on a tiny decoder bundle built in tmp_path.

The decoder (tests/py/onnx_builders.py) greedily emits ``last id + 1`` (mod 16), so after any
error the same Pipeline must still produce exactly [4, 5, 6, 7, 8] from [1, 2, 3]: an error
loses nothing.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import onnx_builders as ob
import onnxpipe
from onnxpipe.errors import BundleError, ConfigError, EngineError, InputError, OnnxpipeError

ROOT = Path(__file__).resolve().parents[2]
MAX_LENGTH = 32
PROMPT = [1, 2, 3]
EXPECTED = ob.expected_greedy(PROMPT, 5)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return ob.decoder_bundle(tmp_path_factory.mktemp("tiny") / "decoder", ob.decoder_config(MAX_LENGTH))


@pytest.fixture(scope="module")
def pipe(bundle):
    return onnxpipe.load(bundle)


def generates_correctly(pipe) -> None:
    result = pipe.generate(input_ids=PROMPT, max_new_tokens=5)
    assert result.tokens == EXPECTED == [4, 5, 6, 7, 8]
    assert result.finish_reason == "length"


def test_bundle_generates(pipe):
    assert pipe.text is None          # no tokenizer in this bundle: ids in, ids out
    generates_correctly(pipe)


# ---- one test per bad call; each then checks the pipeline still works ----------------------


BAD_CALLS = {
    "empty_prompt": (lambda p: p.generate(input_ids=[]), InputError, ["empty prompt: nothing to generate from"]),
    "empty_text_prompt": (lambda p: p.generate(prompt=""), InputError, ["empty prompt"]),
    "prompt_too_long": (lambda p: p.generate(input_ids=list(range(10)) * 4), InputError,
                        ["prompt is 40 tokens but the context holds 32 (generation.max_length)",
                         "shorten it or start a new chat"]),
    "prompt_fills_context": (lambda p: p.generate(input_ids=[1] * MAX_LENGTH), InputError,
                             ["prompt is 32 tokens but the context holds 32"]),
    "unknown_option": (lambda p: p.generate(input_ids=PROMPT, temprature=0.5), InputError,
                       ['unknown search option "temprature"', 'Did you mean "temperature"?',
                        "Valid options: ", "top_p"]),
    "unknown_option_far": (lambda p: p.generate(input_ids=PROMPT, beam_width=4), InputError,
                           ['unknown search option "beam_width"', "Valid options: "]),
    "top_p_out_of_range": (lambda p: p.generate(input_ids=PROMPT, top_p=2), InputError,
                           ["bad search options: top_p must be in (0, 1], found 2.0"]),
    "top_p_wrong_type": (lambda p: p.generate(input_ids=PROMPT, top_p="0.5"), InputError,
                         ['search option "top_p"', "found '0.5'"]),
    "negative_top_k": (lambda p: p.generate(input_ids=PROMPT, top_k=-1), InputError,
                       ["top_k must be >= 0 (0: no limit), found -1"]),
    "negative_temperature": (lambda p: p.generate(input_ids=PROMPT, do_sample=True, temperature=-1),
                             InputError, ["temperature must be >= 0 (0 means greedy), found -1.0"]),
    "ids_outside_vocab": (lambda p: p.generate(input_ids=[1, 99999]), InputError,
                          ["input_ids: [99999] outside the vocabulary (0..15)"]),
    "max_new_tokens_zero": (lambda p: p.generate(input_ids=PROMPT, max_new_tokens=0), InputError,
                            ["max_new_tokens must be >= 1, found 0"]),
    "several_problems_at_once": (lambda p: p.generate(input_ids=PROMPT, top_p=0, top_k=-2), InputError,
                                 ["top_p must be in (0, 1], found 0.0", "; top_k must be >= 0"]),
    "beam_sampling": (lambda p: p.generate(input_ids=PROMPT, num_beams=4, do_sample=True), InputError,
                      ["beam sampling (num_beams > 1 with do_sample) is not supported"]),
    "text_without_tokenizer": (lambda p: p.generate(prompt="hello"), InputError,
                               ["this bundle has no tokenizer", "pass input_ids="]),
    "chat_without_tokenizer": (lambda p: p.chat([{"role": "user", "content": "hi"}]), InputError,
                               ["this bundle has no tokenizer"]),
    "prompt_and_ids": (lambda p: p.generate(prompt="x", input_ids=PROMPT), InputError,
                       ["give exactly one of prompt= (text) or input_ids= (token ids)"]),
    "neither_prompt_nor_ids": (lambda p: p.generate(), InputError, ["give exactly one of prompt="]),
    "stream_empty_prompt": (lambda p: p.stream(input_ids=[]), InputError, ["empty prompt"]),
    "stream_unknown_option": (lambda p: p.stream(input_ids=PROMPT, top_pp=0.5), InputError,
                              ['unknown search option "top_pp"', 'Did you mean "top_p"?']),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_call_fails_clearly_and_loses_nothing(pipe, name):
    call, kind, parts = BAD_CALLS[name]
    generates_correctly(pipe)          # state from a good run is there when the bad call comes
    with pytest.raises(kind) as info:
        call(pipe)
    for part in parts:
        assert part in info.value.message, f"{part!r} not in {info.value.message!r}"
    assert isinstance(info.value, OnnxpipeError)
    generates_correctly(pipe)


def test_stream_errors_before_any_token(pipe):
    # stream() checks its arguments eagerly: the error comes from the call, not the first next()
    with pytest.raises(InputError):
        pipe.stream(input_ids=PROMPT, top_p=5)
    events = list(pipe.stream(input_ids=PROMPT, max_new_tokens=5))
    assert [t for e in events for t in e.token_ids] == EXPECTED
    assert events[-1].finish_reason == "length"


def test_abandoned_stream_loses_nothing(pipe):
    it = pipe.stream(input_ids=PROMPT, max_new_tokens=5)
    next(it)
    it.close()
    generates_correctly(pipe)


def test_option_aliases_still_work_after_errors(pipe):
    with pytest.raises(InputError) as info:
        pipe.generate(input_ids=PROMPT, seeed=3)
    assert 'Did you mean "seed"?' in info.value.message
    result = pipe.generate(input_ids=PROMPT, max_new_tokens=2, seed=3, do_sample=False)
    assert result.tokens == [4, 5]


def test_temperature_zero_means_greedy(pipe):
    assert pipe.generate(input_ids=PROMPT, do_sample=True, temperature=0, max_new_tokens=3).tokens == [4, 5, 6]


def test_max_tokens_alias(pipe):
    assert pipe.generate(input_ids=PROMPT, max_tokens=2).tokens == [4, 5]


def test_length_limit_from_generation_max_length(pipe):
    # 30-token prompt + new tokens stop at max_length 32 even when more were asked for
    result = pipe.generate(input_ids=[0] * 30, max_new_tokens=10)
    assert result.finish_reason == "length"
    assert len(result.tokens) == 2


def test_non_integer_ids(pipe):
    with pytest.raises(InputError):
        pipe.generate(input_ids=["a", "b"])


# ---- bundles that can't be loaded --------------------------------------------------------


def test_missing_bundle_folder(tmp_path):
    with pytest.raises(BundleError) as info:
        onnxpipe.load(tmp_path / "no_such_bundle")
    assert f"{tmp_path / 'no_such_bundle'}: no such model bundle" in info.value.message


def test_config_io_mismatch_kv_separate_without_past_inputs(tmp_path):
    folder = ob.decoder_bundle(tmp_path / "b", ob.decoder_config(state={"kv_cache": {"format": "separate"}}))
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(folder)
    assert info.value.file == str(folder / "pipeline.json")
    assert info.value.path == "$.pipeline.state.kv_cache"
    assert 'kv_cache format "separate"' in info.value.message and "input_ids" in info.value.message


def test_config_io_mismatch_wire_to_missing_tensor(tmp_path):
    config = ob.decoder_config(dataflow=[{"from": "decoder.hidden", "to": "outputs.logits"}])
    folder = ob.decoder_bundle(tmp_path / "b", config)
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(folder)
    assert info.value.path == "$.pipeline.dataflow[0].from"
    assert 'output "hidden" but session "decoder" has no such output (available outputs: logits)' in info.value.message


def test_unreadable_onnx_file_is_an_engine_error(tmp_path):
    folder = ob.decoder_bundle(tmp_path / "b")
    (folder / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(EngineError) as info:
        onnxpipe.load(folder)
    assert 'session "decoder": onnxruntime could not open' in info.value.message
    assert str(folder / "model.onnx") in info.value.message


# ---- CLI -----------------------------------------------------------------------------------------


def cli(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "py"), str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run([sys.executable, "-m", "onnxpipe", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


def test_cli_validate_good_bundle(bundle):
    out = cli("validate", bundle)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{bundle / 'pipeline.json'}: ok (single-session, 1 session(s), loop autoregressive)")


def test_cli_validate_bad_bundle(tmp_path):
    config = ob.decoder_config()
    config["generation"]["sampling"] = {"temprature": 0.5}
    folder = ob.decoder_bundle(tmp_path / "bad", config)
    out = cli("validate", folder)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.startswith("onnxpipe validate: error (config): ")
    assert f"{folder / 'pipeline.json'}: $.generation.sampling.temprature: " in out.stderr
    assert 'unknown key "temprature". Did you mean "temperature"?' in out.stderr


def test_cli_validate_io_mismatch(tmp_path):
    folder = ob.two_session_bundle(tmp_path / "two", ob.two_session_config(
        dataflow=[{"from": "embed.hidden", "to": "head.inputs_embeds"}]))
    out = cli("validate", folder)
    assert out.returncode == 2
    assert "$.pipeline.dataflow[0].from: " in out.stderr
    assert "(available outputs: inputs_embeds)" in out.stderr


def test_cli_validate_missing_bundle(tmp_path):
    out = cli("validate", tmp_path / "nothing")
    assert out.returncode == 2
    assert "error (bundle)" in out.stderr and "no such model bundle" in out.stderr


def test_cli_run_json(bundle):
    out = cli("run", bundle, "--input-ids", "1,2,3", "--max-new-tokens", "5", "--greedy", "--json")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert {"tokens", "text", "finish_reason", "prefill_ms", "decode_tokens_per_s"} <= set(result)
    assert result["tokens"] == [4, 5, 6, 7, 8]
    assert result["finish_reason"] == "length"
    assert result["text"] == ""
    assert isinstance(result["prefill_ms"], (int, float)) and result["prefill_ms"] >= 0
    assert isinstance(result["decode_tokens_per_s"], (int, float)) and result["decode_tokens_per_s"] >= 0


def test_cli_run_stops_at_eos(tmp_path):
    config = ob.decoder_config()
    config["tokens"] = {"eos": 6}
    folder = ob.decoder_bundle(tmp_path / "eos", config)
    out = cli("run", folder, "--input-ids", "1,2,3", "--max-new-tokens", "5", "--greedy", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["tokens"] == [4, 5, 6]
    assert result["finish_reason"] == "stop"


def test_cli_run_bad_option_value(bundle):
    out = cli("run", bundle, "--input-ids", "1,2,3", "--top-p", "2", "--json")
    assert out.returncode == 3
    assert out.stdout == ""
    assert "onnxpipe run: error (input): bad search options: top_p must be in (0, 1], found 2.0" in out.stderr


def test_cli_run_text_without_tokenizer(bundle):
    out = cli("run", bundle, "--prompt", "hello")
    assert out.returncode == 3
    assert "this bundle has no tokenizer" in out.stderr


def test_cli_run_bad_input_ids(bundle):
    out = cli("run", bundle, "--input-ids", "1,x,3")
    assert out.returncode == 2          # argparse usage error
    assert "--input-ids" in out.stderr
