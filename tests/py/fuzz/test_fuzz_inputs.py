"""Bad inputs to loaded Pipelines: ids, prompt text, chat messages, search options, speech
controls, audio, images. Each call either works or raises an InputError naming the argument; nothing
else leaks, nothing hangs, and the SAME Pipeline then still gives its known answer (a fixed
greedy generation, a fixed waveform, fixed segments).
"""

from __future__ import annotations

import array
import io
import json
import math
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, example, given, strategies as st

import onnxpipe
from onnxpipe.errors import InputError
from onnxpipe.image import Image
from onnxpipe.image.files import read_image
from fuzz_support import FIXTURES, MODELS, cases, check_input_error, time_limit

TINY = FIXTURES / "tjs_llama"       # tiny, with a chat template
EXPECTED = json.loads((TINY / "expected.json").read_text())
PROMPT, GREEDY = EXPECTED["input_ids"], EXPECTED["greedy_tokens"][:6]
CHECK_EVERY = 25   # cases between checks that the pipeline still gives its known answer

# ---- values ---------------------------------------------------------------------------------------

NUMBERS = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from((0, -1, 2**31, 2**63, 2**64, 1e308, -0.0, math.nan, math.inf)))
TEXT = st.one_of(st.text(max_size=40), st.sampled_from(("", " ", "\x00", "\u202e", "\ud800", "🙂" * 10,
                                                       "\r\n\t", "a" * 5000, "<|im_start|>", "{{ x }}")))
ANY = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT, st.lists(st.integers(-5, 5), max_size=3),
                st.dictionaries(st.text(max_size=5), st.integers(), max_size=2), st.just(object()),
                st.binary(max_size=8))
IDS = st.one_of(
    st.lists(st.integers(-2**70, 2**70), max_size=6), st.lists(st.integers(0, 400), min_size=70, max_size=90),
    st.lists(st.one_of(NUMBERS, TEXT, st.none(), st.booleans(), st.lists(st.integers(0, 9), max_size=2)),
             min_size=1, max_size=4),
    st.just([]), TEXT, NUMBERS, st.just({"a": 1}), st.just(((1, 2), (3,))), st.just(range(3)))
SEARCH_NAMES = ("do_sample", "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "random_seed",
                "seed", "num_beams", "no_repeat_ngram_size", "length_penalty", "early_stopping",
                "num_return_sequences", "max_length", "min_length", "min_new_tokens", "stop_strings", "stop",
                "stop_token_ids", "ignore_eos", "suppress_tokens", "suppress_tokens_at_start", "speculative",
                "temprature", "beam_width", "", "top-p", "__class__")
SMALL_VALUES = st.one_of(ANY, st.integers(-3, 8), st.floats(-2, 3), st.sampled_from(("never", "prompt_lookup")),
                         st.just({"method": "prompt_lookup", "max_draft": -1}), st.lists(TEXT, max_size=2))
SEARCH = st.dictionaries(st.sampled_from(SEARCH_NAMES), SMALL_VALUES, min_size=1, max_size=3)
MESSAGES = st.one_of(
    st.lists(st.fixed_dictionaries({"role": st.one_of(st.sampled_from(("user", "assistant", "system")), ANY),
                                    "content": st.one_of(TEXT, ANY)}), max_size=3),
    st.lists(ANY, max_size=2), ANY)


def bad_call(pipe, kind, value, search) -> None:
    if kind == "input_ids":
        pipe.generate(input_ids=value, max_new_tokens=2)
    elif kind == "prompt":
        pipe.generate(prompt=value, max_new_tokens=2)
    elif kind == "messages":
        pipe.chat(value, max_new_tokens=2)
    elif kind == "stream":
        for _ in pipe.stream(input_ids=PROMPT[:3], max_new_tokens=2, **search):
            pass
    elif kind == "max_new_tokens":
        pipe.generate(input_ids=PROMPT[:3], max_new_tokens=value)
    else:
        pipe.generate(input_ids=PROMPT[:3], max_new_tokens=2, **search)


