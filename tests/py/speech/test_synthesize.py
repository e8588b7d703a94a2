"""speech/synthesize.py's speak() with the real Piper voice (public/models/piper-en-us-joe):
a long first sentence is spoken as its first clause, then the rest, with no added pause at the
cut (the voice pauses at the comma itself) and the sentence pause after the sentence; the audio
adds up and every word is spoken."""

from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.speech import synthesize

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = ROOT / "public" / "models" / "piper-en-us-joe"
QUIET = {"noise_scale": 0.0, "noise_w": 0.0}
LONG = "When the sun went down over the hills, the children walked home slowly. Then they slept."


@pytest.fixture(scope="module")
def pipe():
    assert (BUNDLE / "en_US-joe-medium.onnx").exists(), f"{BUNDLE} is not built: run `make models`"
    return onnxpipe.load(BUNDLE)


def test_a_long_first_sentence_starts_with_its_first_clause(pipe):
    seen = []
    result = pipe.speak(LONG, on_audio=lambda s, info: seen.append((list(s), info.text)), **QUIET)
    assert [t for _, t in seen] == ["When the sun went down over the hills,",
                                    "the children walked home slowly.", "Then they slept."]
    assert " ".join(t for _, t in seen) == LONG
    assert [v for s, _ in seen for v in s] == list(result.samples)
    pause = int(round(0.2 * 22050))
    lead, rest = seen[0][0], seen[1][0]
    # the lead clause ends in the voice's own pause, not in the added sentence silence
    assert max(abs(v) for v in lead[-pause:]) > 0.0
    assert max(abs(v) for v in rest[-pause:]) == 0.0       # the sentence pause after the sentence
    # the pieces say what the whole sentence says, about as long (the cut adds no gap)
    whole = pipe.speak(LONG.split(" Then")[0], **QUIET)
    assert abs((len(lead) + len(rest) - pause) - len(whole.samples)) < 0.1 * len(whole.samples)


def test_a_short_first_sentence_is_not_cut(pipe):
    text = "Yes, it is. Then they slept."
    assert [s.text for s in pipe.speak(text, **QUIET).sentences] == ["Yes, it is.", "Then they slept."]
    assert len(synthesize.sentence_inputs(pipe, text)) == 2


def test_warm_up_speaks_a_first_piece_sized_text_only_for_a_fast_voice(pipe, monkeypatch):
    spoken = []
    speak = pipe.speak
    monkeypatch.setattr(pipe, "speak", lambda text, **kw: spoken.append(text) or speak(text, **kw))
    # as a fast voice (Piper natively is ~20x real time, but a loaded CI machine measured it below
    # WARM_UP_LONG_MIN_RTF once): the choice rests on the measured speed, not on this machine's
    monkeypatch.setattr(synthesize, "WARM_UP_LONG_MIN_RTF", 0.0)
    pipe.warm_up()
    assert spoken == ["Hello.", "Hello.", synthesize.WARM_UP_TEXT]   # cold, warm, then the sentence
    spoken.clear()
    monkeypatch.setattr(synthesize, "WARM_UP_LONG_MIN_RTF", 1e9)   # as a voice slower than that
    pipe.warm_up()
    assert spoken == ["Hello.", "Hello."]


def _with_audio(tmp_path, **audio):
    """The Piper bundle (files linked, not copied) with pipeline.output.audio changed."""
    import json
    folder = tmp_path / "piper"
    folder.mkdir(parents=True)
    for f in BUNDLE.iterdir():
        if f.name != "pipeline.json":
            (folder / f.name).symlink_to(f)
    doc = json.loads((BUNDLE / "pipeline.json").read_text())
    doc["pipeline"]["output"]["audio"].update(audio)
    (folder / "pipeline.json").write_text(json.dumps(doc))
    return onnxpipe.load(folder)


def test_sentence_silence_and_peak_normalize(pipe, tmp_path):
    text = "Yes, it is. Then they slept."
    base = pipe.speak(text, **QUIET)
    rate = base.sample_rate
    longer = _with_audio(tmp_path, sentence_silence=0.7).speak(text, **QUIET)
    extra = int(round(0.7 * rate)) - int(round(0.2 * rate))
    assert len(longer.samples) - len(base.samples) == extra     # the pause between the sentences (none at the end)
    assert list(longer.samples[:base.sentences[0].samples - int(round(0.2 * rate))]) == \
        list(base.samples[:base.sentences[0].samples - int(round(0.2 * rate))])
    assert max(abs(v) for v in base.samples) < 0.99
    loud = _with_audio(tmp_path / "n", sentence_silence=0.2, peak_normalize=True).speak(text, **QUIET)
    first = base.sentences[0].samples
    peak = max(abs(v) for v in base.samples[:first])
    assert max(abs(v) for v in loud.samples[:first]) == pytest.approx(1.0, abs=1e-6)
    assert loud.samples[100] == pytest.approx(base.samples[100] / peak, rel=1e-5)
