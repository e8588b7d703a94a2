"""Mutated pipeline.json (genai_config.json, transformers.js config.json) of every real bundle and
every tiny fixture, written into a linked copy of the bundle and opened with onnxpipe.load.

Whatever the mutation, the load either works (and then a short job runs or fails cleanly) or
raises onnxpipe's own error: a ConfigError naming the file and a JSON path, a BundleError or
EngineError naming the file. Nothing else leaks and nothing hangs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import event, example, given, strategies as st

import onnxpipe
from fuzz_json import DROP, edited, mutated, vocabulary
from fuzz_support import (ReusingBackend, ReusingText, check_error, config_file, dump, fixture_bundles, linked_copy,
                          real_bundles, cases, time_limit)

BUNDLES = real_bundles() + fixture_bundles()
DOCUMENTS = {b: json.loads(config_file(b).read_text()) for b in BUNDLES}
VOCAB = vocabulary(DOCUMENTS.values())
# cases per bundle (on average: the bundle is drawn too)
CASES_PER_BUNDLE = 40
BACKEND = ReusingBackend()
TEXT = ReusingText()
WORK: dict[Path, Path] = {}     # bundle -> its linked copy (made once per test session)


def smoke(pipe, bundle: Path) -> None:
    """One short job of the bundle's kind on a pipeline that loaded from a mutated config."""
    if pipe.kind == "speech":
        voice = bundle / "voice.json"
        inputs = None
        if voice.is_file():
            a = json.loads(voice.read_text())["audio_values"]
            inputs = {"audio_values": (a["values"], tuple(a["shape"]))}
        pipe.speak("Hi.", inputs=inputs)
    elif pipe.kind == "voice-activity":
        pipe.detect_speech([0.0] * 1024, 16000)
    elif pipe.kind == "transcription":
        pipe.transcribe([0.0] * 3200, 16000, max_new_tokens=1)
    elif pipe.loaded.loop.makes_tokens:
        expected = bundle / "expected.json"
        ids = json.loads(expected.read_text()).get("input_ids", [1, 2, 3]) if expected.is_file() else [1, 2, 3]
        pipe.generate(input_ids=ids[:4], max_new_tokens=2)


def load_mutated(bundle: Path, work: Path, text: str) -> None:
    file = config_file(bundle)
    target = work / file.name
    target.write_text(text, encoding="utf-8", errors="surrogatepass")
    with time_limit():
        try:
            pipe = onnxpipe.load(work, backend=BACKEND, text_loader=TEXT)
        except BaseException as exc:   # noqa: BLE001 - the property: only onnxpipe's errors
            check_error(exc, work, "load")
            return
        event("loaded")
        try:
            smoke(pipe, bundle)
            event("ran")
        except BaseException as exc:   # noqa: BLE001
            check_error(exc, work, "run")


def work_copy(bundle: Path, tmp_root: Path) -> Path:
    if bundle not in WORK:
        WORK[bundle] = tmp_root / f"{bundle.parent.name}-{bundle.name}"
        linked_copy(bundle, WORK[bundle])
    return WORK[bundle]


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-config")


def case(name: str, *edits):
    """A regression case: the named bundle's config with fixed edits ((path, value or DROP), ...)."""
    bundle = next(b for b in BUNDLES if b.name == name)
    return bundle, edited(DOCUMENTS[bundle], *edits)


def bundle_and_mutation():
    return st.sampled_from(BUNDLES).flatmap(lambda b: st.tuples(st.just(b), mutated(DOCUMENTS[b], VOCAB)))