# what an InputError from each kind of call may name
NAMED = {"input_ids": ("input_ids", "prompt"), "prompt": ("prompt",), "max_new_tokens": ("max_new_tokens",),
         "messages": ("messages", "content", "role", "prompt")}


@pytest.fixture(scope="module")
def tiny():
    return onnxpipe.load(TINY)


def answers_correctly(pipe) -> None:
    pipe.reset()
    assert pipe.generate(input_ids=PROMPT, max_new_tokens=len(GREEDY)).tokens == GREEDY


class Counter:
    n = 0


@cases(700)
@given(kind=st.sampled_from(("input_ids", "prompt", "messages", "search", "stream", "max_new_tokens")),
       value=st.one_of(IDS, TEXT, MESSAGES, ANY), search=SEARCH)
@example(kind="input_ids", value=[1, 2**64], search={"top_k": 1})
@example(kind="input_ids", value=0, search={"top_k": 1})       # TypeError: 'int' object is not iterable
@example(kind="messages", value=True, search={"top_k": 1})     # TypeError: 'bool' object is not iterable
# roles and contents the template can't render: ChatTemplateError instead of an InputError
@example(kind="messages", value=[{"role": None, "content": None}], search={"top_k": 1})
@example(kind="messages", value=[{"role": False, "content": "Hi"}], search={"top_k": 1})
@example(kind="messages", value=[{"role": "user", "content": True}], search={"top_k": 1})
@example(kind="search", value=[], search={"stop_strings": 1})   # TypeError: int has no len()
@example(kind="search", value=[], search={"num_beams": 449})    # more beams than the vocabulary: ValueError
@example(kind="search", value=[], search={"suppress_tokens_at_start": 448})   # an error naming another option
@example(kind="search", value=0, search={"stop_token_ids": 1.5})  # TypeError: 'float' object is not iterable
@example(kind="prompt", value="\ud800", search={"top_k": 1})  # TypeError from the tokenizer: a lone surrogate
@example(kind="messages", value=[{"role": "user", "content": "\ud800"}], search={"top_k": 1})
def test_bad_text_inputs(tiny, kind, value, search):
    with time_limit():
        try:
            bad_call(tiny, kind, value, search)
        except BaseException as exc:   # noqa: BLE001 - the property: only InputError, naming the argument
            check_input_error(exc, NAMED.get(kind, ("option", "max_new_tokens", *search)))
    Counter.n += 1
    if Counter.n % CHECK_EVERY == 0:
        answers_correctly(tiny)


def test_tiny_answers_after_the_bad_calls(tiny):
    answers_correctly(tiny)


# ---- speech controls and audio on the real bundles ---------------------------------------------------

CONTROL_NAMES = ("noise_scale", "length_scale", "noise_w", "voice", "speed", "scales", "threshold",
                 "min_silence_ms", "speech_pad_ms", "min_speech_ms", "noise", "")
CONTROLS = st.dictionaries(st.sampled_from(CONTROL_NAMES),
                           st.one_of(SMALL_VALUES, st.sampled_from(("jf_alpha", "jm_kumo", "xx"))), max_size=3)
SPEECH_TEXT = st.one_of(st.text(max_size=30), st.sampled_from(("", " ", "...", "\x00\x01", "🙂", "Hi.")))


@pytest.fixture(scope="module", params=["piper-en-us-joe", "kokoro-82m"])
def voice(request):
    pipe = onnxpipe.load(MODELS / request.param)
    return pipe, list(pipe.speak("Hello.", noise_scale=0, noise_w=0).samples
                      if request.param.startswith("piper") else pipe.speak("Hello.").samples)


def reference_speech(pipe):
    controls = {"noise_scale": 0, "noise_w": 0} if "noise_w" in pipe.spec.pipeline.inputs else {}
    return list(pipe.speak("Hello.", **controls).samples)


