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
from tests.py.word_errors import edits, words
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
                             "fallback_repeat_tokens": 3, "fallback_tokens_per_second": 12.0,
                             "on_loop": "cut",
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


def _ids(text: str) -> list[int]:
    """Stand-in token ids: one per word (the repeat test compares ids, not text)."""
    vocab: dict[str, int] = {}
    return [vocab.setdefault(w, len(vocab)) for w in text.split()]


@pytest.mark.parametrize("text,reason,cap,context,expected", [
    ("Yes, please.", "stop", None, {}, False),
    ("Yes, please. " * 20, "stop", None, {"fallback_repeat_tokens": 0}, True),   # compresses 10x
    ("Yes, please. " * 20, "stop", None, {"fallback_compression_ratio": 0, "fallback_repeat_tokens": 0}, False),
    ("Yes, please. " * 20, "stop", None, {"encode": "window"}, False),   # already the whole window
    ("Turn on the lights.", "length", None, {}, True),                   # ran to max_length
    ("Turn on the lights.", "length", 3, {}, False),                     # the caller's own cap
    ("", "stop", None, {}, False),
    ("Yes, please. " * 20, "cancelled", None, {}, False),               # the caller stopped it
    ("What time is it? What time is it?", "stop", None, {}, True),      # too short to compress
    ("What time is it? What time is it?", "stop", None, {"fallback_repeat_tokens": 5}, False),
    ("What time is it? What time is it?", "stop", None, {"fallback_repeat_tokens": 0}, False),
    ("It is very very cold, very very cold indeed.", "stop", None, {}, False),   # a run of 2, said twice
])
def test_looped(text, reason, cap, context, expected):
    assert audio_context.looped(_audio(**context), _ids(text), text, reason, cap) is expected


@pytest.mark.parametrize("ids,run,expected", [
    ([1, 2, 3, 1, 2, 3], 3, True),
    ([1, 2, 3, 1, 2, 3], 4, False),
    ([9, 1, 2, 3, 4, 1, 2, 3, 4, 9], 3, True),    # a run of 4 inside, counted for run >= 3
    ([1, 2, 3, 4, 1, 2, 3], 3, False),            # not back to back
    ([5, 5, 5, 5, 5, 5], 3, True),
    ([], 3, False),
])
def test_repeats(ids, run, expected):
    assert audio_context.repeats(ids, run) is expected


@pytest.mark.parametrize("samples,cap,context,expected", [
    (16000, None, {}, 16 + 12),                            # 1 s: 12 per second plus 16
    (16001, None, {}, 16 + 13),                            # rounded up
    (8000, 10, {}, 10),                                    # the caller's cap, if fewer
    (160000, 40, {}, 40),
    (16000, None, {"fallback_tokens_per_second": 0}, None),  # no budget
    (16000, 7, {"encode": "window"}, 7),                   # the reference: only the caller's cap
])
def test_budget(samples, cap, context, expected):
    assert audio_context.budget(_audio(**context), samples, cap) == expected


@pytest.mark.parametrize("reason,cap,budgeted,expected", [
    ("length", None, 28, True),     # ran to the budget: a loop
    ("length", 100, 28, True),      # the budget was below the caller's cap
    ("length", 20, 20, False),      # the caller's cap
    ("stop", None, 28, False),
])
def test_looped_at_the_budget(reason, cap, budgeted, expected):
    assert audio_context.looped(_audio(), [1, 2], "Turn on.", reason, cap, budgeted) is expected


YES, COMMA, PLEASE, DOT, TURN_LOWER, ON, KITCHEN, TURN = 1, 2, 3, 4, 5, 6, 7, 8


def _ends_sentence(token: int) -> bool:
    return token == DOT


@pytest.mark.parametrize("ids,expected", [
    ([YES, COMMA, PLEASE, DOT] * 3 + [YES, COMMA], 4),                  # "Yes, please." read again and again
    ([TURN_LOWER, ON, KITCHEN, DOT] + [TURN, ON, KITCHEN, DOT] * 2 + [TURN], 4),   # the period starts at "on"
    ([YES, COMMA, PLEASE, DOT, TURN, ON], None),                        # no period: not a loop
    ([YES, ON, YES, ON, YES, ON], None),                                # a period of 2 is under the run of 3
])
def test_loop_cut(ids, expected):
    assert audio_context.loop_cut(ids, 3, _ends_sentence) == expected


def test_loop_cut_without_a_sentence_end_keeps_the_first_period():
    assert audio_context.loop_cut([TURN, ON, KITCHEN] * 3, 3, _ends_sentence) == 3
    assert audio_context.loop_cut([TURN_LOWER] + [ON, KITCHEN, TURN] * 2, 3) == 4   # no sentence test: one period


