"""The shipped Chatterbox-Turbo bundle config (bundles/chatterbox-turbo-onnx) on a tiny
random-weight twin with the published session and tensor names (tests/fixtures/chatterbox_twin.py).

Checks that every session runs in the declared order with correctly wired feeds, that the
speech tokens and waveform equal the numpy oracle (the reference loop of
notes/2026-11-21-tts-findings.md §4.3), and that config mistakes are ConfigErrors, not crashes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import onnxpipe
from onnxpipe.backends.native import NativeBackend
from onnxpipe.errors import ConfigError, InputError
from tests.agreement import FP32_KERNELS
from tests.fixtures import tiny_models

SHIPPED = Path(__file__).resolve().parents[3] / "bundles" / "chatterbox-turbo-onnx"
SESSIONS = ("speech_encoder", "embed_tokens", "language_model", "conditional_decoder")
LAYERS, HEADS, HEAD_DIM = 24, 16, 64
KEPT = ("position_ids", "input_ids", "speech_tokens")   # feeds whose values are recorded


@pytest.fixture(scope="module")
def twin() -> Path:
    return tiny_models.ensure("chatterbox_twin")


@pytest.fixture(scope="module")
def expected(twin) -> dict:
    return tiny_models.load_expected(twin)


@pytest.fixture(scope="module")
def voice(twin) -> dict:
    return json.loads((twin / "voice.json").read_text())


def audio_input(voice) -> dict:
    a = voice["audio_values"]
    return {"audio_values": (a["values"], tuple(a["shape"]))}


def precomputed(voice, drop=()) -> dict:
    return {k: (v["values"], tuple(v["shape"])) for k, v in voice["precomputed"].items() if k not in drop}


class Recording(NativeBackend):
    """NativeBackend that notes every model session run: name, feed shapes, a few feed values."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, dict, dict]] = []

    def run(self, session, feeds, outputs, bound=None):
        if session.name in SESSIONS:
            shapes = {k: self.shape(v) for k, v in feeds.items()}
            values = {k: self.to_list(v) for k, v in feeds.items() if k in KEPT}
            self.calls.append((session.name, shapes, values))
        return super().run(session, feeds, outputs, bound)


def bundle_copy(twin: Path, tmp_path: Path, edit=None, drop: str | None = None) -> Path:
    """The twin with the shipped pipeline.json (edited by ``edit``), model files linked; files
    of session ``drop`` left out."""
    dst = tmp_path / "bundle"
    (dst / "onnx").mkdir(parents=True)
    for f in (twin / "onnx").iterdir():
        if drop is None or not f.name.startswith(drop):
            (dst / "onnx" / f.name).symlink_to(f)
    for name in ("tokenizer.json", "plugin.py"):
        shutil.copyfile(twin / name, dst / name)
    config = json.loads((SHIPPED / "pipeline.json").read_text())
    if edit is not None:
        edit(config["pipeline"])
    (dst / "pipeline.json").write_text(json.dumps(config, indent=1))
    return dst


# ---- the fixture is the published layout --------------------------------------------------


def test_twin_ships_the_bundle_config_and_published_names(twin):
    onnx = pytest.importorskip("onnx")
    for name in ("pipeline.json", "plugin.py"):
        assert (twin / name).read_bytes() == (SHIPPED / name).read_bytes(), f"{name} is stale: rebuild the fixture"
    kv_in = [f"past_key_values.{i}.{k}" for i in range(LAYERS) for k in ("key", "value")]
    kv_out = [f"present.{i}.{k}" for i in range(LAYERS) for k in ("key", "value")]
    io = {
        "speech_encoder": (["audio_values"], ["audio_features", "audio_tokens", "speaker_embeddings",
                                              "speaker_features"]),
        "embed_tokens": (["input_ids"], ["inputs_embeds"]),
        "language_model": (["inputs_embeds", "attention_mask", "position_ids", *kv_in], ["logits", *kv_out]),
        "conditional_decoder": (["speech_tokens", "speaker_embeddings", "speaker_features"], ["waveform"]),
    }
    for session, (inputs, outputs) in io.items():
        assert (twin / "onnx" / f"{session}.onnx_data").is_file()
        graph = onnx.load(str(twin / "onnx" / f"{session}.onnx"), load_external_data=False).graph
        assert [i.name for i in graph.input] == inputs
        assert [o.name for o in graph.output] == outputs
        if session == "language_model":
            dims = [d.dim_value or d.dim_param for d in graph.input[3].type.tensor_type.shape.dim]
            assert dims[1:] == [HEADS, "past_sequence_length", HEAD_DIM]
            assert graph.output[0].type.tensor_type.shape.dim[2].dim_value == 6563


# ---- running it ---------------------------------------------------------------------------


