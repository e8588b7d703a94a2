"""Phonemizer.iter_sentences: the first sentence is phonemized before the rest of the text (so its
audio can start sooner), a long first sentence is cut after its first clauses when asked, and
each piece says whether a sentence pause follows it."""

from onnxpipe.phonemes import load_phonemizer

LONG = ("When the sun went down over the hills, the children walked home slowly, "
        "talking about the long day. Then they slept.")


class CountingEngine:
    """The real native engine, with each phonemize() call's chunks recorded."""

    def __init__(self, engine):
        self.engine = engine
        self.calls: list[list[str]] = []

    def check(self, voice):
        self.engine.check(voice)

    def phonemize(self, voice, chunks):
        self.calls.append(list(chunks))
        return self.engine.phonemize(voice, chunks)


def test_the_first_sentence_is_phonemized_before_the_rest(bundle, make_spec):
    phonemizer = load_phonemizer(bundle, make_spec())
    counting = CountingEngine(phonemizer.engine)
    phonemizer.engine = counting
    pieces = phonemizer.iter_sentences("It is cold outside. Close the window. Thank you!")
    first = next(pieces)
    assert first.text == "It is cold outside."
    assert counting.calls == [["It is cold outside."]]          # nothing else phonemized yet
    rest = list(pieces)
    assert [s.text for s in rest] == ["Close the window.", "Thank you!"]
    assert counting.calls[1] == ["Close the window.", "Thank you!"]   # the rest in one call
    # the same ids as phonemizing it all at once
    assert [first, *rest] == load_phonemizer(bundle, make_spec()).sentences(
        "It is cold outside. Close the window. Thank you!")


def test_pauses_follow_every_sentence_but_the_last(bundle, make_spec):
    out = load_phonemizer(bundle, make_spec()).sentences("It is cold outside. Close the window. ...")
    assert [(s.text, s.pause_after) for s in out] == [("It is cold outside.", True), ("Close the window.", False)]


def test_a_long_first_sentence_is_cut_after_its_first_clause(bundle, make_spec):
    phonemizer = load_phonemizer(bundle, make_spec())
    whole = phonemizer.sentences(LONG)
    assert [s.text for s in whole] == [LONG[:LONG.index(" Then")], "Then they slept."]
    cut = list(phonemizer.iter_sentences(LONG, lead=48, lead_min=12))
    assert [(s.text, s.pause_after) for s in cut] == [
        ("When the sun went down over the hills,", False),      # the voice pauses at the comma itself
        ("the children walked home slowly, talking about the long day.", True),
        ("Then they slept.", False)]
    # the cut is between clauses: the two pieces say the sentence's phonemes, in order
    assert cut[0].phonemes + cut[1].phonemes == whole[0].phonemes
    assert cut[2] == whole[1]


def test_the_lead_keeps_enough_phonemes_and_short_sentences_stay_whole(bundle, make_spec):
    phonemizer = load_phonemizer(bundle, make_spec())
    # "Well," alone is under lead_min: the lead takes the next clause too
    text = "Well, when the sun went down over the hills, the children walked home slowly."
    cut = list(phonemizer.iter_sentences(text, lead=48, lead_min=12))
    assert [s.text for s in cut] == ["Well, when the sun went down over the hills,",
                                     "the children walked home slowly."]
    # at or under lead: no cut; one clause: nothing to cut at
    short = "Yes, it is."
    assert [s.text for s in phonemizer.iter_sentences(short, lead=48, lead_min=1)] == [short]
    one = "The children walked home slowly over the hills when the sun went down at last."
    assert [s.text for s in phonemizer.iter_sentences(one, lead=5, lead_min=1)] == [one]
