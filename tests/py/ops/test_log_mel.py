"""ops/log_mel.py: the runtime's Whisper log-mel graph against transformers' filters and
onnxruntime-genai's own features (onnxruntime-extensions' STFTNorm + LogMelSpectrum)."""

import wave

import numpy as np
import onnxruntime as ort
import pytest

from onnxpipe.ops.log_mel import log_mel_graph, mel_filters


def test_mel_filters_equal_transformers():
    transformers = pytest.importorskip("transformers")
    ref = transformers.WhisperFeatureExtractor(feature_size=80, sampling_rate=16000).mel_filters.T
    np.testing.assert_allclose(np.array(mel_filters(16000, 400, 80)), ref, rtol=0, atol=1e-12)


def test_graph_equals_onnxruntime_genai_features(genai_whisper, tmp_path):
    og = pytest.importorskip("onnxruntime_genai")
    session = ort.InferenceSession(log_mel_graph(16000, 400, 160, 80, 3000), providers=["CPUExecutionProvider"])
    processor = og.Model(str(genai_whisper)).create_multimodal_processor()
    rng = np.random.default_rng(0)
    for n in (24050, 3 * 16000 + 77, 300):   # not whole hops: n // hop frames, then the floor
        q = (rng.standard_normal(n) * 3000 * np.sin(np.arange(n) / 500)).astype(np.int16)
        path = tmp_path / f"{n}.wav"
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(q.tobytes())
        ref = processor("<|startoftranscript|>", audios=og.Audios.open(str(path)))["audio_features"].as_numpy()
        mine = session.run(None, {"waveform": (q.astype(np.float32) / 32768)[None]})[0]
        assert mine.shape == ref.shape == (1, 80, 3000)
        assert np.abs(mine - ref).max() < 1e-4, n


def test_audio_shorter_than_a_hop_is_the_floor_of_silence():
    session = ort.InferenceSession(log_mel_graph(16000, 400, 160, 80, 3000), providers=["CPUExecutionProvider"])
    out = session.run(None, {"waveform": np.full((1, 100), 0.5, np.float32)})[0]
    assert out.shape == (1, 80, 3000)
    assert np.all(out == (-10 - 8 + 4) / 4)


def test_transformers_style_graph_equals_whisper_feature_extractor():
    # transformers.js / Optimum folders: the waveform zero-padded to 30 s, reflect-padded STFT
    transformers = pytest.importorskip("transformers")
    extractor = transformers.WhisperFeatureExtractor(feature_size=80, sampling_rate=16000)
    session = ort.InferenceSession(log_mel_graph(16000, 400, 160, 80, 3000, "reflect", True),
                                   providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    cases = {"short": 0.3 * rng.standard_normal(8000) * np.sin(np.arange(8000) / 300),
             "near 30 s": 0.2 * np.sin(np.arange(478_123) * 0.05) + 0.05 * rng.standard_normal(478_123),
             "longer than 30 s": 0.1 * rng.standard_normal(500_000),
             "quiet": 1e-4 * rng.standard_normal(24_000)}
    for what, wave in cases.items():
        wave = wave.astype(np.float32)
        ref = extractor(wave, sampling_rate=16000, return_tensors="np")["input_features"]
        mine = session.run(None, {"waveform": wave[None]})[0]
        assert mine.shape == ref.shape == (1, 80, 3000)
        assert np.abs(mine - ref).max() < 1e-4, (what, np.abs(mine - ref).max())


def test_speechlib_bins_follow_ort_extensions_8k_rule():
    """ort-extensions' SpeechLibLogMel: 16 kHz reads all 257 bins; the 8 kHz STFT (129 bins)
    under filters made for n_fft 512 reads the first 257 - 129 - 1 = 127; fewer filter
    columns than bins is refused."""
    from onnxpipe.ops.log_mel import speechlib_bins

    assert speechlib_bins(512, 512) == 257 and speechlib_bins(256, 512) == 127
    with pytest.raises(ValueError, match="fewer than the 257 bins"):
        speechlib_bins(512, 256)