def test_sessions_run_in_declared_order_with_wired_feeds(twin, expected, voice):
    backend = Recording()
    pipe = onnxpipe.load(twin, backend=backend)
    result = pipe.speak(expected["text"], inputs=audio_input(voice))
    tokens = expected["greedy_tokens"]
    # every step of the oracle's run is decisive, so under the margin rule (tests/agreement.py)
    # the tokens of this and the tests below must match exactly
    assert expected["min_logit_margin"] >= 2 * FP32_KERNELS
    names = [c[0] for c in backend.calls]
    assert names == ["speech_encoder"] + ["embed_tokens", "language_model"] * len(tokens) + ["conditional_decoder"]
    assert result.sentences[0].tokens == tokens

    n, t, h = expected["audio_frames"], len(expected["input_ids"]), expected["hidden"]
    encoder, *steps, decoder = backend.calls
    assert encoder[1] == {"audio_values": (1, len(voice["audio_values"]["values"]))}
    embeds, models = steps[0::2], steps[1::2]
    for j, ((_, e_shapes, e_vals), (_, shapes, vals)) in enumerate(zip(embeds, models)):
        past = n + t + j - 1 if j else 0          # the voice's frames count as positions
        new = n + t if j == 0 else 1
        assert e_vals["input_ids"] == (expected["input_ids"] if j == 0 else [tokens[j - 1]])
        assert shapes["inputs_embeds"] == (1, new, h)
        assert vals["position_ids"] == list(range(past, past + new))
        assert shapes["attention_mask"] == (1, past + new)
        assert len(shapes) == 3 + 2 * LAYERS
        for i in (0, LAYERS - 1):
            assert shapes[f"past_key_values.{i}.key"] == (1, HEADS, past, HEAD_DIM)
            assert shapes[f"past_key_values.{i}.value"] == (1, HEADS, past, HEAD_DIM)
    _, d_shapes, d_vals = decoder
    assert d_vals["speech_tokens"] == expected["speech_tokens"]
    assert d_shapes["speaker_embeddings"] == (1, 192)
    assert d_shapes["speaker_features"] == (1, 2 * n, 80)


def test_speech_tokens_and_waveform_equal_the_oracle(twin, expected, voice):
    pipe = onnxpipe.load(twin)
    assert pipe.kind == "speech"
    result = pipe.speak(expected["text"], inputs=audio_input(voice))
    assert result.finish_reason == "done"
    assert result.sample_rate == 24000
    [sentence] = result.sentences
    assert sentence.ids == expected["input_ids"]
    assert sentence.tokens == expected["greedy_tokens"] and sentence.tokens[-1] == 6562
    assert len(result.samples) == len(expected["speech_tokens"]) * expected["hop"] == sentence.samples
    np.testing.assert_allclose(np.array(result.samples), expected["waveform"], atol=1e-5)
    assert result.audio_seconds == pytest.approx(len(result.samples) / 24000)
    assert result.compute_seconds > 0
    assert result.wav()[:4] == b"RIFF"
    assert result.to_dict()["sentences"][0]["tokens"] == expected["greedy_tokens"]


def test_each_sentence_gets_a_fresh_loop_and_its_own_tokens(twin, expected, voice):
    pipe = onnxpipe.load(twin)
    result = pipe.speak(expected["text"] + " A second sentence is here.", inputs=audio_input(voice))
    first, second = result.sentences
    assert first.tokens == expected["greedy_tokens"]
    assert second.tokens[-1] == 6562
    silence = round(0.2 * 24000)
    prompt, hop = len(expected["audio_tokens"]), expected["hop"]
    assert first.samples == (prompt + len(first.tokens) - 1 + 3) * hop + silence
    assert second.samples == (prompt + len(second.tokens) - 1 + 3) * hop
    assert len(result.samples) == first.samples + second.samples
    np.testing.assert_allclose(np.array(result.samples[:len(expected["waveform"])]), expected["waveform"], atol=1e-5)


def test_wasm_variant_opens_the_q4_files(twin, expected, voice):
    pipe = onnxpipe.load(twin, variant="wasm")
    assert all(Path(s.ort_session._model_path).name == f"{n}_q4.onnx" for n, s in pipe.sessions.items())
    assert pipe.speak(expected["text"], inputs=audio_input(voice)).sentences[0].tokens == expected["greedy_tokens"]


def test_penalty_covers_start_and_generated_ids_only(twin):
    plugin = onnxpipe.load(twin).executor.plugin
    assert plugin.penalty_ids([50275, 11, 7], [7]) == [6561, 7]


def test_speech_encoder_is_needed_input(twin, expected):
    with pytest.raises(InputError, match="audio_values"):
        onnxpipe.load(twin).speak(expected["text"])


# ---- without speech_encoder: a precomputed voice ------------------------------------------


