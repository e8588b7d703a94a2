"""The segmenter on hand-written probabilities: chunks of 10 samples at 1000 Hz (10 ms each),
so every expected time below is worked out by hand from the rules in speech/segments.py."""

from __future__ import annotations

import pytest

from onnxpipe.errors import InputError
from onnxpipe.speech.segments import Segmenter, SegmentSettings

CHUNK, RATE = 10, 1000


def settings(**over) -> SegmentSettings:
    base = dict(threshold=0.5, negative_threshold=0.35, min_silence_ms=20, speech_pad_ms=5, min_speech_ms=30)
    base.update(over)
    return SegmentSettings(**base)


def run(probs, samples=None, **over):
    seg = Segmenter(settings(**over), CHUNK, RATE)
    events = []
    for p in probs:
        events.extend(e.to_dict() for e in seg.add(p))
    events.extend(e.to_dict() for e in seg.finish(samples if samples is not None else len(probs) * CHUNK))
    return seg.segments, events


def test_speech_starts_once_long_enough_and_ends_after_enough_silence():
    segments, events = run([0, 0, .9, .9, .9, .9, .1, .1, 0, 0])
    # starts at 20 (padded to 15) and is reported at 50, once 30 ms long; the silence from 60
    # lasts 20 ms at 80: end 60 + 5 of padding
    assert events == [{"type": "speech_start", "start": 0.015, "time": 0.05},
                      {"type": "speech_end", "start": 0.015, "end": 0.065, "time": 0.08}]
    assert segments == [(0.015, 0.065)]


def test_speech_shorter_than_min_speech_is_dropped_without_any_event():
    assert run([.9, .9, .1, .1, 0]) == ([], [])
    # the same speech is kept once min_speech allows it
    assert run([.9, .9, .1, .1, 0], min_speech_ms=20)[0] == [(0.0, 0.025)]


def test_middling_probabilities_continue_speech_but_do_not_end_a_silence():
    segments, _ = run([.9, .9, .9, .4, .4, .9, .2, .4, .2])
    assert segments == [(0.0, 0.065)]   # .4 kept speech going; after .2 at 60 the .4 counted as silence


def test_padding_never_overlaps_the_previous_segment_nor_reaches_unseen_audio():
    probs = [.9, .9, .9, .1, .1, .9, .9, .9, .1, .1]
    assert run(probs, speech_pad_ms=15)[0] == [(0.0, 0.045), (0.045, 0.095)]
    # 30 ms of padding after a segment whose end was decided 20 ms into the silence: 20 ms
    assert run(probs, speech_pad_ms=30)[0] == [(0.0, 0.05), (0.05, 0.1)]


def test_open_speech_ends_with_the_audio_and_a_partial_last_chunk_counts_its_real_samples():
    seg = Segmenter(settings(), CHUNK, RATE)
    events = [e for p in [.9] * 4 for e in seg.add(p)]
    events += seg.add(.9, real=7)          # the zero-padded last chunk: 7 samples were audio
    events += seg.finish(47)
    assert [e.to_dict() for e in events] == [
        {"type": "speech_start", "start": 0.0, "time": 0.03},
        {"type": "speech_end", "start": 0.0, "end": 0.047, "time": 0.047}]
    # ending in a silence too short to close the segment: it ends where the silence began
    assert run([.9, .9, .9, .9, .1], samples=45)[0] == [(0.0, 0.045)]


def test_thresholds_decide_what_is_speech():
    probs = [.6, .6, .6, .6, .1, .1, .1]
    assert run(probs)[0] == [(0.0, 0.045)]
    assert run(probs, threshold=0.7)[0] == []
    # with a negative threshold of 0.05 the .1 chunks are not silence: one segment to the end
    assert run(probs, negative_threshold=0.05)[0] == [(0.0, 0.07)]


def test_contradicting_settings_are_refused():
    with pytest.raises(InputError, match=r"negative_threshold \(0.6\) must not be above threshold \(0.5\)"):
        Segmenter(settings(negative_threshold=0.6), CHUNK, RATE)
    with pytest.raises(InputError, match="speech_pad_ms must be >= 0, found -1"):
        Segmenter(settings(speech_pad_ms=-1), CHUNK, RATE)


def run_paused(probs, pause_ms, **over):
    seg = Segmenter(settings(**over), CHUNK, RATE, pause_ms)
    events = []
    for p in probs:
        events.extend(e.to_dict() for e in seg.add(p))
    return events


def test_a_pause_is_reported_once_with_the_bounds_its_end_will_have():
    # min_silence 40 ms, pause 10 ms: the silence from 60 is a pause at 70, ends the speech at 100
    events = run_paused([0, 0, .9, .9, .9, .9, .1, .1, 0, 0, 0], 10, min_silence_ms=40)
    assert events == [{"type": "speech_start", "start": 0.015, "time": 0.05},
                      {"type": "speech_pause", "start": 0.015, "end": 0.065, "time": 0.07},
                      {"type": "speech_end", "start": 0.015, "end": 0.065, "time": 0.1}]


def test_speech_that_resumes_after_a_pause_pauses_again_at_its_next_silence():
    events = run_paused([.9, .9, .9, .1, .9, .9, .1, .1, .1, .1], 10, min_silence_ms=40)
    assert [(e["type"], e["time"]) for e in events] == [
        ("speech_start", 0.03), ("speech_pause", 0.04), ("speech_pause", 0.07), ("speech_end", 0.1)]
    assert events[1]["end"] == 0.035 and events[2]["end"] == events[3]["end"] == 0.065


def test_no_pause_before_the_speech_is_reported_nor_for_dropped_speech():
    assert run_paused([.9, .1, .1, .1, .1, .1], 10, min_silence_ms=40) == []


@pytest.mark.parametrize("pause_ms", [4, 20, 25])
def test_a_pause_outside_pad_to_min_silence_is_refused(pause_ms):
    with pytest.raises(InputError, match="pause_ms: expected from speech_pad_ms"):
        Segmenter(settings(), CHUNK, RATE, pause_ms)
