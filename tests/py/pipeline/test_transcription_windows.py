"""Cutting long audio into windows at quiet points (pipeline/transcription.py), on hand-made
energy profiles: every window fits, they tile the audio, and each cut lands in a pause."""

from __future__ import annotations

from onnxpipe.pipeline.transcription import quiet_cut, windows

FRAME = 160          # 10 ms at 16 kHz
WINDOW = 30 * 16000


def profile(pauses: list[tuple[float, float]], seconds: float) -> list[float]:
    """Energy per 10 ms frame: speech (1.0) except in the given [start, end) pauses (0.0)."""
    frames = int(seconds * 100)
    return [0.0 if any(a * 100 <= i < b * 100 for a, b in pauses) else 1.0 for i in range(frames)]


def test_short_audio_is_one_window():
    assert windows(profile([], 12), 12 * 16000, WINDOW, FRAME) == [(0, 12 * 16000)]
    assert windows(profile([], 30), WINDOW, WINDOW, FRAME) == [(0, WINDOW)]


def test_cuts_land_in_the_middle_of_the_last_pause_near_the_end():
    energy = profile([(20.0, 20.6), (27.0, 27.8), (50.0, 51.0)], 70)
    spans = windows(energy, 70 * 16000, WINDOW, FRAME)
    assert spans[0][0] == 0 and spans[-1][1] == 70 * 16000
    assert all(b - a <= WINDOW for a, b in spans)
    assert all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))
    assert 27.2 <= spans[0][1] / 16000 <= 27.6     # inside the 27.0-27.8 pause, not the earlier one
    assert 50.2 <= spans[1][1] / 16000 <= 50.8


def test_no_pause_cuts_at_the_quietest_point():
    energy = [1.0] * 6000
    energy[2800] = 0.01   # one quiet 10 ms frame (smoothed over 100 ms it is still the quietest)
    assert abs(quiet_cut(energy, 2500, 3000) - 2800) <= 5
    spans = windows(energy, 60 * 16000, WINDOW, FRAME)
    assert all(b - a <= WINDOW for a, b in spans) and spans[-1][1] == 60 * 16000
