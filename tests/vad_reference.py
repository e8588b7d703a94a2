"""Test audio for voice activity detection, and the native answers the browser must match.

Silence, a sentence, silence, a sentence, silence at 16 kHz; the sentences are spoken by the
Piper voice (public/models/piper-en-us-joe, noise off so the audio is the same every time)
and resampled with numpy.

    python -m tests.vad_reference OUT.wav [CONTROLS_JSON ...]

writes the audio as a 16-bit WAV and prints one JSON object: ``truth`` (where the speech is,
in seconds) and ``native``: for each CONTROLS_JSON (``{}`` when none), the native
``detect_speech`` of the WAV's samples with those controls (probabilities and events too).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VAD = ROOT / "public" / "models" / "silero-vad"
PIPER = ROOT / "public" / "models" / "piper-en-us-joe"
RATE = 16000
SENTENCES = ("The quick brown fox jumps over the lazy dog.", "Every word of this sentence became sound.")
GAPS = (1.0, 1.5, 0.5)        # seconds of silence before, between and after the sentences
LOUD = 0.01                   # |x| above this is speech in Piper's output (its silence is ~0)


def fft_resample(x: np.ndarray, rate: int, to: int) -> np.ndarray:
    """Band-limited resampling by truncating the spectrum (fine for a test signal)."""
    n = round(len(x) * to / rate)
    return (np.fft.irfft(np.fft.rfft(x.astype(np.float64))[: n // 2 + 1], n) * n / len(x)).astype(np.float32)


def speech_audio() -> tuple[np.ndarray, list[tuple[float, float]]]:
    """(16 kHz float32 samples, [(start, end)] of the speech in them, in seconds)."""
    import onnxpipe

    voice = onnxpipe.load(PIPER)
    parts, truth, t = [np.zeros(int(GAPS[0] * RATE), np.float32)], [], GAPS[0]
    for sentence, gap in zip(SENTENCES, GAPS[1:]):
        said = voice.speak(sentence, noise_scale=0.0, noise_w=0.0)
        x = np.array(said.samples, np.float32)
        loud = np.nonzero(np.abs(x) > LOUD)[0]
        truth.append((t + loud[0] / said.sample_rate, t + (loud[-1] + 1) / said.sample_rate))
        y = fft_resample(x, said.sample_rate, RATE)
        parts += [y, np.zeros(int(gap * RATE), np.float32)]
        t += len(y) / RATE + gap
    return np.concatenate(parts), truth


def main(argv: list[str]) -> int:
    import onnxpipe
    from onnxpipe.audio import decode_wav, encode_wav

    out, controls = argv[0], [json.loads(c) for c in argv[1:]] or [{}]
    samples, truth = speech_audio()
    Path(out).write_bytes(encode_wav(samples.tolist(), RATE))
    pcm, rate, _ = decode_wav(Path(out).read_bytes())   # what a reader of the WAV gets
    vad = onnxpipe.load(VAD)
    native = []
    for given in controls:
        result = vad.detect_speech(pcm, rate, **given)
        native.append(dict(result.to_dict(probabilities=True), events=[e.to_dict() for e in result.events]))
    print(json.dumps({"truth": truth, "native": native}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
