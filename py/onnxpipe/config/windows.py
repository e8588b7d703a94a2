"""Analysis windows and mel filter banks a pipeline's audio settings may name, as plain lists (no numpy).

Here, below the stages, so a config check (a processor file's declared window) and the graph that
uses them (ops/log_mel.py) compare against one definition.
"""

from __future__ import annotations

import math


def hann_periodic(length: int) -> list[float]:
    """The periodic Hann window (numpy's hanning(length + 1)[:-1], torch.hann_window's default)."""
    return [0.5 - 0.5 * math.cos(2 * math.pi * i / length) for i in range(length)]


_MIN_LOG_HZ, _MIN_LOG_MEL = 1000.0, 15.0
_LOG_STEP = 27.0 / math.log(6.4)   # Slaney: mels per natural-log unit of frequency above 1 kHz


def _hz_to_mel(hz: float) -> float:
    if hz < _MIN_LOG_HZ:
        return 3.0 * hz / 200.0
    return _MIN_LOG_MEL + math.log(hz / _MIN_LOG_HZ) * _LOG_STEP


def _mel_to_hz(mel: float) -> float:
    if mel < _MIN_LOG_MEL:
        return 200.0 * mel / 3.0
    return _MIN_LOG_HZ * math.exp((mel - _MIN_LOG_MEL) / _LOG_STEP)


def mel_filters(sample_rate: int, n_fft: int, n_mels: int) -> list[list[float]]:
    """[n_mels][n_fft // 2 + 1] triangular filters, Slaney scale and area normalisation."""
    bins = n_fft // 2 + 1
    nyquist = sample_rate / 2
    fft_hz = [nyquist * i / (bins - 1) for i in range(bins)]
    top = _hz_to_mel(nyquist)
    edges = [_mel_to_hz(top * i / (n_mels + 1)) for i in range(n_mels + 2)]
    rows = []
    for m in range(n_mels):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        norm = 2.0 / (hi - lo)
        rows.append([norm * max(0.0, min((f - lo) / (mid - lo), (hi - f) / (hi - mid))) for f in fft_hz])
    return rows


def hamming_speechlib(length: int) -> list[float]:
    """The symmetric Hamming window as onnxruntime-extensions writes it for Phi-4-multimodal
    (0.08 + 0.92 sin^2(pi n / (length - 1)), the same values as 0.54 - 0.46 cos)."""
    return [0.08 + 0.92 * math.sin(math.pi * n / (length - 1)) ** 2 for n in range(length)]


def speechlib_mel_filters(n_fft: int, n_mels: int, sample_rate: int = 16000,
                          fmax: float = 7689.0) -> list[list[float]]:
    """[n_mels][n_fft // 2 + 1] filters of SpeechLib's FbankFC (Phi-4-multimodal's audio
    features): triangles of height 1 in mel space (1127 ln(1 + f / 700)), 0 Hz to ``fmax``,
    on the FFT bins 1 .. round(fmax * n_fft / sample_rate) - 1 (onnxruntime-extensions'
    SpeechLibLogMel, fmax 7689 Hz)."""
    def mel(hz: float) -> float:
        return 1127.0 * math.log(1.0 + hz / 700.0)

    bins = n_fft // 2 + 1
    klo, khi = 1, max(int(fmax * n_fft / sample_rate + 0.5), 1)
    top = mel(fmax)
    step = top / (n_mels + 1)
    rows = []
    for m in range(n_mels):
        left, center, right = m * step, (m + 1) * step, (m + 2) * step
        row = [0.0] * bins
        for k in range(klo, min(khi, bins)):
            at = mel(k * sample_rate / n_fft)
            if left < at < right:
                row[k] = max(0.0, 1.0 - abs(center - at) / step)
        rows.append(row)
    return rows
