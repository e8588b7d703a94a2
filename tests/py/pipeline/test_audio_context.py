"""``preprocessing.audio.context``: Whisper's encoder on the frames that hold the speech.

The frame arithmetic exactly; the load-time refusals with their JSON paths; and, on the
Whisper base bundle, a few short utterances (Piper, espeak-ng) transcribed with ``encode:
"speech"`` give the same tokens as the whole window (``"window"``, the reference; the same
bundle otherwise). The whole set (several voices, 1 to 30 s) is bench/asr_context.py, where a
few espeak-ng clips differ by a word either way (its report says how many, and the word error
rates against the text said).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import wave
from array import array
from pathlib import Path
from types import SimpleNamespace

import pytest

import onnxpipe
import tiny_encoder_decoder as ted
from onnxpipe.errors import ConfigError
from onnxpipe.onnx_info.reader import read_model_file
from onnxpipe.pipeline import audio_context

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = ROOT / "public" / "models" / "whisper-base"
PIPER = ROOT / "public" / "models" / "piper-en-us-joe"


def _takes_frames() -> bool:
    try:
        return "input_frames" in read_model_file(str(BUNDLE / "encoder.onnx")).graph.inputs
    except (OSError, ValueError):
        return False


needs_whisper = pytest.mark.skipif(not _takes_frames(), reason=f"{BUNDLE} is not built (or built before "
                                                               f"input_frames): run `make models`")


def _audio(**context):
    ctx = SimpleNamespace(**{"encode": "speech", "frames_per_second": 100, "bucket_seconds": 1.0,
                             "margin_seconds": 0.0, "frame_multiple": 2, "fallback_compression_ratio": 2.4,
                             **context})
    return SimpleNamespace(sample_rate=16000, window_seconds=30.0, context=ctx)


@pytest.mark.parametrize("samples,context,expected", [
    (16000, {}, 100),                                   # 1 s exactly: one bucket
    (16001, {}, 200),                                   # a sample past it: two
    (1, {}, 100),
    (32000, {"margin_seconds": 0.5}, 300),              # 2.5 s -> 3 s
    (24000, {"bucket_seconds": 0.25}, 150),
    (16160, {"bucket_seconds": 0.01}, 102),             # 101 frames, rounded to the stride of 2
    (29.5 * 16000, {"bucket_seconds": 2.0}, 3000),      # capped at the window
    (16000, {"encode": "window"}, 3000),
])
def test_frames(samples, context, expected):
    assert audio_context.frames(_audio(**context), int(samples)) == expected


@pytest.mark.parametrize("text,reason,cap,context,expected", [
    ("Yes, please.", "stop", None, {}, False),
    ("Yes, please. " * 20, "stop", None, {}, True),                      # compresses 10x
    ("Yes, please. " * 20, "stop", None, {"fallback_compression_ratio": 0}, False),
    ("Yes, please. " * 20, "stop", None, {"encode": "window"}, False),   # already the whole window
    ("Turn on the lights.", "length", None, {}, True),                   # ran to max_length
    ("Turn on the lights.", "length", 3, {}, False),                     # the caller's own cap
    ("", "stop", None, {}, False),
    ("Yes, please. " * 20, "cancelled", None, {}, False),               # the caller stopped it
])
def test_looped(text, reason, cap, context, expected):
    assert audio_context.looped(_audio(**context), text, reason, cap) is expected


def _variant(tmp_path: Path, edit) -> Path:
    out = tmp_path / "bundle"
    out.mkdir()
    for f in BUNDLE.iterdir():
        if f.name != "pipeline.json":
            os.symlink(f, out / f.name)
    doc = json.loads((BUNDLE / "pipeline.json").read_text(encoding="utf-8"))
    edit(doc["preprocessing"]["audio"]["context"], doc)
    (out / "pipeline.json").write_text(json.dumps(doc), encoding="utf-8")
    return out


def _context(**keys):
    return lambda ctx, doc: ctx.update(keys)


@pytest.mark.parametrize("frames_input", ["input_frames", "features"])
def test_an_encoder_without_a_frame_count_is_refused(tmp_path, frames_input):
    """The tiny encoder-decoder's encoder takes whole inputs, as genai / transformers.js Whisper ones do."""
    audio = {"sample_rate": 16000, "input": "features", "window_seconds": 30,
             "context": {"frames_input": frames_input}}
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(ted.bundle(tmp_path, {"preprocessing": {"audio": audio}}), text=False)
    assert info.value.path == "$.preprocessing.audio.context.frames_input"
    assert ("fixed 1500 positions" if frames_input == "input_frames" else "expected int64") in str(info.value)


@needs_whisper
@pytest.mark.parametrize("edit,path,says", [
    (_context(bucket_seconds=40), "$.preprocessing.audio.context.bucket_seconds", "at most window_seconds"),
    (_context(frames_per_second=33.3), "$.preprocessing.audio.context.frames_per_second", "expected an integer"),
    (_context(frame_multiple=7), "$.preprocessing.audio.context.frame_multiple", "divisor of the window's 3000"),
    (_context(margin_seconds=-1), "$.preprocessing.audio.context.margin_seconds", "-1"),
    (_context(encode="all"), "$.preprocessing.audio.context.encode", "window"),
    (_context(bucket=1), "$.preprocessing.audio.context", "bucket"),
])
def test_refused_at_load(tmp_path, edit, path, says):
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(_variant(tmp_path, edit))
    assert info.value.path.startswith(path), str(info.value)
    assert says in str(info.value)


def _espeak(text: str) -> tuple[list[float], int]:
    wav = subprocess.run(["espeak-ng", "-v", "en-gb+f3", "--stdout", text], check=True, capture_output=True).stdout
    import io

    with wave.open(io.BytesIO(wav), "rb") as w:
        rate, raw = w.getframerate(), w.readframes(w.getnframes())
    return [s / 32768.0 for s in array("h", raw)], rate


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(speech, window): the bundle as shipped, and the same with encode "window"."""
    tmp = tmp_path_factory.mktemp("ctx")
    window = _variant(tmp, _context(encode="window"))
    return onnxpipe.load(BUNDLE), onnxpipe.load(window)


CLIPS = [("piper", "Turn on the lights in the kitchen."),   # 1.5 s
         ("espeak", "What time is it?"),                     # 1.1 s
         ("espeak", "We walked along the river until the sun went down, and then we took the last bus home.")]


@needs_whisper
@pytest.mark.skipif(not (PIPER / "en_US-joe-medium.onnx").exists() or shutil.which("espeak-ng") is None,
                    reason="needs the Piper bundle (`make models`) and espeak-ng (`make espeak`)")
@pytest.mark.parametrize("voice,text", CLIPS)
def test_speech_context_equals_the_whole_window(pair, voice, text):
    speech, window = pair
    if voice == "piper":
        result = onnxpipe.load(PIPER).speak(text, noise_scale=0, noise_w=0)
        samples, rate = list(result.samples), result.sample_rate
    else:
        samples, rate = _espeak(text)
    assert speech.spec.preprocessing.audio.context.encode == "speech"
    ours, reference = speech.transcribe(samples, rate), window.transcribe(samples, rate)
    assert ours.tokens == reference.tokens, (ours.text, reference.text)
    assert ours.text == reference.text
