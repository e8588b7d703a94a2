"""genai_config.json with model.encoder (Whisper, as onnxruntime-genai's builder writes it) ->
pipeline.json v2 (config/genai_encoder.py), and the refusals of what it can't translate."""

import json
import shutil

import pytest

from onnxpipe.config import genai_v1
from onnxpipe.config.load import load_config
from onnxpipe.errors import ConfigError


@pytest.fixture
def bundle(genai_whisper, tmp_path):
    """A copy of the builder's config files (no weights) to edit."""
    for name in ("genai_config.json", "audio_processor_config.json", "tokenizer.json"):
        shutil.copy(genai_whisper / name, tmp_path / name)
    return tmp_path


def _edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _translate(folder):
    file = str(folder / "genai_config.json")
    return genai_v1.translate(json.loads((folder / "genai_config.json").read_text()), file)


def _refused(folder, file, path, *words):
    with pytest.raises(ConfigError) as info:
        _translate(folder)
    exc = info.value
    assert (exc.file, exc.path) == (str(folder / file), path), exc
    for w in words:
        assert w in exc.message, exc.message


def test_whisper_bundle_translation(genai_whisper):
    loaded = load_config(genai_whisper)   # validated against the ONNX files as well
    doc = _translate(genai_whisper)
    pipe = doc["pipeline"]
    assert pipe["flow"] == [{"run": "encoder", "when": "init"}, {"run": "decoder", "when": "step"}]
    assert pipe["sessions"]["encoder"] == {"file": "encoder.onnx"}
    assert {"from": "inputs.audio_features", "to": "encoder.audio_features"} in pipe["dataflow"]
    for i in range(2):
        for what in ("key", "value"):
            assert {"from": f"encoder.present_{what}_cross_{i}", "to": f"decoder.past_{what}_cross_{i}"} \
                in pipe["dataflow"]
    assert doc["tokens"]["decoder_prefix"] == [508, 509, 510, 511]
    assert "bos" not in doc["tokens"]
    audio = loaded.spec.preprocessing.audio
    assert (audio.sample_rate, audio.input, audio.window_seconds) == (16000, "audio_features", 30.0)
    assert (audio.log_mel.n_fft, audio.log_mel.hop_length, audio.log_mel.n_mels, audio.log_mel.frames) == \
        (400, 160, 80, 3000)


def test_other_encoder_types_are_refused(bundle):
    _edit(bundle / "genai_config.json", lambda d: d["model"].update(type="parakeet_tdt"))
    _refused(bundle, "genai_config.json", "$.model.type", 'model.encoder of model.type "parakeet_tdt"',
             '"whisper"', "transducer")


def test_decoder_without_cross_inputs_is_refused(bundle):
    _edit(bundle / "genai_config.json",
          lambda d: d["model"]["decoder"]["inputs"].pop("cross_past_value_names"))
    _refused(bundle, "genai_config.json", "$.model.decoder.inputs.cross_past_value_names",
             'missing "cross_past_value_names"', "encoder_hidden_states")


def test_encoder_cross_output_names_default_as_in_onnxruntime_genai(bundle):
    _edit(bundle / "genai_config.json", lambda d: d["model"]["encoder"].pop("outputs"))
    wires = _translate(bundle)["pipeline"]["dataflow"]
    assert {"from": "encoder.present_value_cross_1", "to": "decoder.past_value_cross_1"} in wires


def test_missing_processor_file_is_refused(bundle):
    (bundle / "audio_processor_config.json").unlink()
    _refused(bundle, "genai_config.json", "$.model.speech.config_filename",
             "audio_processor_config.json is missing")


def test_unsupported_audio_operation_is_refused(bundle):
    def change(d):
        d["feature_extraction"]["sequence"][2]["operation"]["type"] = "KaldiFbank"
    _edit(bundle / "audio_processor_config.json", change)
    _refused(bundle, "audio_processor_config.json", "$.feature_extraction.sequence[2].operation.type",
             '"KaldiFbank" is not supported', "LogMelSpectrum")


