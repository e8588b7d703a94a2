from onnxpipe.text.sentences import split_sentences


def test_plain_sentences():
    assert split_sentences("Hello there. How are you? I am fine!") == ["Hello there.", "How are you?", "I am fine!"]


def test_abbreviations_initials_and_decimals_do_not_split():
    text = "Dr. Smith paid $3.50 for J. R. R. Tolkien's book, e.g. the first one. Then he left."
    assert split_sentences(text) == ["Dr. Smith paid $3.50 for J. R. R. Tolkien's book, e.g. the first one.",
                                     "Then he left."]


def test_quotes_ellipses_and_blank_lines():
    text = 'She said "stop." Then silence… It was over\n\nNew paragraph without a full stop'
    assert split_sentences(text) == ['She said "stop."', "Then silence…", "It was over",
                                     "New paragraph without a full stop"]


def test_short_fragments_join_the_previous_sentence_and_empty_text_is_empty():
    assert split_sentences("This is long enough. Ok. And this one too.") == [
        "This is long enough. Ok.", "And this one too."]
    assert split_sentences("   \n\n  ") == []
