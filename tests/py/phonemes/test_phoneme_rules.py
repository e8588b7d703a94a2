"""rules.py alone: clause splitting, cleaning engine output, Piper's punctuation and ids."""

from onnxpipe.phonemes.rules import Chunk, assemble, clean, normalize, split_text, to_ids


def chunks(text, **kw):
    return [[(c.text, c.terminator, c.ends_sentence) for c in s] for s in split_text(text, **kw)]


def test_clauses_and_sentences_split_at_punctuation_followed_by_space():
    assert chunks("Hello, world! It costs $42.50 today: cheap; isn't it?") == [
        [("Hello,", ",", False), ("world!", "!", True)],
        [("It costs $42.50 today:", ":", False), ("cheap;", ";", False), ("isn't it?", "?", True)]]


def test_numbers_abbreviations_and_initialisms_follow_espeaks_rule():
    # a "." before a lower-case word is no clause end; before a capital it is (espeak splits
    # "Dr. Smith" too, so Piper does)
    assert chunks("Numbers like 1,000,000 and 3.14159 are tricky.") == [
        [("Numbers like 1,000,000 and 3.14159 are tricky.", ".", True)]]
    assert chunks("The U.S.A. and the U.K. signed it.") == [[("The U.S.A. and the U.K. signed it.", ".", True)]]
    assert chunks("Dr. Smith lives at 221B Baker St. in London.") == [
        [("Dr.", ".", True)], [("Smith lives at 221B Baker St. in London.", ".", True)]]


def test_quotes_ellipses_and_punctuation_before_any_word():
    assert chunks('"Wow!" she said.') == [[('"Wow!"', "!", True)], [("she said.", ".", True)]]
    assert chunks("OK... so, what's next?") == [[("OK...", ".", True)],
                                                [("so,", ",", False), ("what's next?", "?", True)]]
    assert chunks(", hello there.") == [[(", hello there.", ".", True)]]


def test_blank_lines_end_a_sentence_and_text_becomes_single_lines():
    assert chunks("First line\nsecond  line\n\nNew paragraph, here.") == [
        [("First line second line", "", True)], [("New paragraph,", ",", False), ("here.", ".", True)]]
    assert chunks("  \n\n ") == []
    assert chunks("a\x00b\x07c [[x]]") == [[("abc [ [x]]", "", True)]]   # no controls, no CLI phoneme mode


def test_punctuation_sets_come_from_the_spec():
    assert chunks("a, b. C!", clause_punct="", sentence_punct=".") == [[("a, b.", ".", True)], [("C!", "", True)]]
    assert split_text("Hi.") == [[Chunk("Hi.", ".", True)]]


def test_clean_removes_separators_flags_and_joins_clause_lines():
    assert clean("h_ə_l_ˈoʊ\nw_ˈɜː_l_d\n") == "həlˈoʊ wˈɜːld"
    assert clean("ɛ_n_t_ˈaɪɚ_l_i_ ɪ_n s_ˈɜː_v_ɚ__ ɹ_ˈiə_l_i\n") == "ɛntˈaɪɚli ɪn sˈɜːvɚ ɹˈiəli"
    assert clean("(fr)bɔ̃ʒuʁ(en) wˈɜːld") == "bɔ̃ʒuʁ wˈɜːld"
    assert clean("\n\n") == ""


def test_assemble_puts_back_punctuation_by_pipers_rule():
    assert assemble([("həlˈoʊ", ","), ("wˈɜːld", "!")]) == "həlˈoʊ, wˈɜːld!"
    assert assemble([("a", ":"), ("b", ";"), ("c", "?")]) == "a: b; c?"
    assert assemble([("a", ""), ("b", ".")]) == "ab."            # Piper joins clauses with nothing
    assert assemble([("", ","), ("b", ".")]) == "b."              # no sound, no punctuation
    assert assemble([("a", ",")], clause_punct="") == "a,"


def test_ids_are_bos_pad_phoneme_pad_eos(piper_map):
    bos, eos, pad = piper_map["^"], piper_map["$"], piper_map["_"]
    ids, missing = to_ids("ab.", piper_map, bos, eos, pad)
    assert ids == [1, 0, 14, 0, 15, 0, 10, 0, 2] and missing == []
    ids, missing = to_ids("a€b", piper_map, bos, eos, pad)
    assert ids == [1, 0, 14, 0, 15, 0, 2] and missing == ["€"]    # dropped without a pad
    assert to_ids("ab", piper_map, [], [], []) == ([14, 15], [])


def test_normalize_forms():
    assert normalize("\u00e7", "NFD") == "c\u0327"
    assert normalize("c\u0327", "NFC") == "\u00e7"
    assert normalize("c\u0327", "none") == "c\u0327"