@cases(60)
@given(text=SPEECH_TEXT, controls=CONTROLS)
@example(text="Hi.", controls={"noise_scale": math.nan})
@example(text="Hi.", controls={"noise_scale": [0]})   # one number in a list, packed: TypeError
def test_bad_speech_controls(voice, text, controls):
    pipe, _ = voice
    with time_limit():
        try:
            pipe.speak(text, **controls)
        except BaseException as exc:   # noqa: BLE001
            check_input_error(exc, ("text", *controls))


def test_voices_answer_after_the_bad_calls(voice):
    pipe, before = voice
    assert reference_speech(pipe) == before


AUDIO = st.one_of(
    st.lists(st.floats(-1, 1, width=32), max_size=3000),
    st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**40, 2**40)), max_size=600),
    st.just([]), st.just([math.nan] * 1000), st.just([1e30] * 800), st.just([32767] * 700), ANY, TEXT,
    st.just([[0.0, 0.1]] * 10), st.just(b"\x00\x01" * 100))
RATES = st.one_of(st.sampled_from((16000, 8000, 44100, 1, 0, -16000, 16000.5, 10**9)), ANY)


@pytest.fixture(scope="module")
def vad():
    pipe = onnxpipe.load(MODELS / "silero-vad")
    return pipe, reference_segments(pipe)


def reference_segments(pipe):
    tone = [0.5 * math.sin(i * 0.07) * (1 if 4000 < i < 12000 else 0) for i in range(16000)]
    result = pipe.detect_speech(tone, 16000)
    return [list(s) for s in result.segments], list(result.probabilities) if hasattr(result, "probabilities") else None


@cases(150)
@given(samples=AUDIO, rate=RATES, controls=st.dictionaries(st.sampled_from(CONTROL_NAMES), SMALL_VALUES, max_size=2))
# rates far from the bundle's: a resample to ~50M samples (minutes), or to none (EngineError)
@example(samples=[0.0] * 3000, rate=1, controls={})
@example(samples=[0.0] * 10, rate=10**9, controls={})
@example(samples=[], rate=8000, controls={})   # no audio at another rate: nothing to resample
def test_bad_audio_for_voice_activity(vad, samples, rate, controls):
    pipe, _ = vad
    with time_limit():
        try:
            pipe.detect_speech(samples, rate, **controls)
        except BaseException as exc:   # noqa: BLE001
            check_input_error(exc, ("samples", "sample_rate", *controls))


def test_vad_answers_after_the_bad_calls(vad):
    pipe, before = vad
    assert reference_segments(pipe) == before


@pytest.fixture(scope="module")
def whisper():
    pipe = onnxpipe.load(MODELS / "whisper-base")
    return pipe, pipe.transcribe([0.1 * math.sin(i * 0.05) for i in range(8000)], 16000, max_new_tokens=3).tokens


@cases(25)
@given(samples=AUDIO, rate=RATES)
def test_bad_audio_for_transcription(whisper, samples, rate):
    pipe, _ = whisper
    with time_limit():
        try:
            pipe.transcribe(samples, rate, max_new_tokens=2)
        except BaseException as exc:   # noqa: BLE001
            check_input_error(exc, ("samples", "sample_rate", "audio"))


def test_whisper_answers_after_the_bad_calls(whisper):
    pipe, before = whisper
    assert pipe.transcribe([0.1 * math.sin(i * 0.05) for i in range(8000)], 16000, max_new_tokens=3).tokens == before


# ---- images on the tiny Qwen2-VL (tests/fixtures/qwen2_vl.py) -----------------------------------------
# Every form an image takes: an encoded file read by path (read_image, as `onnxpipe run --image`),
# an Image(rgb, width, height), the images= list itself, and inputs= naming what the image
# preprocessing makes. Each call works or raises an InputError naming the argument (the file's
# path, "image", "images" or, for too many image tokens, "prompt"); a claimed size past MAX_PIXELS
# is refused from the header, before anything that size is allocated.

