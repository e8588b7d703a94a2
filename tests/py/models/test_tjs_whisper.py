"""A transformers.js / Optimum Whisper folder (encoder_model.onnx + If-merged
decoder_model_merged.onnx, no pipeline.json) runs unchanged and gives transformers' tokens.

The tjs_whisper fixture's expected.json holds transformers `generate` greedy tokens and margins
on its fixed input_features (margin rule, tests/agreement.py); a second input is checked against
the fixture's own onnxruntime loop over the same files (transformers.js's way of feeding them).
transcribe(waveform) makes the features from preprocessor_config.json as WhisperFeatureExtractor
does: its tokens equal transformers generate on the extractor's features of audio.wav.
"""

from __future__ import annotations

import json
import os
import wave

import numpy as np
import pytest

import onnxpipe
from onnxpipe.cli import main as cli_main
from onnxpipe.errors import ConfigError
from tests.agreement import FP32_KERNELS, assert_greedy_agrees
from tests.fixtures import tiny_models
from tests.fixtures.tjs_whisper import ort_greedy


@pytest.fixture(scope="module")
def whisper():
    bundle = tiny_models.ensure("tjs_whisper")
    exp = tiny_models.load_expected(bundle)
    feats = np.load(bundle / exp["input_features"])
    return bundle, exp, feats, onnxpipe.load(str(bundle))


def features(feats):
    return {"audio_features": (feats.reshape(-1).tolist(), feats.shape)}


def test_greedy_tokens_equal_transformers(whisper):
    bundle, exp, feats, pipe = whisper
    result = pipe.generate(inputs=features(feats), max_new_tokens=exp["max_new_tokens"])
    assert result.finish_reason == "length"
    assert len(result.tokens) == exp["max_new_tokens"]
    assert_greedy_agrees(result.tokens, exp["greedy_tokens"], exp["margins"], FP32_KERNELS, "tjs_whisper fp32")


def test_a_new_input_recomputes_the_cross_attention_cache(whisper):
    # the .encoder. keys/values come from the first step of each call: another input, other tokens
    bundle, exp, feats, pipe = whisper
    other = (feats[:, :, ::-1] * 0.7).copy()
    want = ort_greedy(bundle, other, exp["decoder_prefix"], 12)
    got = pipe.generate(inputs=features(other), max_new_tokens=12).tokens
    assert got == want and got != exp["greedy_tokens"][:12]
    again = pipe.generate(inputs=features(feats), max_new_tokens=exp["max_new_tokens"]).tokens
    assert_greedy_agrees(again, exp["greedy_tokens"], exp["margins"], FP32_KERNELS, "tjs_whisper again")


def test_translation_of_the_fixture(whisper):
    bundle, exp, _, pipe = whisper
    spec = pipe.loaded.spec
    assert spec.tokens.decoder_prefix == tuple(exp["decoder_prefix"])
    assert spec.tokens.eos == (exp["eos_token_id"],)
    assert spec.generation.suppress_tokens.always == (5, 6, 7, 50)
    assert spec.generation.suppress_tokens.at_start == (11, exp["eos_token_id"])
    assert spec.pipeline.state.cross_kv.past_pattern == "past_key_values.{layer}.encoder.{kv}"
    files = {name: s.file["cpu"] for name, s in spec.pipeline.sessions.items()}
    assert files == {"encoder": "onnx/encoder_model.onnx", "decoder": "onnx/decoder_model_merged.onnx"}


def _samples(bundle, exp):
    with wave.open(str(bundle / exp["audio"])) as w:
        assert w.getframerate() == exp["sample_rate"]
        pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16)
    return (pcm.astype(np.float32) / 32768).tolist()


def test_transcribe_a_waveform_gives_transformers_tokens(whisper, capsys):
    bundle, exp, _, pipe = whisper
    audio = pipe.loaded.spec.preprocessing.audio
    assert (audio.input, audio.window_seconds) == ("audio_features", 1.0)
    assert (audio.log_mel.frames, audio.log_mel.center_pad, audio.log_mel.pad_waveform) == (100, "reflect", True)
    result = pipe.transcribe(_samples(bundle, exp), exp["sample_rate"], max_new_tokens=exp["max_new_tokens"])
    assert len(result.windows) == 1
    assert_greedy_agrees(result.tokens, exp["audio_greedy_tokens"], exp["audio_margins"], FP32_KERNELS,
                         "tjs_whisper transcribe")
    # the CLI on the same file: the same tokens
    assert cli_main(["transcribe", str(bundle), "--audio", str(bundle / exp["audio"]), "--json",
                     "--max-new-tokens", str(exp["max_new_tokens"])]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == result.tokens


def _folder_with(bundle, tmp_path, **changes):
    """A copy of the fixture folder (ONNX files linked) whose preprocessor_config.json has ``changes``."""
    for name in os.listdir(bundle):
        if name != "preprocessor_config.json":
            os.symlink(bundle / name, tmp_path / name)
    doc = {**json.loads((bundle / "preprocessor_config.json").read_text()), **changes}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(doc))
    return str(tmp_path / "preprocessor_config.json")


@pytest.mark.parametrize("changes, path, wording", [
    ({"dither": 0.001}, "$.dither",
     "expected 0 (onnxpipe pads with zeros and adds no dither noise), found number 0.001"),
    ({"sampling_rate": 8000}, "$.sampling_rate", "sampling_rate 8000: only 16000 is supported"),
    ({"chunk_length": 30, "n_samples": 480000, "nb_max_frames": 3000}, "$.nb_max_frames",
     "nb_max_frames 3000 differs from what the encoder takes (100"),
    ({"feature_extractor_type": "SeamlessM4TFeatureExtractor"}, "$.feature_extractor_type",
     'expected "WhisperFeatureExtractor"'),
    ({"do_normalize": True}, "$.do_normalize", 'key "do_normalize" is not supported'),
    ({"mel_filters": [[0.0] * 201] * 80}, "$.mel_filters", "expected the Slaney mel filter bank of 80 bands"),
])
def test_a_preprocessor_key_onnxpipe_cannot_honour_is_refused(whisper, tmp_path, changes, path, wording):
    file = _folder_with(whisper[0], tmp_path, **changes)
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(str(tmp_path))
    assert err.value.file == file and err.value.path == path
    assert wording in str(err.value)


def test_reflect_padding_without_a_padded_waveform_is_refused_at_load(whisper, tmp_path):
    from onnxpipe.config import transformers_js

    bundle = whisper[0]
    document = transformers_js.translate(str(bundle), None)
    document["preprocessing"]["audio"]["log_mel"]["pad_waveform"] = False
    for name in os.listdir(bundle):
        os.symlink(bundle / name, tmp_path / name)
    (tmp_path / "pipeline.json").write_text(json.dumps(document))
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(str(tmp_path))
    assert err.value.path == "$.preprocessing.audio.log_mel.center_pad"
    assert 'center_pad "reflect" needs pad_waveform true' in str(err.value)
    assert "found pad_waveform false" in str(err.value)


def test_stored_mel_filters_equal_to_the_computed_ones_load(whisper, tmp_path):
    # older exports store the bank (transformers recomputes it): [n_mels][bins] or [bins][n_mels]
    transformers = pytest.importorskip("transformers")
    bank = transformers.WhisperFeatureExtractor(feature_size=80).mel_filters   # [bins][n_mels]
    _folder_with(whisper[0], tmp_path, mel_filters=bank.T.tolist())
    assert onnxpipe.load(str(tmp_path)).loaded.spec.preprocessing.audio.log_mel.n_mels == 80
