"""Speech and transcription through `onnxpipe serve` with the official `openai` client: the
Piper voice's WAV (streamed sentence by sentence) is heard back by the project's Whisper bundle as
the input text (word error rate at most 0.2, the rule of tests/py/models/test_piper_intelligible.py),
a Piper-rendered WAV comes back in every transcription response_format, and the audio fields the
voice can't honour are refused naming them."""

from __future__ import annotations

import io
import re
import time
import wave

import openai
import pytest

from conftest import VOICE, WHISPER
from tests.py.word_errors import wer

MAX_WER = 0.2
TEXT = "It is cold outside. Could you close the window before we leave?"
QUIET = {"noise_scale": 0, "noise_w": 0}   # the same audio every time


@pytest.fixture(scope="module")
def api(serve, openai_client):
    with serve([VOICE, WHISPER]) as (base, _app):
        yield openai_client(base)


@pytest.fixture(scope="module")
def spoken(api) -> bytes:
    with api.audio.speech.with_streaming_response.create(model=VOICE.name, input=TEXT, voice="default",
                                                         response_format="wav", extra_body={"controls": QUIET}) as r:
        assert r.headers["content-type"] == "audio/wav"
        pieces = list(r.iter_bytes())
    return b"".join(pieces)


def test_speech_is_heard_as_its_text(api, spoken):
    assert spoken[:4] == b"RIFF" and spoken[8:12] == b"WAVE"
    heard = api.audio.transcriptions.create(model=WHISPER.name, file=("speech.wav", spoken, "audio/wav"))
    assert wer(TEXT, heard.text) <= MAX_WER, heard.text


def test_pcm_is_the_wav_without_its_header(api, spoken):
    pcm = api.audio.speech.create(model=VOICE.name, input=TEXT, voice="default", response_format="pcm",
                                  extra_body={"controls": QUIET}).read()
    assert pcm == spoken[44:] and len(pcm) > 22050   # over half a second of 16-bit audio


def test_flac_decodes_to_the_wav_samples(api, spoken):
    """FLAC (lossless, sent whole) decoded by libsndfile gives the 16-bit samples the WAV holds."""
    soundfile = pytest.importorskip("soundfile")
    import numpy as np

    response = api.audio.speech.with_raw_response.create(model=VOICE.name, input=TEXT, voice="default",
                                                         response_format="flac", extra_body={"controls": QUIET})
    assert response.headers["content-type"] == "audio/flac"
    data = response.http_response.content
    assert data[:4] == b"fLaC"
    samples, rate = soundfile.read(io.BytesIO(data), dtype="int16")
    assert rate == int(response.headers["x-sample-rate"])
    assert samples.tobytes() == spoken[44:]


@pytest.mark.parametrize("fmt", ["json", "text", "verbose_json", "srt", "vtt"])
def test_transcription_formats(api, spoken, fmt):
    out = api.audio.transcriptions.create(model=WHISPER.name, file=("speech.wav", spoken, "audio/wav"),
                                          response_format=fmt)
    if fmt == "json":
        text = out.text
    elif fmt == "verbose_json":
        assert out.duration > 2 and out.segments and out.segments[0].start == 0
        assert " ".join(s.text for s in out.segments) == out.text
        text = out.text
    else:
        assert isinstance(out, str)
        if fmt == "srt":
            assert re.match(r"1\n00:00:00,000 --> 00:00:0\d,\d{3}\n", out)
        if fmt == "vtt":
            assert re.match(r"WEBVTT\n\n00:00:00\.000 --> 00:00:0\d\.\d{3}\n", out)
        text = out.splitlines()[-1] if fmt != "text" else out
    assert wer(TEXT, text) <= MAX_WER, text


def test_a_wav_file_with_two_channels(api):
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:   # one second of silence, stereo
        w.setnchannels(2), w.setsampwidth(2), w.setframerate(16000), w.writeframes(bytes(4 * 16000))
    out = api.audio.transcriptions.create(model=WHISPER.name, file=("quiet.wav", buffer.getvalue(), "audio/wav"))
    assert isinstance(out.text, str)


def test_refusals_name_the_field(api):
    cases = [
        (dict(voice="alloy"), "voice", '"default" (this bundle has one voice)'),
        (dict(voice="default", response_format="mp3"), "response_format", 'expected "wav", "pcm" or "flac"'),
        (dict(voice="default", speed=1.5), "speed", "no speed control"),
        (dict(voice="default", extra_body={"controls": {"noise_scale": 9}}), "controls", "noise_scale"),
        (dict(voice="default", extra_body={"pitch": 2}), "pitch", "not supported"),
    ]
    for kw, param, says in cases:
        with pytest.raises(openai.BadRequestError) as info:
            api.audio.speech.create(model=VOICE.name, input="Hello.", **kw)
        assert info.value.body["param"] == param and says in info.value.body["message"], info.value.body
    with pytest.raises(openai.BadRequestError) as info:
        api.audio.speech.create(model=WHISPER.name, input="Hello.", voice="default")
    assert info.value.body["param"] == "model" and "transcription bundle" in info.value.body["message"]
    with pytest.raises(openai.BadRequestError) as info:
        api.audio.transcriptions.create(model=WHISPER.name, file=("a.mp3", b"ID3not a wav", "audio/mpeg"))
    assert info.value.body["param"] == "file" and "WAV" in info.value.body["message"]
    with pytest.raises(openai.BadRequestError) as info:
        api.audio.transcriptions.create(model=WHISPER.name, file=("a.wav", b"", "audio/wav"), language="en")
    assert info.value.body["param"] == "language"
    with pytest.raises(openai.BadRequestError) as info:
        api.audio.transcriptions.create(model=WHISPER.name, file=("a.wav", b"", "audio/wav"), response_format="csv")
    assert info.value.body["param"] == "response_format"


def test_a_dropped_speech_stream_stops_the_voice(serve, openai_client):
    import httpx

    long_text = " ".join(f"This is sentence number {n} of a long reading." for n in range(40))
    with serve([VOICE]) as (base, _app):
        with httpx.stream("POST", f"{base}/v1/audio/speech", json={"model": VOICE.name, "input": long_text,
                                                                   "voice": "default", "response_format": "pcm"}) as r:
            assert r.status_code == 200 and r.headers["x-sample-rate"] == "22050"
            next(r.iter_bytes())   # the first sentence came; the client leaves
        start = time.monotonic()
        while httpx.get(f"{base}/health").json()["models"][VOICE.name]["running"]:
            assert time.monotonic() - start < 5, "the voice went on reading to nobody"
            time.sleep(0.05)
        assert 'status="499"' in httpx.get(f"{base}/metrics").text
        assert openai_client(base).audio.speech.create(model=VOICE.name, input="Still here.", voice="default").read()
