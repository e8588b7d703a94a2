"""The real Silero VAD v5 (public/models/silero-vad, from `make models`) on speech rendered by
the Piper voice (public/models/piper-en-us-joe): silence, a sentence, silence, a sentence,
silence, at 16 kHz. Segments match where the speech is; per-chunk probabilities equal a plain
onnxruntime loop over the same file; a live detector fed odd-sized pieces says exactly what
the whole-file call says; controls act; config mistakes are clear."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import onnxpipe
from onnxpipe.audio import encode_wav
from onnxpipe.errors import ConfigError, InputError
from tests.vad_reference import GAPS, PIPER, RATE, SENTENCES, fft_resample, speech_audio

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = ROOT / "public" / "models" / "silero-vad"
MODEL = BUNDLE / "silero_vad_v5.onnx"
CHUNK, CONTEXT = 512, 64
TOLERANCE = 0.1               # seconds: segment edges against where the speech is


@pytest.fixture(scope="module")
def vad():
    assert MODEL.exists(), f"{BUNDLE} is not built: run `make models`"
    return onnxpipe.load(BUNDLE)


@pytest.fixture(scope="module")
def speech():
    """(16 kHz samples, [(start, end)] of the speech in them, in seconds)."""
    assert (PIPER / "en_US-joe-medium.onnx").exists(), f"{PIPER} is not built: run `make models`"
    return speech_audio()


def reference_probabilities(samples: np.ndarray) -> np.ndarray:
    """A plain onnxruntime loop: 512-sample chunks (the last zero-padded), 64 samples of the
    audio before each put in front of it, the state carried."""
    sess = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    padded = np.concatenate([samples, np.zeros(-len(samples) % CHUNK, np.float32)])
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros(CONTEXT, np.float32)
    out = []
    for i in range(0, len(padded), CHUNK):
        x = np.concatenate([context, padded[i:i + CHUNK]])[None, :]
        p, state = sess.run(["output", "stateN"], {"input": x, "state": state, "sr": np.array(RATE, np.int64)})
        context = x[0, -CONTEXT:]
        out.append(p.item())
    return np.array(out, np.float32)


def test_segments_match_the_speech(vad, speech):
    samples, truth = speech
    result = vad.detect_speech(samples, RATE)
    assert len(result.segments) == len(truth), (result.segments, truth)
    for (start, end), (t0, t1) in zip(result.segments, truth):
        assert abs(start - t0) <= TOLERANCE and abs(end - t1) <= TOLERANCE, (result.segments, truth)
    assert result.audio_seconds == pytest.approx(len(samples) / RATE)
    assert len(result.probabilities) == -(-len(samples) // CHUNK)
    assert 0 < result.compute_seconds < result.audio_seconds   # faster than real time


def test_probabilities_equal_a_plain_onnxruntime_loop(vad, speech):
    samples, _ = speech
    got = np.array(vad.detect_speech(samples, RATE).probabilities, np.float32)
    want = reference_probabilities(samples)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert want.max() > 0.9 and want[: int(GAPS[0] * RATE) // CHUNK - 1].max() < 0.1   # speech and silence


def test_a_live_detector_fed_odd_pieces_says_what_the_whole_file_says(vad, speech):
    samples, _ = speech
    whole = vad.detect_speech(samples, RATE)
    detector = vad.speech_detector()
    rng = np.random.default_rng(7)
    events, i = [], 0
    while i < len(samples):
        n = int(rng.integers(1, 1500))
        events += detector.push(samples[i:i + n].tolist())   # a list, as a page would send
        i += n
    events += detector.finish()
    assert [e.to_dict() for e in events] == [e.to_dict() for e in whole.events]
    assert list(detector.result().probabilities) == list(whole.probabilities)
    # one start then one end per segment, each end at the segment's edges, decided in time order
    assert [e.type for e in events] == ["speech_start", "speech_end"] * len(whole.segments)
    assert [(e.start, e.end) for e in events if e.type == "speech_end"] == whole.segments
    assert all(a.time <= b.time for a, b in zip(events, events[1:]))
    with pytest.raises(InputError, match="has finished"):
        detector.push([0.0])


def test_a_pause_comes_before_each_end_with_its_bounds(vad, speech):
    """With pause_ms, each segment's silence is reported as a pause before its end is decided,
    with the end's bounds (what a voice app transcribes early); the other events are unchanged."""
    samples, _ = speech
    whole = vad.detect_speech(samples, RATE)
    detector = vad.speech_detector(pause_ms=50)   # defaults: pad 30 ms, min_silence 100 ms
    events = detector.push(samples.tolist()) + detector.finish()
    assert [e.to_dict() for e in events if e.type != "speech_pause"] == [e.to_dict() for e in whole.events]
    for end in (e for e in events if e.type == "speech_end" and e.time < len(samples) / RATE):
        pauses = [e for e in events if e.type == "speech_pause" and (e.start, e.end) == (end.start, end.end)]
        assert len(pauses) == 1 and pauses[0].time < end.time
    with pytest.raises(InputError, match="pause_ms"):
        vad.speech_detector(pause_ms=1000)   # not below min_silence_ms


def test_a_new_stream_takes_over_the_bundle(vad, speech):
    samples, _ = speech
    first = vad.speech_detector()
    first.push(samples[:RATE])
    vad.speech_detector()
    with pytest.raises(InputError, match="another speech detector"):
        first.push(samples[RATE:2 * RATE])