# crashes the fuzz found, kept as explicit cases
# a plugin read the output of a session no flow step runs: AttributeError on None
@example(case("chatterbox_twin", (("pipeline", "flow", 0), DROP)))
# a wire from a session no flow step runs: KeyError in the executor
@example(case("chatterbox_twin", (("pipeline", "flow", 1), DROP)))
# plugin glue failing on config values: KeyError / TypeError / OverflowError from the plugin
@example(case("chatterbox_twin", (("tokens", "extra"), DROP)))
@example(case("chatterbox_twin", (("tokens", "extra", "silence"), [1])))
@example(case("chatterbox_twin", (("tokens", "extra", "silence"), float("nan"))))
@example(case("chatterbox_twin", (("tokens", "extra", "silence"), 2**64)))
# a file map with no variant for this provider: TypeError in os.path.join
@example(case("kokoro-82m", (("pipeline", "sessions", "voice", "file"), {})))
# a KV name pattern that is no string, provider options that are no objects: genai_v1.translate
@example(case("genai_gemma2", (("model", "decoder", "inputs", "past_key_names"), None)))
@example(case("genai_gemma2", (("model", "decoder", "session_options", "provider_options"), [3])))
# a phonemizer setting the id map lacks: a ConfigError that named no file
@example(case("kokoro-82m", (("preprocessing", "phonemes", "bos"), DROP)))
# a length that is no integer: TypeError in transformers_js.translate
@example(case("tjs_llama", (("max_position_embeddings",), "2048")))
# a head size the KV cache cannot be allocated with (MemoryError), or a negative one (ValueError)
@example(case("genai_gemma2", (("model", "decoder", "head_size"), 16_000_000_000)))
@example(case("genai_gemma2", (("model", "decoder", "head_size"), -16)))
# a wire from inputs straight to outputs (KeyError in the planner), and from an input the
# caller never gives (KeyError in the executor)
@example(case("novel_two_stage", (("pipeline", "dataflow", 2, "from"), "inputs.input_ids")))
@example(case("piper-en-us-joe", (("pipeline", "dataflow", 2, "from"), "inputs.input_ids")))
# a choice control's default that is no option name but a list: TypeError (unhashable)
@example(case("kokoro-82m", (("pipeline", "inputs", "voice", "default"), ["af_heart"])))
# a transcription window shorter than two energy frames: IndexError at the first call
@example(case("whisper-base", (("preprocessing", "audio", "window_seconds"), 1e-320)))
# a scheduler_config file name that is empty (the bundle folder itself): IsADirectoryError
@example(case("tiny_diffusion", (("generation", "denoising", "scheduler_config"), "")))
# a sliding window not the graph's, huge: its buffers were allocated whole (tens of GB)
@example(case("genai_gemma2", (("model", "decoder", "sliding_window", "window_size"), 10**8)))
# a packed control's default as a list of one: TypeError when the pack was built
@example(case("piper-en-us-joe", (("pipeline", "inputs", "noise_scale", "default"), [0.667])))
# a voice espeak-ng refuses: an EngineError that named neither the file nor the JSON path
@example(case("kokoro-82m", (("preprocessing", "phonemes", "voice"), ".native/espeak-ng-data")))
# Piper's output audio settings out of their declared range (config/ranges.py): OverflowError,
# MemoryError and "negative count" making the silence between sentences, ZeroDivisionError
@example(case("piper-en-us-joe", (("pipeline", "output", "audio", "sentence_silence"), 9007199254740993)))
@example(case("piper-en-us-joe", (("pipeline", "output", "audio", "sentence_silence"), 68444)))
@example(case("piper-en-us-joe", (("pipeline", "output", "audio", "sentence_silence"), -1)))
@example(case("piper-en-us-joe", (("pipeline", "output", "audio", "sample_rate"), 0)))
@cases(CASES_PER_BUNDLE * len(BUNDLES))
@given(bundle_and_mutation())
def test_mutated_config_fails_cleanly(tmp_root, drawn):
    bundle, (new, _how) = drawn
    load_mutated(bundle, work_copy(bundle, tmp_root), dump(new))


@cases(40)
@given(st.sampled_from(BUNDLES), st.integers(0, 10**6),
       st.sampled_from(("cut", "insert", "bom", "nul", "lone_surrogate")), st.text(max_size=4))
@example(BUNDLES[0], 0, "lone_surrogate", "")    # bytes that are not UTF-8: UnicodeDecodeError leaked
def test_broken_json_text_fails_cleanly(tmp_root, bundle, at, how, extra):
    text = dump(DOCUMENTS[bundle])
    at %= len(text) + 1
    broken = {"cut": text[:at], "insert": text[:at] + extra + text[at:], "bom": "\ufeff" + text,
              "nul": text[:at] + "\x00" + text[at:], "lone_surrogate": text[:at] + "\ud800" + text[at:]}[how]
    load_mutated(bundle, work_copy(bundle, tmp_root), broken)
