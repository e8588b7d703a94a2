"""Waveform helpers for speech pipelines (pure Python: they run in Pyodide too)."""

from .wav import decode_wav, encode_wav

__all__ = ["decode_wav", "encode_wav"]