def test_absent_speech_encoder_runs_on_a_precomputed_voice(twin, tmp_path, expected, voice):
    backend = Recording()
    pipe = onnxpipe.load(bundle_copy(twin, tmp_path, drop="speech_encoder"), backend=backend)
    assert "speech_encoder" not in pipe.sessions
    if "audio_features" not in pipe.executor.plan.pipeline_inputs:
        pytest.xfail("runtime: a plugin's reads from a missing optional session are not pipeline "
                     "inputs yet, so audio_features / audio_tokens can't be given")
    result = pipe.speak(expected["text"], inputs=precomputed(voice))
    assert [c[0] for c in backend.calls][:3] == ["embed_tokens", "language_model", "embed_tokens"]
    assert result.sentences[0].tokens == expected["greedy_tokens"]
    np.testing.assert_allclose(np.array(result.samples), expected["waveform"], atol=1e-5)


def test_absent_speech_encoder_without_a_voice_is_an_input_error(twin, tmp_path, expected, voice):
    pipe = onnxpipe.load(bundle_copy(twin, tmp_path, drop="speech_encoder"))
    with pytest.raises(InputError, match="speaker_embeddings"):
        pipe.speak(expected["text"])
    with pytest.raises(InputError, match="speaker_"):
        pipe.speak(expected["text"], inputs=audio_input(voice))


# ---- config mistakes are ConfigErrors naming the file and JSON path -----------------------


def _fails(folder: Path, path: str, *parts: str) -> None:
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(folder)
    exc = info.value
    assert exc.file == str(folder / "pipeline.json")
    assert exc.path == path, exc.message
    for part in parts:
        assert part in exc.message, exc.message


def _wire(pipeline, to: str) -> int:
    return next(i for i, w in enumerate(pipeline["dataflow"]) if w["to"] == to)


def test_language_model_before_embed_tokens_is_a_step_order_error(twin, tmp_path):
    def swap(p):
        p["flow"][1], p["flow"][2] = p["flow"][2], p["flow"][1]

    folder = bundle_copy(twin, tmp_path, swap)
    index = _wire(json.loads((folder / "pipeline.json").read_text())["pipeline"], "language_model.inputs_embeds")
    _fails(folder, f"$.pipeline.dataflow[{index}]", 'session "embed_tokens" runs after "language_model"')


def test_decoder_fed_by_a_later_session_is_a_step_order_error(twin, tmp_path):
    def decoder_first(p):
        p["flow"] = [{"run": "conditional_decoder", "when": "init"}] + p["flow"][:-1]

    folder = bundle_copy(twin, tmp_path, decoder_first)
    index = _wire(json.loads((folder / "pipeline.json").read_text())["pipeline"],
                  "conditional_decoder.speaker_embeddings")
    _fails(folder, f"$.pipeline.dataflow[{index}]", 'session "speech_encoder" runs after "conditional_decoder"')


def test_wire_from_a_missing_output_is_a_config_error(twin, tmp_path):
    def typo(p):
        p["dataflow"][_wire(p, "conditional_decoder.speaker_embeddings")]["from"] = "speech_encoder.speaker_embedding"

    folder = bundle_copy(twin, tmp_path, typo)
    index = _wire(json.loads((folder / "pipeline.json").read_text())["pipeline"],
                  "conditional_decoder.speaker_embeddings")
    _fails(folder, f"$.pipeline.dataflow[{index}].from", 'no such output', "speaker_embeddings")


def test_wire_to_a_missing_input_is_a_config_error(twin, tmp_path):
    def typo(p):
        p["dataflow"][_wire(p, "conditional_decoder.speech_tokens")]["to"] = "conditional_decoder.speech_token"

    folder = bundle_copy(twin, tmp_path, typo)
    index = _wire(json.loads((folder / "pipeline.json").read_text())["pipeline"], "conditional_decoder.speech_token")
    _fails(folder, f"$.pipeline.dataflow[{index}].to", 'no such input', "speech_tokens")


def test_output_that_the_decoder_lacks_is_a_config_error(twin, tmp_path):
    def rename(p):
        p["output"]["name"] = "wav"

    _fails(bundle_copy(twin, tmp_path, rename), "$.pipeline.output.name", "waveform")


# ---- the tts command line -------------------------------------------------------------------


def test_tts_cli_takes_the_reference_audio_from_an_inputs_file(twin, expected, voice, tmp_path):
    import os
    import subprocess
    import sys

    inputs = tmp_path / "voice.json"
    inputs.write_text(json.dumps({"audio_values": voice["audio_values"]}))
    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "py"), str(root)]))
    proc = subprocess.run([sys.executable, "-m", "onnxpipe", "tts", str(twin), "--text", expected["text"],
                           "--out", str(tmp_path / "x.wav"), "--inputs", str(inputs), "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["sample_rate"] == 24000
    assert report["sentences"][0]["tokens"] == expected["greedy_tokens"]
    assert (tmp_path / "x.wav").read_bytes()[:4] == b"RIFF"
