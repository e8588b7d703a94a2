"""load_phonemizer with the native espeak-ng engine and the browser package's data: Piper's
ids for the reference sentences (docs/tts-findings.md §2.4), punctuation, unknown phonemes,
empty text and id-map errors."""

import json

import pytest

from onnxpipe.errors import ConfigError, InputError
from onnxpipe.phonemes import PhonemeSentence, load_phonemizer

MAP_PATH = "$.preprocessing.phonemes.id_map"

# findings §2.4, measured with Piper's own phonemizer; with the npm package's data T2.2 says
# fˈɔːɹɾi ("forty"), so its "o" id 27 is 54 ("ɔ") here
T1_IDS = [1, 0, 41, 0, 59, 0, 3, 0, 23, 0, 35, 0, 120, 0, 74, 0, 23, 0, 3, 0, 15, 0, 88, 0, 120, 0, 14, 0, 100, 0,
          26, 0, 3, 0, 19, 0, 120, 0, 51, 0, 122, 0, 23, 0, 31, 0, 3, 0, 17, 0, 108, 0, 120, 0, 102, 0, 25, 0, 28,
          0, 31, 0, 3, 0, 121, 0, 27, 0, 100, 0, 34, 0, 60, 0, 3, 0, 41, 0, 59, 0, 3, 0, 24, 0, 120, 0, 18, 0, 74,
          0, 38, 0, 21, 0, 3, 0, 17, 0, 120, 0, 51, 0, 122, 0, 66, 0, 10, 0, 2]
T2_1_IDS = [1, 0, 20, 0, 59, 0, 24, 0, 120, 0, 27, 0, 100, 0, 8, 0, 3, 0, 35, 0, 120, 0, 62, 0, 122, 0, 24, 0, 17, 0,
            4, 0, 2]
T2_2_IDS = [1, 0, 74, 0, 32, 0, 3, 0, 23, 0, 120, 0, 54, 0, 31, 0, 32, 0, 31, 0, 3, 0, 17, 0, 120, 0, 51, 0, 122, 0,
            24, 0, 60, 0, 3, 0, 19, 0, 120, 0, 54, 0, 122, 0, 88, 0, 92, 0, 21, 0, 3, 0, 32, 0, 120, 0, 33, 0, 122,
            0, 3, 0, 28, 0, 54, 0, 74, 0, 26, 0, 32, 0, 3, 0, 19, 0, 120, 0, 14, 0, 74, 0, 34, 0, 3, 0, 38, 0, 120,
            0, 21, 0, 59, 0, 88, 0, 27, 0, 100, 0, 3, 0, 32, 0, 59, 0, 17, 0, 120, 0, 18, 0, 74, 0, 11, 0, 3, 0, 32,
            0, 96, 0, 120, 0, 21, 0, 122, 0, 28, 0, 12, 0, 3, 0, 120, 0, 74, 0, 38, 0, 59, 0, 26, 0, 32, 0, 3, 0, 74,
            0, 32, 0, 13, 0, 2]
T3_IDS = [1, 0, 31, 0, 28, 0, 120, 0, 21, 0, 122, 0, 32, 0, 96, 0, 3, 0, 31, 0, 120, 0, 74, 0, 26, 0, 126, 0, 59, 0,
          31, 0, 121, 0, 74, 0, 31, 0, 3, 0, 88, 0, 120, 0, 102, 0, 26, 0, 38, 0, 3, 0, 61, 0, 26, 0, 32, 0, 120, 0,
          14, 0, 74, 0, 60, 0, 24, 0, 21, 0, 3, 0, 74, 0, 26, 0, 3, 0, 22, 0, 100, 0, 88, 0, 3, 0, 15, 0, 88, 0,
          120, 0, 14, 0, 100, 0, 38, 0, 60, 0, 8, 0, 3, 0, 35, 0, 74, 0, 41, 0, 3, 0, 26, 0, 120, 0, 27, 0, 100, 0,
          3, 0, 31, 0, 120, 0, 62, 0, 122, 0, 34, 0, 60, 0, 3, 0, 88, 0, 120, 0, 21, 0, 59, 0, 24, 0, 21, 0, 10, 0, 2]


@pytest.fixture
def phonemizer(bundle, make_spec):
    return load_phonemizer(bundle, make_spec())


def test_reference_sentences_give_pipers_ids(phonemizer):
    (t1,) = phonemizer.sentences("The quick brown fox jumps over the lazy dog.")
    assert t1 == PhonemeSentence("The quick brown fox jumps over the lazy dog.",
                                 "ðə kwˈɪk bɹˈaʊn fˈɑːks dʒˈʌmps ˌoʊvɚ ðə lˈeɪzi dˈɑːɡ.", T1_IDS)
    t2 = phonemizer.sentences("Hello, world! It costs $42.50 today: cheap; isn't it?")
    assert [s.text for s in t2] == ["Hello, world!", "It costs $42.50 today: cheap; isn't it?"]
    assert t2[0].phonemes == "həlˈoʊ, wˈɜːld!" and t2[0].ids == T2_1_IDS
    assert "fˈɔːɹɾi" in t2[1].phonemes and t2[1].ids == T2_2_IDS
    (t3,) = phonemizer.sentences("Speech synthesis runs entirely in your browser, with no server (really).")
    assert t3.phonemes == "spˈiːtʃ sˈɪnθəsˌɪs ɹˈʌnz ɛntˈaɪɚli ɪn jʊɹ bɹˈaʊzɚ, wɪð nˈoʊ sˈɜːvɚ ɹˈiəli."
    assert t3.ids == T3_IDS
    assert phonemizer.warnings == []