VL_ONE = [1, 17, 301, 300, 302, 42]   # one image token (300) between vision start/end
SOURCE_FORMATS = (("png", "RGB"), ("png", "RGBA"), ("png", "L"), ("png", "P"), ("png", "I;16"), ("png", "1"),
                  ("jpeg", "RGB"), ("jpeg", "L"), ("gif", "P"), ("bmp", "RGB"), ("webp", "RGB"))
SIDES = st.one_of(st.integers(1, 40), st.sampled_from((0, -1, 199, 201, 100000, 2**40, 1.5, "2", True, None, math.nan)))
CLAIMED = st.sampled_from((0, 1, 2, 3, 17, 4095, 65535, 100000, 2**31 - 1, 2**32 - 1))


@pytest.fixture(scope="module")
def vl(tmp_path_factory):
    """(the pipeline, expected.json with the bundle's path, encoded sources by (format, mode), a
    scratch folder)."""
    from PIL import Image as PILImage
    from tests.fixtures import tiny_models

    bundle = tiny_models.ensure("qwen2_vl")
    expected = {**json.loads((bundle / "expected.json").read_text()), "bundle": bundle}
    first = expected["images"][0]
    rgb = PILImage.frombytes("RGB", (first["width"], first["height"]), (bundle / "a.rgb").read_bytes())
    sources = {}
    for fmt, mode in SOURCE_FORMATS:
        out = io.BytesIO()
        rgb.convert(mode).save(out, fmt)
        sources[fmt, mode] = out.getvalue()
    return Quiet((onnxpipe.load(bundle), expected, sources, tmp_path_factory.mktemp("images")))


class Quiet(tuple):
    """The fixture's value, with a short repr for Hypothesis' falsifying-example report."""

    def __repr__(self) -> str:
        return "<qwen2_vl pipeline, sources, folder>"


def reference_images(pipe, expected) -> list[int]:
    images = [Image((expected["bundle"] / i["file"].replace(".png", ".rgb")).read_bytes(), i["width"], i["height"])
              for i in expected["images"]]
    return pipe.generate(input_ids=expected["input_ids"], images=images, max_new_tokens=expected["max_new_tokens"],
                         do_sample=False).tokens


def with_size(data: bytes, fmt: str, width: int, height: int, fix_crc: bool) -> bytes:
    """``data`` with the size its header claims replaced (PNG: IHDR, CRC fixed or not; JPEG: the SOF)."""
    out = bytearray(data)
    if fmt == "png":
        out[16:24] = struct.pack(">II", width % 2**32, height % 2**32)
        if fix_crc:
            out[29:33] = struct.pack(">I", zlib.crc32(bytes(out[12:29])))
    elif fmt == "jpeg":
        sof = next((i for i in range(2, len(out) - 9) if out[i] == 0xFF and out[i + 1] in (0xC0, 0xC1, 0xC2)), None)
        if sof is not None:
            out[sof + 5:sof + 9] = struct.pack(">HH", height % 2**16, width % 2**16)
    return bytes(out)


@st.composite
def image_files(draw):
    """A mutation of one encoded source (``mutate`` applies it): (format, mode, how, the size a
    header claims, whether its CRC is fixed, where to cut, bytes to overwrite, junk)."""
    fmt, mode = draw(st.sampled_from(SOURCE_FORMATS))
    mutation = draw(st.sampled_from(("size", "size", "truncate", "flip", "garbage", "append", "none")))
    flips = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=8)
    return (fmt, mode, mutation, draw(CLAIMED), draw(CLAIMED), draw(st.booleans()), draw(st.integers(0, 10**6)),
            draw(flips), draw(st.binary(max_size=64)))


