"""preprocessing.audio: checked at load against the planned flow (a caller input, a token
loop, positive numbers), unknown keys refused; with a token loop it makes the bundle's kind
"transcription". On the tiny encoder-decoder (tests/py/tiny_encoder_decoder.py), whose
``features`` input stands in for the waveform."""

from __future__ import annotations

import pytest

import onnxpipe
import tiny_encoder_decoder as ted
from onnxpipe.errors import ConfigError, InputError

AUDIO = {"sample_rate": 16000, "input": "features", "window_seconds": 30}


def test_a_token_loop_with_audio_is_a_transcription_bundle(tmp_path):
    pipe = onnxpipe.load(ted.bundle(tmp_path, {"preprocessing": {"audio": AUDIO}}), text=False)
    assert pipe.kind == "transcription"
    assert onnxpipe.load(ted.bundle(tmp_path), text=False).kind == "text"
    with pytest.raises(InputError, match="no tokenizer"):   # transcription needs one to make text
        pipe.transcribe([0.0] * 8, 16000)


@pytest.mark.parametrize("audio, path, message", [
    (dict(AUDIO, input="waveform"), "$.preprocessing.audio.input", 'takes features'),
    (dict(AUDIO, window_seconds=0), "$.preprocessing.audio.window_seconds", "window_seconds of at least 0.02"),
    # shorter than two energy frames, or infinite: IndexError / OverflowError at the first call (fuzz)
    (dict(AUDIO, window_seconds=1e-320), "$.preprocessing.audio.window_seconds", "found 1e-320"),
    (dict(AUDIO, window_seconds=float("inf")), "$.preprocessing.audio.window_seconds", "finite, found inf"),
    (dict(AUDIO, sample_rate=-1), "$.preprocessing.audio.sample_rate", "sample rate > 0"),
    (dict(AUDIO, sampling_rate=16000), "$.preprocessing.audio.sampling_rate", 'Did you mean "sample_rate"'),
    ({"input": "features"}, "$.preprocessing.audio.sample_rate", "missing required key"),
])
def test_misdeclared_audio_is_refused(tmp_path, audio, path, message):
    with pytest.raises(ConfigError, match=message) as info:
        onnxpipe.load(ted.bundle(tmp_path, {"preprocessing": {"audio": audio}}), text=False)
    assert info.value.path == path


def test_audio_needs_a_token_loop(tmp_path):
    changes = {"preprocessing": {"audio": AUDIO}, "generation": {"loop": "single_pass"},
               "tokens.decoder_prefix": None,
               "pipeline.output": {"session": "decoder", "name": "logits"},
               "pipeline.dataflow": [{"from": "inputs.features", "to": "encoder.features"},
                                     {"from": "inputs.input_ids", "to": "decoder.input_ids"}]}
    with pytest.raises(ConfigError, match="needs a token loop") as info:
        onnxpipe.load(ted.bundle(tmp_path, changes), text=False)
    assert info.value.path == "$.preprocessing.audio"
    changes["tokens.decoder_prefix"] = [0]
    changes["preprocessing"] = {}
    with pytest.raises(ConfigError, match="need a token loop") as info:
        onnxpipe.load(ted.bundle(tmp_path, changes), text=False)
    assert info.value.path == "$.tokens.decoder_prefix"
