"""The native engine: one espeak-ng process per text gives exactly what one process per chunk
gives; a missing program, data folder or voice is reported clearly."""

import pytest

from onnxpipe.errors import ConfigError, EngineError
from onnxpipe.phonemes import engines, load_phonemizer
from onnxpipe.phonemes.engines import EspeakCli
from onnxpipe.phonemes.rules import clean, split_text

TEXTS = [
    "Hello, world! It costs $42.50 today: cheap; isn't it?",
    "Dr. Smith lives at 221B Baker St. in London.",
    'She said "wow" — and left.',
    "The year 1984 was 40 years ago, on 3/4/1984 at 10:30 a.m.",
    "OK... so, what's next?",
    "Tomorrow's forecast: rain, wind, and 12°C.",
    "A, B, C; x, y, z.",
    "-5 degrees, cold!",
]


def test_one_process_per_text_equals_one_per_chunk(npm_data):
    chunks = [c.text for t in TEXTS for s in split_text(t) for c in s]
    batched = EspeakCli(str(npm_data)).phonemize("en-us", chunks)
    alone = EspeakCli(str(npm_data), batch=False).phonemize("en-us", chunks)
    assert [clean(x) for x in batched] == [clean(x) for x in alone]
    assert all(clean(x) for x in batched)


def test_sentinel_in_the_text_and_overlong_chunks_fall_back_to_one_process_each(npm_data):
    chunks = ["Hello,", engines._SENTINEL, "world.", " ".join(["seventy seven"] * 80) + "."]
    assert len(chunks[-1].encode()) > 1000        # the CLI would cut such a stdin line in two
    batched = EspeakCli(str(npm_data)).phonemize("en-us", chunks)
    alone = EspeakCli(str(npm_data), batch=False).phonemize("en-us", chunks)
    assert batched == alone
    assert clean(batched[0]) == "həlˈoʊ" and clean(batched[2]) == "wˈɜːld"


def test_missing_program_says_how_to_install(bundle, make_spec, monkeypatch):
    monkeypatch.setattr(engines.shutil, "which", lambda name: None)
    with pytest.raises(EngineError, match="apt-get install espeak-ng"):
        load_phonemizer(bundle, make_spec())


def test_data_folder_is_the_data_itself_or_its_parent(bundle, make_spec, npm_data):
    by_data = load_phonemizer(bundle, make_spec(data="espeak-ng-data"))
    (bundle / "native").mkdir()
    (bundle / "native" / "espeak-ng-data").symlink_to(npm_data / "espeak-ng-data")
    by_parent = load_phonemizer(bundle, make_spec(data="native"))
    assert by_data.engine.data_path == str(bundle) and by_parent.engine.data_path == str(bundle / "native")
    assert by_data.warnings == by_parent.warnings == []


def test_missing_data_folder_falls_back_to_system_data_with_a_warning(bundle, make_spec):
    phonemizer = load_phonemizer(bundle, make_spec(data=".native/espeak-ng-data"))
    assert phonemizer.engine.data_path is None
    assert len(phonemizer.warnings) == 1
    assert ".native/espeak-ng-data is missing" in phonemizer.warnings[0]
    assert "may differ from the browser" in phonemizer.warnings[0]
    assert phonemizer.sentences("Hello.")[0].phonemes == "həlˈoʊ."
    assert len(phonemizer.warnings) == 1                      # kept with every call's warnings
    assert load_phonemizer(bundle, make_spec(data=None)).warnings == []


def test_unknown_voice_fails_at_load(bundle, make_spec):
    with pytest.raises(ConfigError, match=r'refuses the voice "xx-nope": .*voice does not exist') as caught:
        load_phonemizer(bundle, make_spec(voice="xx-nope"))
    assert caught.value.path == "$.preprocessing.phonemes.voice"
    # a voice that is a path (what a mutated config held) is refused the same way
    with pytest.raises(ConfigError, match="refuses the voice"):
        load_phonemizer(bundle, make_spec(voice=".native/espeak-ng-data"))
