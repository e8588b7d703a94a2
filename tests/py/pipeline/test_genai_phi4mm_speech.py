"""An onnxruntime-genai Phi-4-multimodal bundle with audio and images (model.type "phi4mm",
model.speech, model.vision, model.embedding; tests/fixtures/genai_phi4mm_speech.py): its audio
processor file read as data, the features (ops/log_mel.py speechlib_log_mel_graph) against the
audio_embeds onnxruntime-genai 0.18 made, the audio token count and the prompt ids against its
own, at 16 kHz and 8 kHz; and the bundle loaded unchanged: its greedy tokens agree with
onnxruntime-genai's with a clip, an image, both in one prompt and neither (margin rule,
tests/agreement.py)."""

from __future__ import annotations

import array
import json
import wave
from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.audio.phi4_features import Phi4AudioFeatures, audio_prompt_ids
from onnxpipe.backends.native import NativeBackend
from onnxpipe.config import genai_phi4_speech
from onnxpipe.errors import ConfigError, InputError
from onnxpipe.image import Image
from onnxpipe.text.native import load_text_processor
from tests.agreement import assert_greedy_agrees
from tests.fixtures import tiny_models

# ln mel: the same STFT in float32 by a Conv here and by dlib's FFT there; measured 3.4e-4
TOLERANCE = 1e-3
LOGIT_TOLERANCE = 1e-2   # the same ONNX files; the features within TOLERANCE, scaled 30x by the speech graph


@pytest.fixture(scope="module")
def bundle() -> Path:
    return tiny_models.ensure("genai_phi4mm_speech")


@pytest.fixture(scope="module")
def expected(bundle) -> dict:
    return json.loads((bundle / "expected.json").read_text())


@pytest.fixture(scope="module")
def processor(bundle) -> dict:
    model = json.loads((bundle / "genai_config.json").read_text())["model"]
    return genai_phi4_speech.check(model, str(bundle / "genai_config.json"))


@pytest.fixture(scope="module")
def features(processor) -> Phi4AudioFeatures:
    return Phi4AudioFeatures(NativeBackend(threads=1), processor)


def _samples(path: Path) -> tuple[list[float], int]:
    with wave.open(str(path)) as w:
        pcm = array.array("h", w.readframes(w.getnframes()))
        return [v / 32768 for v in pcm], w.getframerate()


def test_processor_file_is_read_per_rate(processor):
    assert processor["rates"][16000] == {"n_fft": 512, "frame_length": 400, "hop_length": 160,
                                         "mel_n_fft": 512, "n_mels": 80}
    assert processor["rates"][8000] == {"n_fft": 256, "frame_length": 200, "hop_length": 80,
                                        "mel_n_fft": 512, "n_mels": 80}
    assert processor["compression"] == 8 and processor["decoder_rates"] == [8000, 16000]


@pytest.mark.parametrize("name", ["clip", "clip8k"])
def test_features_and_sizes_are_onnxruntime_genai_s(features, bundle, expected, name):
    info = expected["clips"][name]
    samples, rate = _samples(bundle / info["file"])
    (values, shape), size = features.process(samples, rate)
    assert list(shape) == info["embeds_shape"] and [size] == info["audio_sizes"]
    reference = array.array("f", (bundle / info["audio_embeds"]).read_bytes())
    assert len(values) == len(reference)
    assert max(abs(a - b) for a, b in zip(values, reference)) < TOLERANCE


@pytest.mark.parametrize("name", ["clip", "clip8k"])
def test_audio_tags_expand_as_onnxruntime_genai_does(bundle, expected, name):
    case, info = expected["cases"][name], expected["clips"][name]
    ids = audio_prompt_ids(case["prompt"], info["audio_sizes"], load_text_processor(bundle))
    assert ids == case["input_ids"]


def test_rates_and_tags_are_checked(features, bundle):
    with pytest.raises(InputError, match=r"takes 8000 or 16000 Hz .* found 22050; resample"):
        features.process([0.0] * 1000, 22050)
    with pytest.raises(InputError, match=r"fewer than one 400-sample frame at 16000 Hz"):
        features.process([0.0] * 399, 16000)
    with pytest.raises(InputError, match=r"audio tags \[\] for 1 clip"):
        audio_prompt_ids("<s>ab", [3], load_text_processor(bundle))


@pytest.fixture(scope="module")
def pipe(bundle):
    return onnxpipe.load(bundle)


def test_bundle_is_genai_only(bundle):
    assert (bundle / "genai_config.json").is_file() and not (bundle / "pipeline.json").exists()


def _media(bundle: Path, expected: dict, case: dict) -> dict:
    """The case's clip and image as generate() takes them."""
    media = {}
    if "clip" in case:
        media["audios"] = [_samples(bundle / expected["clips"][case["clip"]]["file"])]
    if "image" in case:
        info = expected["image"]
        media["images"] = [Image((bundle / info["rgb"]).read_bytes(), info["width"], info["height"])]
    return media


@pytest.mark.parametrize("name", ["clip", "clip8k", "text", "image", "both"])
def test_greedy_tokens_agree_with_onnxruntime_genai(pipe, bundle, expected, name):
    """audios=[(samples, rate)]: the speech session once per clip, its rows merged by the
    embedding session at the 200011 ids; images: the vision session's rows at the 200010 ids;
    both in one prompt (<|image_1|> and <|audio_1|>, audio_projection_mode 3): the embedding
    step's two merges; text alone: image and audio features fed [0, hidden]."""
    case = expected["cases"][name]
    result = pipe.generate(prompt=case["prompt"], max_new_tokens=expected["max_new_tokens"], do_sample=False,
                           **_media(bundle, expected, case))
    assert result.prompt_tokens == len(case["input_ids"])
    assert len(result.tokens) == len(case["greedy_tokens"])
    assert_greedy_agrees(result.tokens, case["greedy_tokens"], case["margins"], LOGIT_TOLERANCE)