def test_punctuation_is_put_back_and_ends_sentences(phonemizer):
    out = phonemizer.sentences("One, two; three: four. Five? Six!")
    assert [s.phonemes for s in out] == ["wˈʌn, tˈuː; θɹˈiː: fˈɔːɹ.", "fˈaɪv?", "sˈɪks!"]
    assert out[1].ids == [1, 0, 19, 0, 120, 0, 14, 0, 74, 0, 34, 0, 13, 0, 2]


def test_unknown_phonemes_are_dropped_with_a_warning(bundle, make_spec, piper_map):
    del piper_map["ɹ"]
    (bundle / "small.json").write_text(json.dumps(piper_map), encoding="utf-8")
    phonemizer = load_phonemizer(bundle, make_spec(id_map="small.json"))
    (s,) = phonemizer.sentences("The quick brown fox jumps over the lazy dog.")
    assert "ɹ" in s.phonemes and len(s.ids) == len(T1_IDS) - 2     # no id and no pad for it
    assert s.ids == T1_IDS[:22] + T1_IDS[24:]
    assert len(phonemizer.warnings) == 1 and '"ɹ" U+0279 (1x)' in phonemizer.warnings[0]
    phonemizer.sentences("Hello.")
    assert phonemizer.warnings == []                                 # warnings are per call


def test_unknown_error_raises(bundle, make_spec, piper_map):
    del piper_map["ɹ"]
    (bundle / "small.json").write_text(json.dumps(piper_map), encoding="utf-8")
    phonemizer = load_phonemizer(bundle, make_spec(id_map="small.json", unknown="error"))
    assert phonemizer.sentences("Hello.")[0].phonemes == "həlˈoʊ."
    with pytest.raises(InputError, match=r'"ɹ" \(U\+0279\).*brown fox.*unknown to "drop"'):
        phonemizer.sentences("The quick brown fox.")


def test_empty_text_is_an_error_and_silent_sentences_are_skipped(phonemizer):
    for text in ["", "   \n ", None]:
        with pytest.raises(InputError, match="empty text"):
            phonemizer.sentences(text)
    for text in ["...", "?! ,, ;", "—"]:
        with pytest.raises(InputError, match="nothing to speak"):
            phonemizer.sentences(text)
    assert [s.text for s in phonemizer.sentences("Hello. ...")] == ["Hello."]
    assert phonemizer.warnings == ["skipped, nothing to speak: '...'"]


def test_bos_eos_pad_can_be_left_out(bundle, make_spec):
    phonemizer = load_phonemizer(bundle, make_spec(bos=None, eos=None, pad=None))
    assert phonemizer.sentences("Hello.")[0].ids == [20, 59, 24, 120, 27, 100, 10]


def test_symbol_missing_from_the_map(bundle, make_spec):
    with pytest.raises(ConfigError, match=r'\$\.preprocessing\.phonemes\.bos: bos symbol "<s>" is not in the id map'):
        load_phonemizer(bundle, make_spec(bos="<s>"))


@pytest.mark.parametrize("content, ref, message", [
    (None, "absent.json", "absent.json: .*id_map: expected a JSON file of phoneme ids, found no such file"),
    ("{not json", "map.json", "expected JSON, found a syntax error"),
    ('{"phoneme_id_map": {}}', "map.json#phoneme_map", 'expected a member "phoneme_map", found phoneme_id_map'),
    ('[1, 2]', "map.json#phoneme_id_map", 'expected a member "phoneme_id_map", found list'),
    ('{"m": {"a": 3}}', "map.json#m", 'expected a list of integer ids for phoneme "a" in "m", found 3'),
    ('{"a": [1, "2"]}', "map.json", r'expected a list of integer ids for phoneme "a" in the file, found \[1, "2"\]'),
    ('{"a": [true]}', "map.json", "expected a list of integer ids"),
    ('{"m": []}', "map.json#m", 'expected "m" to be an object mapping phonemes to lists of ids, found \\[\\]'),
])
def test_id_map_errors_name_the_file_and_what_was_expected(bundle, make_spec, content, ref, message):
    if content is not None:
        (bundle / "map.json").write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as err:
        load_phonemizer(bundle, make_spec(id_map=ref))
    assert err.value.path == MAP_PATH
    assert err.value.file.endswith(ref.split("#")[0])