def test_controls_change_the_segments_as_they_should(vad, speech):
    samples, truth = speech
    base = vad.detect_speech(samples, RATE).segments
    # a silence longer than the gap between the sentences is needed to end a segment: one segment
    merged = vad.detect_speech(samples, RATE, min_silence_ms=GAPS[1] * 1000 + 500).segments
    assert len(merged) == 1 and merged[0][0] == base[0][0] and merged[0][1] >= base[1][1] - 0.05
    # more padding: each segment grows by the extra padding at both ends...
    slow = vad.detect_speech(samples, RATE, min_silence_ms=400).segments
    padded = vad.detect_speech(samples, RATE, min_silence_ms=400, speech_pad_ms=230).segments
    for (a0, a1), (b0, b1) in zip(slow, padded):
        assert b0 == pytest.approx(a0 - 0.2, abs=1e-6) and b1 == pytest.approx(a1 + 0.2, abs=1e-6)
    # ...but never past the audio seen when the end was decided (100 ms of silence, in chunks)
    padded = vad.detect_speech(samples, RATE, speech_pad_ms=230).segments
    for (a0, a1), (b0, b1) in zip(base, padded):
        assert b0 == pytest.approx(a0 - 0.2, abs=1e-6) and a1 < b1 <= a1 + 0.1
    # speech must last longer than either sentence: nothing is left
    assert vad.detect_speech(samples, RATE, min_speech_ms=10_000).segments == []
    # a threshold no chunk reaches: nothing; a lower one finds at least the same speech
    assert vad.detect_speech(samples, RATE, threshold=1.0, negative_threshold=0.5).segments == []
    low = vad.detect_speech(samples, RATE, threshold=0.2, negative_threshold=0.1).segments
    assert low[0][0] <= base[0][0] and low[-1][1] >= base[-1][1]
    with pytest.raises(InputError, match="threshold"):
        vad.detect_speech(samples, RATE, threshold=0.3)   # under the default negative threshold 0.35
    with pytest.raises(InputError, match='unknown control "treshold". Did you mean "threshold"'):
        vad.detect_speech(samples, RATE, treshold=0.3)
    with pytest.raises(InputError, match=r"outside its range \[0.0, 1.0\]"):
        vad.detect_speech(samples, RATE, threshold=1.5)


def test_audio_at_another_rate_is_resampled_by_the_engine(vad, speech):
    samples, truth = speech
    at_44k = fft_resample(samples, RATE, 44100)
    result = vad.detect_speech(at_44k, 44100)
    assert len(result.segments) == len(truth)
    for (start, end), (t0, t1) in zip(result.segments, truth):
        assert abs(start - t0) <= TOLERANCE and abs(end - t1) <= TOLERANCE, (result.segments, truth)
    assert result.audio_seconds == pytest.approx(len(samples) / RATE, abs=1e-3)
    with pytest.raises(InputError, match="sample_rate: expected a positive integer"):
        vad.detect_speech(samples, 0)


def test_other_jobs_are_refused(vad):
    with pytest.raises(InputError, match="detect_speech"):
        vad.run()
    with pytest.raises(InputError):
        vad.speak("Hello.")
    piper = onnxpipe.load(PIPER)
    with pytest.raises(InputError, match="not a voice activity detector"):
        piper.detect_speech([0.0] * 512, RATE)


def test_the_vad_cli_prints_the_segments(vad, speech, tmp_path):
    samples, _ = speech
    wav = tmp_path / "speech.wav"
    wav.write_bytes(encode_wav(samples.tolist(), RATE))
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'py'}{os.pathsep}{ROOT}")
    run = subprocess.run([sys.executable, "-m", "onnxpipe", "vad", str(BUNDLE), "--audio", str(wav), "--json",
                          "--set", "speech_pad_ms=50"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    # the WAV holds 16-bit samples: the same segments as the API on those samples
    pcm = np.round(np.clip(samples, -1, 1) * 32767) / 32767
    want = vad.detect_speech(pcm.astype(np.float32), RATE, speech_pad_ms=50).to_dict()
    assert out["segments"] == want["segments"] and len(out["segments"]) == len(SENTENCES)
    assert out["audio_seconds"] == want["audio_seconds"] and out["compute_seconds"] > 0
    bad = subprocess.run([sys.executable, "-m", "onnxpipe", "vad", str(BUNDLE), "--audio", str(wav),
                          "--set", "threshold=7"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert bad.returncode == 3 and "outside its range" in bad.stderr


def copy_bundle(tmp_path, edit) -> Path:
    folder = tmp_path / "vad"
    folder.mkdir()
    shutil.copyfile(MODEL, folder / MODEL.name)
    doc = json.loads((BUNDLE / "pipeline.json").read_text())
    edit(doc)
    (folder / "pipeline.json").write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize("edit,where,message", [
    (lambda d: d["pipeline"]["state"]["recurrent"][0].update(shape=[2, 1, 64]),
     "$.pipeline.state.recurrent[0].shape", 'does not fit session "vad" input "state", which is [2, ?, 128]'),
    (lambda d: d["pipeline"]["state"]["recurrent"][0].update(shape=[2, 128]),
     "$.pipeline.state.recurrent[0].shape", "shape [2, 128] does not fit"),
    (lambda d: d["generation"]["streaming"].update(chunk_sise=512),
     "$.generation.streaming.chunk_sise", 'unknown key "chunk_sise". Did you mean "chunk_size"?'),
    (lambda d: d["pipeline"]["output"]["segments"].update(pad="speech_pad_ms"),
     "$.pipeline.output.segments.pad", 'unknown key "pad"'),
    (lambda d: d["pipeline"]["dataflow"].pop(1),
     "$.pipeline.dataflow", 'input "sr" of session "vad" is fed by nothing'),
])
def test_config_mistakes_are_clear(tmp_path, edit, where, message):
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(copy_bundle(tmp_path, edit))
    text = str(err.value)
    assert "pipeline.json" in text and where in text and message in text, text


def test_the_builder_skips_a_built_bundle():
    from onnxpipe.export import silero_vad

    assert silero_vad.build(str(BUNDLE)) is False
