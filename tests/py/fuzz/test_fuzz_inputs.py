"""Bad inputs to loaded Pipelines: ids, prompt text, chat messages, search options, speech
controls, audio. Each call either works or raises an InputError naming the argument; nothing
else leaks, nothing hangs, and the SAME Pipeline then still gives its known answer (a fixed
greedy generation, a fixed waveform, fixed segments).
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import example, given, strategies as st

import onnxpipe
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