LOOP = [YES, COMMA, PLEASE, DOT] * 7 + [YES, COMMA]


@pytest.mark.parametrize("reason,cap,budgeted,context,expected", [
    ("length", None, 30, {}, 4),                          # ran to the budget in a loop: its first reading
    ("length", 100, 30, {}, 4),
    ("length", 30, 30, {}, None),                         # the caller's cap, not the budget
    ("stop", None, 30, {}, None),
    ("length", None, None, {}, None),                     # no budget: max_length (looped() retries it)
    ("length", None, 30, {"on_loop": "window"}, None),
    ("length", None, 30, {"fallback_repeat_tokens": 0}, None),
    ("length", None, 30, {"encode": "window"}, None),
])
def test_first_reading(reason, cap, budgeted, context, expected):
    assert audio_context.first_reading(_audio(**context), LOOP, reason, cap, budgeted, _ends_sentence) == expected


@pytest.mark.parametrize("ids,reason,context,expected", [
    ([YES, COMMA, PLEASE, DOT] * 2, "stop", {}, 4),                 # the whole text said twice
    ([YES, COMMA, PLEASE, DOT] * 3, "stop", {}, 4),
    ([TURN, ON, YES, COMMA, PLEASE, DOT] * 2, "stop", {}, 6),
    ([TURN] + [YES, COMMA, PLEASE, DOT] * 2, "stop", {}, None),     # not the whole text: looped() retries it
    ([YES, COMMA, PLEASE, DOT] * 2 + [YES], "stop", {}, None),
    ([YES, DOT] * 3, "stop", {}, None),                              # a period under the run of 3
    ([YES, COMMA, PLEASE, DOT] * 2, "stop", {"on_loop": "window"}, None),
])
def test_first_reading_of_a_text_said_again(ids, reason, context, expected):
    assert audio_context.first_reading(_audio(**context), ids, reason, None, 30, _ends_sentence) == expected


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
    (_context(on_loop="retry"), "$.preprocessing.audio.context.on_loop", "window"),
    (_context(fallback_repeat_tokens=-1), "$.preprocessing.audio.context.fallback_repeat_tokens", "-1"),
    (_context(fallback_tokens_per_second=2000), "$.preprocessing.audio.context.fallback_tokens_per_second", "2000"),
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
         ("piper", "Yes, please."),                          # 1.1 s: loops on a short context
         ("espeak", "What time is it?"),                     # 1.1 s
         ("espeak", "We walked along the river until the sun went down, and then we took the last bus home.")]


def _said(voice: str, text: str) -> tuple[list[float], int]:
    if voice == "piper":
        result = onnxpipe.load(PIPER).speak(text, noise_scale=0, noise_w=0)
        return list(result.samples), result.sample_rate
    return _espeak(text)


needs_voices = pytest.mark.skipif(not (PIPER / "en_US-joe-medium.onnx").exists() or shutil.which("espeak-ng") is None,
                                  reason="needs the Piper bundle (`make models`) and espeak-ng (`make espeak`)")


@needs_whisper
@needs_voices
def test_speech_context_is_as_faithful_as_the_whole_window(pair):
    """The shipped context against the whole window (the reference) on the same clips: the Piper
    questions heard word for word, and no more word errors in all than the reference makes
    (the whole set, with its figures: bench/asr_context.py)."""
    speech, window = pair
    assert speech.spec.preprocessing.audio.context.encode == "speech"
    ours = reference = 0
    for voice, text in CLIPS:
        samples, rate = _said(voice, text)
        a, b = speech.transcribe(samples, rate), window.transcribe(samples, rate)
        if voice == "piper":
            assert words(a.text) == words(text), (a.text, b.text)
        ours, reference = ours + edits(text, a.text), reference + edits(text, b.text)
    assert ours <= reference


@needs_whisper
@needs_voices
@pytest.mark.parametrize("on_loop,decodes", [("cut", 1), ("window", 2)])
def test_a_loop_at_the_budget_is_cut_or_decoded_again(tmp_path, pair, on_loop, decodes):
    """Piper's "Yes, please." makes whisper-base read it again and again on 1.1 s + 2 s of context:
    the decode stops at its token budget, and its first reading is the whole window's transcript
    ("cut") or the window is decoded again ("window")."""
    speech = onnxpipe.load(_variant(tmp_path, _context(on_loop=on_loop, margin_seconds=2)))
    calls = []
    decode = speech.transcription.decode
    speech.transcription.decode = lambda *a, **k: calls.append(k) or decode(*a, **k)
    samples, rate = _said("piper", "Yes, please.")
    ours, reference = speech.transcribe(samples, rate), pair[1].transcribe(samples, rate)
    assert len(calls) == decodes
    assert ours.text == reference.text == "Yes, please."
