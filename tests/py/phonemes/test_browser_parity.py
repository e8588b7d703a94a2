"""The browser's phonemizer (the npm package, run in Node by espeak_node.mjs, reached through
phonemes/web.py) and the native one (espeak-ng with the package's data) give the same ids for
every sentence."""

import pytest

from onnxpipe.errors import EngineError
from onnxpipe.phonemes import load_phonemizer

# notes/2026-11-21-tts-findings.md §3.3: the reference sentences and 16 with abbreviations, numbers,
# dates, %, e-mail, quotes and accents
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! It costs $42.50 today: cheap; isn't it?",
    "Speech synthesis runs entirely in your browser, with no server (really).",
    "Dr. Smith lives at 221B Baker St. in London.",
    "I read the book yesterday; now I read it again.",
    'She said "wow" — and left.',
    "The year 1984 was 40 years ago, on 3/4/1984 at 10:30 a.m.",
    "Naïve café owners résumé-ing their work.",
    "Is it 5% or 50%? Nobody knows!",
    "Email me at test@example.com, please.",
    "Wind the clock, then wind down the road.",
    "OK... so, what's next?",
    "Tomorrow's forecast: rain, wind, and 12°C.",
    "Numbers like 1,000,000 and 3.14159 are tricky.",
    "A, B, C; x, y, z.",
    "Supercalifragilisticexpialidocious!",
    "The U.S.A. and the U.K. signed it.",
    "He won't, can't, and shouldn't go.",
    "Chatterbox and Piper are text-to-speech models.",
]
# and some of our own splitting rules
MORE = [
    '"Wow!" she said. "Really?" he asked.',
    "First line\nsecond line\n\nNew paragraph, here.",
    "say [[h@l'oU]] now.",
    "-5 degrees, cold!",
]


def test_browser_and_native_ids_are_equal_for_every_sentence(bundle, make_spec, web_engine, node_espeak):
    native = load_phonemizer(bundle, make_spec())
    browser = load_phonemizer(bundle, make_spec(), engine=web_engine)
    count = 0
    for text in TEXTS + MORE:
        ours, theirs = native.sentences(text), browser.sentences(text)
        assert [(s.text, s.phonemes, s.ids) for s in theirs] == [(s.text, s.phonemes, s.ids) for s in ours], text
        count += len(ours)
    assert count == 31
    assert native.warnings == browser.warnings == []
    assert node_espeak.ready["load_ms"] > 0


def test_browser_errors_become_engine_errors(bundle, make_spec, web_engine):
    browser = load_phonemizer(bundle, make_spec(voice="xx-nope"), engine=web_engine)   # checked lazily
    with pytest.raises(EngineError, match=r'browser phonemizer \(espeak-ng, voice xx-nope\): set_voice\("xx-nope"\)'):
        browser.sentences("Hello.")