def mutate(sources, case) -> bytes:
    fmt, mode, mutation, width, height, fix_crc, cut, flips, junk = case
    data = sources[fmt, mode]
    if mutation == "size":
        return with_size(data, fmt, width, height, fix_crc)
    if mutation == "truncate":
        return data[:cut % (len(data) + 1)]
    if mutation == "flip":
        out = bytearray(data)
        for at, value in flips:   # most bytes that matter are near the start
            out[at % (64 if at % 2 else len(out))] = value
        return bytes(out)
    if mutation == "garbage":
        return junk
    return data + junk if mutation == "append" else data


@st.composite
def raw_images(draw):
    """(rgb, width, height) for Image(...): sizes right or wrong, pixels of every wrong type."""
    width, height = draw(SIDES), draw(SIDES)
    small = type(width) is int and type(height) is int and 0 < width * height <= 1600
    n = width * height * 3 if small else 12
    pixels = draw(st.binary(min_size=n, max_size=n))
    form = draw(st.sampled_from(("exact", "exact", "short", "long", "gray", "rgba", "bytearray", "memoryview",
                                 "floats", "strided", "2d", "list", "text", "none", "nan_array")))
    rgb = {"exact": lambda: pixels, "short": lambda: pixels[:-1], "long": lambda: pixels + b"\x00",
           "gray": lambda: pixels[:n // 3], "rgba": lambda: pixels + pixels[:n // 3],
           "bytearray": lambda: bytearray(pixels), "memoryview": lambda: memoryview(pixels),
           "floats": lambda: memoryview(array.array("f", [v / 255 for v in pixels])),   # n items, 4n bytes
           "strided": lambda: memoryview(pixels + pixels)[::2], "2d": lambda: memoryview(pixels).cast("B", (3, n // 3)),
           "list": lambda: list(pixels), "text": lambda: pixels.decode("latin-1"), "none": lambda: None,
           "nan_array": lambda: np.array([math.nan, -1.0, 256.0, math.inf] * (n // 4 + 1))[:n]}[form]()
    return rgb, width, height


def image_call(pipe, sources, folder, kind, value) -> None:
    """One bad image case: read or build the images ``kind`` says, then generate with them."""
    ids = VL_ONE
    if kind == "file":
        path = folder / f"image-{value[2]}.{value[0]}"
        path.write_bytes(mutate(sources, value))
        try:
            images = [read_image(str(path))]
        except InputError as exc:
            assert str(path) in exc.message, exc.message
            raise
    elif kind == "path":
        images = [read_image(value)]
    elif kind == "raw":
        images = [Image(*value)]
    elif kind == "count":
        pool = [Image(bytes(i % 251 for i in range(18 * 20 * 3)), 18, 20), Image(bytes(3), 1, 1)]
        tokens, count, expand = value
        ids = [1, 17] + ([301, 300, 302] if not expand else [301] + [300] * expand + [302]) * tokens + [42]
        images = [pool[i % 2] for i in range(count)]
    elif kind == "inputs":
        pipe.generate(input_ids=ids, inputs=value, max_new_tokens=2)
        return
    else:
        images = value
    pipe.generate(input_ids=ids, images=images, max_new_tokens=2)


IMAGES_VALUES = st.one_of(
    st.sampled_from((5, "a.png", b"\x89PNG", {"rgb": b"\x00" * 3, "width": 1, "height": 1}, [[]], [None], [], (),
                     [b"\x00\x00\x00"], [[Image(bytes(3), 1, 1)]], Image(bytes(3), 1, 1), [Image(bytes(3), 1, 1), 7],
                     [np.full((2, 2, 3), math.nan)], [[[0, 0, 0]]], {"0": Image(bytes(3), 1, 1)}, True)),
    st.lists(ANY, max_size=3))
INPUTS_VALUES = st.one_of(
    st.sampled_from(({"pixel_values": ([math.nan] * 4 * 1176, (4, 1176)), "image_grid_thw": ([1, 2, 2], (1, 3))},
                     {"image_grid_thw": ([1, 100000, 100000], (1, 3))}, {"pixel_values": np.zeros((4, 1176))},
                     [1, 2], "pixels")),
    st.dictionaries(st.sampled_from(("pixel_values", "image_grid_thw", "x")), ANY, max_size=2))
PATHS = st.sampled_from(("", "/", "/nonexistent/a.png", "\x00", 3, None, b"a.png", Path("/dev/null"), ["a.png"],
                         "tests/fixtures/.cache/qwen2_vl/expected.json"))


class ImageCounter:
    n = 0


@cases(1000)
@given(kind=st.sampled_from(("file", "file", "file", "raw", "raw", "images", "count", "path", "inputs")),
       file=image_files(), raw=raw_images(), images=IMAGES_VALUES, inputs=INPUTS_VALUES, path=PATHS,
       count=st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from((0, 0, 2, 6, 20))))
@example(kind="file", file=("png", "RGB", "size", 100000, 100000, True, 0, [(0, 0)], b""),   # 1e10 pixels claimed
         raw=(b"", 1, 1), images=[], inputs={}, path="", count=(1, 1, 0))
@example(kind="file", file=("png", "RGB", "size", 65535, 4095, True, 0, [(0, 0)], b""),   # past MAX_PIXELS, under
         raw=(b"", 1, 1), images=[], inputs={}, path="", count=(1, 1, 0))                  # Pillow's own error
@example(kind="raw", file=("png", "RGB", "none", 0, 0, True, 0, [(0, 0)], b""), raw=(b"", 100000, 100000),
         images=[], inputs={}, path="", count=(1, 1, 0))
@example(kind="raw", file=("png", "RGB", "none", 0, 0, True, 0, [(0, 0)], b""),   # len() of a float memoryview
         raw=(memoryview(array.array("f", [0.5] * 12)), 2, 2), images=[], inputs={}, path="", count=(1, 1, 0))
@example(kind="images", file=("png", "RGB", "none", 0, 0, True, 0, [(0, 0)], b""), raw=(b"", 1, 1),
         images=Image(bytes(3), 1, 1), inputs={}, path="", count=(1, 1, 0))       # TypeError: not iterable
@example(kind="inputs", file=("png", "RGB", "none", 0, 0, True, 0, [(0, 0)], b""), raw=(b"", 1, 1), images=[],
         inputs={"pixel_values": ([0.0] * 1176, (1, 1176))}, path="", count=(1, 1, 0))   # KeyError in the engine
@example(kind="path", file=("png", "RGB", "none", 0, 0, True, 0, [(0, 0)], b""), raw=(b"", 1, 1), images=[],
         inputs={}, path=b"a.png", count=(1, 1, 0))                                  # ValueError from Pillow
@example(kind="count", file=("png", "RGB", "none", 0, 0, True, 0, [(0, 0)], b""), raw=(b"", 1, 1), images=[],
         inputs={}, path="", count=(3, 3, 0))                                         # past generation.max_length
def test_bad_images(vl, kind, file, raw, images, inputs, path, count):
    pipe, expected, sources, folder = vl
    value = {"file": file, "raw": raw, "images": images, "inputs": inputs, "path": path, "count": count}[kind]
    with time_limit():
        try:
            image_call(pipe, sources, folder, kind, value)
            event(f"{kind}: ran")
        except BaseException as exc:   # noqa: BLE001 - the property: only InputError, naming the argument
            check_input_error(exc, ("inputs", "image", "prompt") if kind == "inputs" else
                              ("image", "prompt", str(path)) if kind == "path" else ("image", "prompt"))
            event(f"{kind}: InputError")
    ImageCounter.n += 1
    if ImageCounter.n % CHECK_EVERY == 0:
        assert reference_images(pipe, expected) == expected["greedy_tokens"]


def test_vision_language_answers_after_the_bad_images(vl):
    pipe, expected, _, _ = vl
    assert reference_images(pipe, expected) == expected["greedy_tokens"]
