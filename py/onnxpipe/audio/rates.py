"""The sample rates a caller may give: resampling 1 Hz audio to 16 kHz (or 1 GHz audio down to
nothing) would make an engine graph of absurd size or none at all, so such rates are refused."""

from __future__ import annotations

from ..errors import InputError

MIN_RATE = 1_000        # Hz: below any audio format in use (8 kHz telephone audio is the lowest)
MAX_RATE = 768_000      # Hz: the highest rate of common audio interfaces


def check_sample_rate(sample_rate) -> int:
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate <= 0:
        raise InputError(f"sample_rate: expected a positive integer (Hz), found {sample_rate!r}")
    if not MIN_RATE <= sample_rate <= MAX_RATE:
        raise InputError(f"sample_rate: expected {MIN_RATE}..{MAX_RATE} Hz, found {sample_rate}")
    return sample_rate