def test_unsupported_audio_attribute_is_refused(bundle):
    def change(d):
        d["feature_extraction"]["sequence"][2]["operation"]["attrs"]["feature_first"] = 0
    _edit(bundle / "audio_processor_config.json", change)
    _refused(bundle, "audio_processor_config.json",
             "$.feature_extraction.sequence[2].operation.attrs.feature_first",
             'LogMelSpectrum attribute "feature_first" is not supported')


def test_window_shorter_than_fft_is_refused(bundle):
    def change(d):
        d["feature_extraction"]["sequence"][1]["operation"]["attrs"]["frame_length"] = 300
    _edit(bundle / "audio_processor_config.json", change)
    _refused(bundle, "audio_processor_config.json",
             "$.feature_extraction.sequence[1].operation.attrs.frame_length", "frame_length 300 differs")


def test_tokenizer_without_whisper_prompt_is_refused(bundle):
    _edit(bundle / "tokenizer.json",
          lambda d: d.update(added_tokens=[t for t in d["added_tokens"]
                                           if t["content"] != "<|startoftranscript|>"]))
    _refused(bundle, "tokenizer.json", "$.added_tokens", "no <|startoftranscript|> token")


def test_hann_window_listed_in_the_file_is_accepted_when_it_is_hann(bundle):
    from onnxpipe.ops.log_mel import hann_periodic

    def change(d):
        d["feature_extraction"]["sequence"][1]["operation"]["attrs"]["hann_win"] = hann_periodic(400)
    _edit(bundle / "audio_processor_config.json", change)
    assert _translate(bundle)["preprocessing"]["audio"]["log_mel"]["n_fft"] == 400

    def other(d):
        d["feature_extraction"]["sequence"][1]["operation"]["attrs"]["hann_win"] = [1.0] * 400
    _edit(bundle / "audio_processor_config.json", other)
    _refused(bundle, "audio_processor_config.json", "$.feature_extraction.sequence[1].operation.attrs.hann_win",
             "only the periodic Hann window")


def test_other_downsampling_rate_is_refused(bundle):
    def change(d):
        d["feature_extraction"]["sequence"][0]["operation"]["attrs"] = {"downsampling_rate": 8000}
    _edit(bundle / "audio_processor_config.json", change)
    _refused(bundle, "audio_processor_config.json", "$.feature_extraction.sequence[0].operation.attrs.downsampling_rate",
             "downsampling_rate 8000", "16000")


def test_transducer_without_decoder_is_refused_by_type():
    genai = {"model": {"type": "nemotron_speech", "encoder": {"filename": "encoder.onnx"},
                       "joiner": {"filename": "joiner.onnx"}}}
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(genai)
    assert info.value.path == "$.model.type"
    assert 'model.encoder of model.type "nemotron_speech" is not supported' in info.value.message


def test_speech_section_names_the_processor_file(bundle):
    (bundle / "audio_processor_config.json").rename(bundle / "whisper_processor.json")
    _edit(bundle / "genai_config.json",
          lambda d: d["model"].update(speech={"config_filename": "whisper_processor.json"}))
    assert _translate(bundle)["preprocessing"]["audio"]["log_mel"]["n_mels"] == 80
    _edit(bundle / "genai_config.json", lambda d: d["model"].update(speech={"config_filename": "other.json"}))
    _refused(bundle, "genai_config.json", "$.model.speech.config_filename", "other.json is missing")
    _edit(bundle / "genai_config.json", lambda d: d["model"].update(speech={"filename": "speech.onnx"}))
    _refused(bundle, "genai_config.json", "$.model.speech.filename", 'model.speech "filename" is not supported')


def test_english_only_vocabulary_gets_no_language_or_task_tokens(bundle):
    _edit(bundle / "genai_config.json", lambda d: d["model"].update(vocab_size=51864))
    assert _translate(bundle)["tokens"]["decoder_prefix"] == [508, 511]
