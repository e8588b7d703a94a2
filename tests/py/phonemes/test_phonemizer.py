"""load_phonemizer with the native espeak-ng engine and the browser package's data: Piper's
ids for the reference sentences (computed now by tests/piper_reference.py from espeak-ng and
the id map, as Piper does), punctuation, unknown phonemes, empty text and id-map errors."""

import json

import pytest

from onnxpipe.errors import ConfigError, InputError
from onnxpipe.phonemes import PhonemeSentence, load_phonemizer
from tests import piper_reference

MAP_PATH = "$.preprocessing.phonemes.id_map"
T1 = "The quick brown fox jumps over the lazy dog."
T2 = "Hello, world! It costs $42.50 today: cheap; isn't it?"
T3 = "Speech synthesis runs entirely in your browser, with no server (really)."


@pytest.fixture(scope="module")
def piper(npm_data, piper_map_module):
    """text -> [(phonemes, ids)] of each sentence, from Piper's recipe on the same espeak data."""
    return lambda text: piper_reference.reference(text, "en-us", npm_data, piper_map_module)


@pytest.fixture
def phonemizer(bundle, make_spec):
    return load_phonemizer(bundle, make_spec())


def test_reference_sentences_give_pipers_ids(phonemizer, piper):
    for text, sentences in [(T1, [T1]), (T2, ["Hello, world!", "It costs $42.50 today: cheap; isn't it?"]),
                            (T3, [T3])]:
        got = phonemizer.sentences(text)
        assert [s.text for s in got] == sentences
        assert [(s.phonemes, s.ids) for s in got] == piper(text), text
    # the npm package's data says fˈɔːɹɾi for "forty" (Debian's 1.51 data: fˈoːɹɾi)
    assert "fˈɔːɹɾi" in phonemizer.sentences(T2)[1].phonemes
    assert phonemizer.sentences(T1)[0] == PhonemeSentence(T1, *piper(T1)[0])
    assert phonemizer.warnings == []


def test_punctuation_is_put_back_and_ends_sentences(phonemizer, piper):
    text = "One, two; three: four. Five? Six!"
    out = phonemizer.sentences(text)
    assert [s.phonemes for s in out] == ["wˈʌn, tˈuː; θɹˈiː: fˈɔːɹ.", "fˈaɪv?", "sˈɪks!"]
    assert [s.ids for s in out] == [ids for _, ids in piper(text)]


def test_unknown_phonemes_are_dropped_with_a_warning(bundle, make_spec, piper_map, piper):
    del piper_map["ɹ"]
    (bundle / "small.json").write_text(json.dumps(piper_map), encoding="utf-8")
    phonemizer = load_phonemizer(bundle, make_spec(id_map="small.json"))
    (s,) = phonemizer.sentences(T1)
    ((phonemes, full_ids),) = piper(T1)
    assert s.phonemes == phonemes and "ɹ" in s.phonemes
    assert s.ids == piper_reference.ids(phonemes.replace("ɹ", ""), piper_map)   # no id and no pad for it
    assert len(s.ids) == len(full_ids) - 2 * phonemes.count("ɹ")
    assert len(phonemizer.warnings) == 1 and f'"ɹ" U+0279 ({phonemes.count("ɹ")}x)' in phonemizer.warnings[0]
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


def test_bos_eos_pad_can_be_left_out(bundle, make_spec, piper, piper_map):
    phonemizer = load_phonemizer(bundle, make_spec(bos=None, eos=None, pad=None))
    ((phonemes, _),) = piper("Hello.")
    assert phonemizer.sentences("Hello.")[0].ids == [piper_map[p][0] for p in phonemes]


def test_one_id_per_symbol_and_ids_given_directly(bundle, make_spec, piper, piper_map):
    """A map of single ids (Kokoro's vocab.json) with bos / eos given as ids and no pad:
    [0, phoneme ids..., 0]."""
    single = {symbol: ids[0] + 1 for symbol, ids in piper_map.items()}
    (bundle / "single.json").write_text(json.dumps({"vocab": single}), encoding="utf-8")
    phonemizer = load_phonemizer(bundle, make_spec(id_map="single.json#vocab", bos=(0,), eos=(0,), pad=None))
    ((phonemes, _),) = piper("Hello.")
    assert phonemizer.sentences("Hello.")[0].ids == [0] + [single[p] for p in phonemes] + [0]


def test_max_ids_cuts_between_clauses(bundle, make_spec):
    text = "One two three, four five six, seven eight nine."
    whole = load_phonemizer(bundle, make_spec()).sentences(text)
    assert len(whole) == 1
    cut = load_phonemizer(bundle, make_spec(max_ids=len(whole[0].ids) - 1)).sentences(text)
    assert [s.text for s in cut] == ["One two three, four five six,", "seven eight nine."]
    assert all(len(s.ids) < len(whole[0].ids) for s in cut)
    with pytest.raises(InputError, match=r"'One two three,' makes \d+ phoneme ids .*at most 10 "
                                         r"\(\$\.preprocessing\.phonemes\.max_ids\)"):
        load_phonemizer(bundle, make_spec(max_ids=10)).sentences(text)
    with pytest.raises(ConfigError, match=r"max_ids: expected 0 \(no limit\) or more ids, found -1"):
        load_phonemizer(bundle, make_spec(max_ids=-1))


def test_symbol_missing_from_the_map(bundle, make_spec):
    with pytest.raises(ConfigError, match=r'\$\.preprocessing\.phonemes\.bos: bos symbol "<s>" is not in the id map'):
        load_phonemizer(bundle, make_spec(bos="<s>"))


@pytest.mark.parametrize("content, ref, message", [
    (None, "absent.json", "absent.json: .*id_map: expected a JSON file of phoneme ids, found no such file"),
    ("{not json", "map.json", "expected JSON, found a syntax error"),
    ('{"phoneme_id_map": {}}', "map.json#phoneme_map", 'expected a member "phoneme_map", found phoneme_id_map'),
    ('[1, 2]', "map.json#phoneme_id_map", 'expected a member "phoneme_id_map", found list'),
    ('{"m": {"a": 3.5}}', "map.json#m", 'expected an integer id or a list of them for phoneme "a" in "m", found 3.5'),
    ('{"a": [1, "2"]}', "map.json", r'expected an integer id or a list of them for phoneme "a" in the file, '
                                    r'found \[1, "2"\]'),
    ('{"a": [true]}', "map.json", "expected an integer id or a list of them"),
    ('{"a": true}', "map.json", "expected an integer id or a list of them"),
    ('{"m": []}', "map.json#m", 'expected "m" to be an object mapping phonemes to ids, found \\[\\]'),
])
def test_id_map_errors_name_the_file_and_what_was_expected(bundle, make_spec, content, ref, message):
    if content is not None:
        (bundle / "map.json").write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as err:
        load_phonemizer(bundle, make_spec(id_map=ref))
    assert err.value.path == MAP_PATH
    assert err.value.file.endswith(ref.split("#")[0])