def test_the_clip_decides_the_tokens(pipe, bundle, expected):
    """The same clip at a quarter of its level changes the tokens: the agreement above needs the
    speech session's rows at the audio tokens."""
    case = expected["cases"]["clip"]
    samples, rate = _samples(bundle / "clip.wav")
    result = pipe.generate(prompt=case["prompt"], audios=[([v / 4 for v in samples], rate)],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.tokens != case["greedy_tokens"]


def test_image_and_clip_both_count(pipe, bundle, expected):
    """With the image and the clip, genai's tokens differ from the clip alone's and from the image
    alone's (the agreement above needs both merges); the clip is fed audio_projection_mode 3 with
    images, 2 without, as onnxruntime-genai sets it (this speech graph's tokens don't tell the two
    apart, so the fed value is checked)."""
    both = expected["cases"]["both"]
    assert both["greedy_tokens"] not in (expected["cases"]["clip"]["greedy_tokens"],
                                         expected["cases"]["image"]["greedy_tokens"])
    media = _media(bundle, expected, both)
    ids, inputs = pipe.loaded.with_audios(both["prompt"].replace("<|image_1|>", "<|endoftext10|>"),
                                          media["audios"], images=True)
    assert [list(v[0]) for v in inputs["audio_projection_mode"]] == [[3]]
    ids, inputs = pipe.loaded.with_audios(expected["cases"]["clip"]["prompt"], media["audios"])
    assert [list(v[0]) for v in inputs["audio_projection_mode"]] == [[2]]


def test_audio_requests_are_checked(pipe, bundle, expected):
    clip = _samples(bundle / "clip.wav")
    with pytest.raises(InputError, match=r"audio tags \[\] for 1 clip"):
        pipe.generate(prompt="<s>ab cd", audios=[clip], max_new_tokens=1)
    with pytest.raises(InputError, match=r"audios\[0\]: sample_rate: .* found 44100"):
        pipe.generate(prompt="<s><|audio_1|>ab", audios=[(clip[0], 44100)], max_new_tokens=1)
    with pytest.raises(InputError, match=r"audios: give them with a text prompt alone"):
        pipe.generate(input_ids=[2, 4], audios=[clip], max_new_tokens=1)
    image = _media(bundle, expected, expected["cases"]["image"])["images"]
    with pytest.raises(InputError, match=r"^the prompt has \d+ image token\(s\) \(id 200010\) but no image was given$"):
        pipe.generate(prompt=expected["cases"]["both"]["prompt"], audios=[clip], max_new_tokens=1)
    with pytest.raises(InputError, match=r"the prompt has 0 image token\(s\) \(id 200010\) for 1 image"):
        pipe.generate(prompt=expected["cases"]["clip"]["prompt"], audios=[clip], images=image, max_new_tokens=1)


def test_audio_tokens_without_clips_name_the_clips(pipe, expected):
    """Tags with no clip are refused as onnxruntime-genai 0.18 refuses them, worded about audio
    clips; audio token ids reaching the embedding step with no clip likewise (not "image")."""
    from onnxpipe.engine.merge import feed_features

    with pytest.raises(InputError, match=r"audio tag\(s\) \['<\|audio_1\|>'\] but no audio clip was given"):
        pipe.generate(prompt=expected["cases"]["clip"]["prompt"], max_new_tokens=1)
    with pytest.raises(InputError, match=r"audio tag\(s\) .* but no audio clip was given"):
        pipe.generate(prompt="<s><|audio_1|>ab", audios=[], max_new_tokens=1)
    loaded = pipe.loaded
    step = next(s for phase in loaded.executor.plan.phases.values() for s in phase if s.step.merge is not None)
    with pytest.raises(InputError, match=r"^the prompt has 2 audio token\(s\) \(id 200011\) but no audio clip "
                                         r"\(audios=\) was given$"):
        feed_features(loaded.backend, {}, step, {"input_ids": ([2, 200011, 200011], (1, 3))})


def test_processor_file_keys_are_refused_by_path(tmp_path):
    doc = {"feature_extraction": {"sequence": [
        {"operation": {"type": "AudioDecoderEx", "attrs": {"target_sample_rates": [16000]}}},
        {"operation": {"type": "Phi4AudioEmbed", "attrs": {"stft_normal/win_fn": "hann"}}}]}}
    with pytest.raises(ConfigError, match=r'window string "hann": onnxpipe computes the "hamming" window') as info:
        genai_phi4_speech.read_processor(doc, "audio_processor_config.json")
    assert info.value.path == "$.feature_extraction.sequence[1].operation.attrs.stft_normal/win_fn"
    doc["feature_extraction"]["sequence"][1]["operation"]["attrs"] = {"dither": 1}
    with pytest.raises(ConfigError, match=r'Phi4AudioEmbed attribute "dither" is not supported') as info:
        genai_phi4_speech.read_processor(doc, "audio_processor_config.json")
    assert info.value.path == "$.feature_extraction.sequence[1].operation.attrs.dither"
