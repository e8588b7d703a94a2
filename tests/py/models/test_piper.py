"""The real Piper voice (public/models/piper-en-us-joe, from `make models`) through speak():
plausible speech (duration, energy, silence at the ends), sentence by sentence, controls that
act, the tts CLI's WAV and JSON, and bad input that leaves the voice usable.
Whether the words are right is test_piper_intelligible.py's job."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.audio import decode_wav
from onnxpipe.errors import InputError
from tests import piper_reference

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = ROOT / "public" / "models" / "piper-en-us-joe"
T1 = "The quick brown fox jumps over the lazy dog."
QUIET = {"noise_scale": 0.0, "noise_w": 0.0}   # VITS samples noise in the graph: 0 is deterministic
SILENT = 0.01                                   # |x| below this is silence


@pytest.fixture(scope="module")
def pipe():
    assert (BUNDLE / "en_US-joe-medium.onnx").exists(), f"{BUNDLE} is not built: run `make models`"
    return onnxpipe.load(BUNDLE)


def edges(samples, rate):
    loud = [i for i, v in enumerate(samples) if abs(v) > SILENT]
    return loud[0] / rate, (len(samples) - 1 - loud[-1]) / rate


def test_a_fixed_sentence_is_plausible_speech(pipe):
    result = pipe.speak(T1, **QUIET)
    s = result.samples
    rms = math.sqrt(sum(v * v for v in s) / len(s))
    lead, trail = edges(s, result.sample_rate)
    assert result.sample_rate == 22050 and len(result.sentences) == 1
    assert 2.2 <= result.audio_seconds <= 3.5, result.audio_seconds       # ~9 words
    assert 0.03 <= rms <= 0.12, rms                                       # speech, not silence or noise
    assert max(abs(v) for v in s) < 1.0
    assert lead < 0.3 and trail < 0.3, (lead, trail)                      # silence at the ends, not more
    assert result.real_time_factor > 1 and result.compute_seconds > 0
    # the ids are Piper's, from espeak-ng (the bundle's data) and the voice's own id map
    want = piper_reference.reference(T1, "en-us", BUNDLE / ".native",
                                     piper_reference.voice_id_map(BUNDLE / "en_US-joe-medium.onnx.json"))
    assert [s.ids for s in result.sentences] == [ids for _, ids in want]


def test_noise_off_is_deterministic_and_default_noise_varies(pipe):
    assert list(pipe.speak(T1, **QUIET).samples) == list(pipe.speak(T1, **QUIET).samples)
    a, b = pipe.speak(T1).samples, pipe.speak(T1).samples
    assert list(a) != list(b)


def test_sentences_come_one_by_one_with_silence_between(pipe):
    seen = []
    result = pipe.speak("It is cold outside. Could you close the window?", on_audio=lambda s, info: seen.append(
        (len(s), info.text)), **QUIET)
    assert [t for _, t in seen] == ["It is cold outside.", "Could you close the window?"]
    first = seen[0][0]
    gap = result.samples[first - int(0.2 * 22050):first]
    assert max(abs(v) for v in gap) == 0.0                   # 0.2 s of silence after sentence 1
    assert sum(n for n, _ in seen) == len(result.samples)
    assert result.to_dict()["sentences"][1]["text"] == "Could you close the window?"


def test_length_scale_slows_speech_down(pipe):
    fast = pipe.speak(T1, length_scale=0.8, **QUIET).audio_seconds
    slow = pipe.speak(T1, length_scale=1.25, **QUIET).audio_seconds
    assert slow > pipe.speak(T1, **QUIET).audio_seconds > fast


@pytest.mark.parametrize("text, controls, words", [
    ("", {}, ["expected some words"]),
    ("...", {}, ["nothing to speak"]),
    (T1, {"noise": 0}, ['unknown control "noise"', "noise_scale"]),
    (T1, {"length_scale": 0}, ['"length_scale" = 0 is outside its range']),
])
def test_bad_input_is_an_input_error_and_the_voice_still_speaks(pipe, text, controls, words):
    with pytest.raises(InputError) as info:
        pipe.speak(text, **controls)
    for word in words:
        assert word in info.value.message
    assert pipe.speak("Still here.", **QUIET).audio_seconds > 0.5


def test_tts_cli_writes_a_wav_and_prints_json(tmp_path):
    out = tmp_path / "x.wav"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "py"), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-m", "onnxpipe", "tts", str(BUNDLE), "--text", T1, "--out", str(out),
                           "--set", "noise_scale=0", "--set", "noise_w=0", "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["sample_rate"] == 22050 and report["out"] == str(out)
    assert report["audio_seconds"] > 2 and report["compute_seconds"] > 0
    blob = out.read_bytes()
    assert blob[:4] == b"RIFF" and blob[8:16] == b"WAVEfmt "
    samples, rate, channels = decode_wav(blob)
    assert (rate, channels) == (22050, 1)
    assert abs(len(samples) / rate - report["audio_seconds"]) < 1e-3


def test_tts_cli_refuses_a_bad_control_with_a_clear_message(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "py"), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-m", "onnxpipe", "tts", str(BUNDLE), "--text", T1,
                           "--out", str(tmp_path / "x.wav"), "--set", "noise_scale"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "--set: expected NAME=NUMBER" in proc.stderr
    assert not (tmp_path / "x.wav").exists()


def test_warm_up_speaks_once_and_leaves_the_voice_as_it_was(pipe):
    before = list(pipe.speak(T1, **QUIET).samples)
    assert pipe.warm_up() > 0
    assert list(pipe.speak(T1, **QUIET).samples) == before
