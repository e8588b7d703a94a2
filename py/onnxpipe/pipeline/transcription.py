"""Speech to text with a token loop whose init flow takes a waveform (``preprocessing.audio``).

The data path, top to bottom: samples at any rate -> the resampling graph (ops/resample.py,
which also gives the energy of every 10 ms) -> windows of at most ``window_seconds``, each
cut at the quietest point near its end so no word is split -> per window: a fresh state, the
token loop from the bundle's ``tokens.decoder_prefix`` with the window as the audio input (or,
with ``preprocessing.audio.log_mel``, the window's log-mel features from ops/log_mel.py) ->
ids -> text (special tokens skipped). With ``preprocessing.audio.context`` the encoder also takes
how many feature frames to encode (pipeline/audio_context.py): the window's audio rounded up,
not the whole window. Nothing here knows which model it runs.
"""

from __future__ import annotations

import math
import time
from array import array

from ..audio.rates import check_sample_rate
from ..errors import ConfigError, InputError
from ..ops.log_mel import log_mel_graph
from ..ops.resample import resample_graph
from . import audio_context
from .transcription_result import TranscriptionResult, WindowText

FRAME_SECONDS = 0.01     # energy frames of the resampler
SEARCH_SECONDS = 10.0    # a window is cut within this much of its end
SMOOTH_FRAMES = 10       # quietness is judged over 100 ms
SENTENCE_ENDS = (".", "?", "!", "\u3002", "\uff1f", "\uff01")   # where a loop's first reading may end


def check_declarations(loaded) -> None:
    """Load-time checks of ``preprocessing.audio`` against the planned flow."""
    audio = loaded.spec.preprocessing.audio
    if audio is None:
        return
    file, path = loaded.config.file, "$.preprocessing.audio"
    if audio.sample_rate <= 0:
        raise ConfigError(f"expected a sample rate > 0, found {audio.sample_rate}", file=file,
                          path=f"{path}.sample_rate")
    shortest = 2 * FRAME_SECONDS   # a cut is looked for between the window's energy frames
    if not shortest <= audio.window_seconds < math.inf:
        raise ConfigError(f"expected window_seconds of at least {shortest} (two {FRAME_SECONDS} s energy frames), "
                          f"finite, found {audio.window_seconds}", file=file, path=f"{path}.window_seconds")
    mel = audio.log_mel
    if mel is not None and mel.center_pad == "reflect" and not (
            mel.pad_waveform and mel.frames * mel.hop_length > mel.n_fft // 2):
        raise ConfigError(f'center_pad "reflect" needs pad_waveform true and frames * hop_length '
                          f"({mel.frames * mel.hop_length}) > n_fft / 2 ({mel.n_fft // 2}), so every window "
                          f"has samples to mirror; found pad_waveform {str(mel.pad_waveform).lower()}", file=file,
                          path=f"{path}.log_mel.center_pad")
    plan = loaded.executor.plan
    if audio.input not in plan.caller_inputs:
        raise ConfigError(f'"{audio.input}" is not a pipeline input the caller gives; this pipeline takes '
                          f"{', '.join(sorted(plan.caller_inputs)) or 'none'} (wire it, e.g. "
                          f'{{"from": "inputs.{audio.input}", "to": "SESSION.INPUT"}})', file=file,
                          path=f"{path}.input")
    if not loaded.loop.makes_tokens:
        raise ConfigError(f'preprocessing.audio feeds a transcription, which needs a token loop; '
                          f'generation.loop is "{loaded.loop.name}"', file=file, path=path)
    audio_context.check(loaded)


def _mono(samples) -> array:
    if isinstance(samples, (str, bytes)):
        raise InputError(f"samples: expected a sequence of numbers, found {type(samples).__name__}")
    if hasattr(samples, "tolist") and not isinstance(samples, array):   # numpy
        samples = samples.reshape(-1).tolist() if hasattr(samples, "reshape") else samples.tolist()
    try:
        out = samples if isinstance(samples, array) and samples.typecode == "f" else array("f", samples)
    except TypeError:
        raise InputError("samples: expected a flat sequence of numbers (mono audio)") from None
    if not out:
        raise InputError("samples: the audio is empty (0 samples)")
    return out


def quiet_cut(energy: list[float], lo: int, hi: int) -> int:
    """The frame in [lo, hi) at the middle of the latest quietest 100 ms stretch."""
    half = SMOOTH_FRAMES // 2
    best, best_at = None, []
    for i in range(lo, hi):
        part = energy[max(0, i - half):i + half]
        level = sum(part) / len(part)
        if best is None or level < best * (1 - 1e-6):
            best, best_at = level, [i]
        elif level <= best * (1 + 1e-6) + 1e-12:
            best_at.append(i)
    run = [best_at[-1]]   # the last run of equally quiet frames
    for i in reversed(best_at[:-1]):
        if i != run[-1] - 1:
            break
        run.append(i)
    return run[len(run) // 2]


def windows(energy: list[float], total: int, window: int, frame: int) -> list[tuple[int, int]]:
    """[start, end) sample ranges of at most ``window`` samples covering ``total`` samples."""
    out, start = [], 0
    search = int(SEARCH_SECONDS / FRAME_SECONDS)
    while total - start > window:
        last = (start + window) // frame          # frames wholly inside the window
        lo = max(start // frame + 1, last - search)
        cut = quiet_cut(energy, lo, last) * frame
        out.append((start, cut))
        start = cut
    out.append((start, total))
    return out


class Transcription:
    def __init__(self, loaded, generation):
        self.loaded = loaded
        self.generation = generation

    def resample(self, samples, sample_rate: int) -> tuple[array, list[float], int]:
        """(samples at the pipeline's rate, energy per frame, samples per frame)."""
        check_sample_rate(sample_rate)
        audio = self.loaded.spec.preprocessing.audio
        rate = audio.sample_rate
        frame = max(1, round(rate * FRAME_SECONDS))
        b = self.loaded.backend
        provider = next(iter(self.loaded.sessions.values())).provider
        graph = b.open_graph(resample_graph(sample_rate, rate, frame), provider)
        x = b.tensor(samples, "float32", (1, len(samples)))
        out = b.run(graph, {"x": x}, ["y", "energy"])
        resampled, energy = b.to_float32(out["y"]), b.to_float32(out["energy"]).tolist()
        b.dispose_many([x, out["y"], out["energy"]])
        return resampled, energy, frame

    def audio_input(self, piece: array) -> tuple[array, tuple[int, ...]]:
        """What the pipeline's audio input takes for one window: the samples, or their log-mel
        features (made in the engine, read back once as the caller's input)."""
        audio = self.loaded.spec.preprocessing.audio
        mel = audio.log_mel
        if mel is None:
            return (piece, (1, len(piece)))
        b = self.loaded.backend
        provider = next(iter(self.loaded.sessions.values())).provider
        graph = b.open_graph(log_mel_graph(audio.sample_rate, mel.n_fft, mel.hop_length, mel.n_mels,
                                           mel.frames, mel.center_pad, mel.pad_waveform), provider)
        x = b.tensor(piece, "float32", (1, len(piece)))
        features = b.run(graph, {"waveform": x}, ["features"])["features"]
        host = b.to_float32(features), (1, mel.n_mels, mel.frames)
        b.dispose_many([x, features])
        return host

    def inputs(self, piece: array, frames: int | None = None) -> dict:
        """The pipeline inputs of one window: its audio (or features) and, with
        ``preprocessing.audio.context``, how many feature frames the encoder takes (``frames``,
        else as the context says)."""
        audio = self.loaded.spec.preprocessing.audio
        out = {audio.input: self.audio_input(piece)}
        if audio.context is not None:
            count = audio_context.frames(audio, len(piece)) if frames is None else frames
            out[audio.context.frames_input] = ([count], (1,))
        return out

    def decode(self, piece: array, text, frames=None, max_new_tokens=None, cancel=None, **search):
        """(ids, words, finish reason) of one window, from a fresh state."""
        stops = frozenset(self.loaded.eos)
        result = self.generation.generate(max_new_tokens=max_new_tokens, inputs=self.inputs(piece, frames),
                                          cancel=cancel, **search)
        ids = list(result.tokens)
        if result.finish_reason == "stop" and ids and ids[-1] in stops:
            ids.pop()   # the stop id ends the window; it is not part of the text
        return ids, self.words(text, ids), result.finish_reason

    def words(self, text, ids) -> str:
        special = frozenset(text.special_token_ids) | frozenset(self.loaded.eos)
        return text.decode([t for t in ids if t not in special], skip_special_tokens=True).strip()

    def decode_window(self, piece: array, text, max_new_tokens, cancel, **search):
        """(ids, words, finish reason) of one window: on the context the bundle says; a decode that
        loops there ends at its first reading or is done again over the whole window
        (pipeline/audio_context.py)."""
        audio = self.loaded.spec.preprocessing.audio
        budgeted = audio_context.budget(audio, len(piece), max_new_tokens)
        ids, words, reason = self.decode(piece, text, None, budgeted, cancel, **search)
        ends = {}

        def ends_sentence(token: int) -> bool:
            if token not in ends:
                ends[token] = text.decode([token], skip_special_tokens=True).rstrip().endswith(SENTENCE_ENDS)
            return ends[token]
        cut = audio_context.first_reading(audio, ids, reason, max_new_tokens, budgeted, ends_sentence)
        if cut is not None:
            return ids[:cut], self.words(text, ids[:cut]), "stop"
        if audio_context.looped(audio, ids, words, reason, max_new_tokens, budgeted):
            return self.decode(piece, text, audio_context.window_frames(audio), max_new_tokens, cancel, **search)
        return ids, words, reason

    def transcribe(self, samples, sample_rate: int, on_text=None, cancel=None, max_new_tokens=None,
                   **search) -> TranscriptionResult:
        """Text of mono ``samples`` (floats in [-1, 1]) at ``sample_rate`` Hz.

        ``on_text(window)`` sees each WindowText as it is done; ``cancel()`` returning True stops
        (finish_reason "cancelled"); ``search`` overrides the bundle's search options.
        """
        loaded = self.loaded
        audio = loaded.spec.preprocessing.audio
        if audio is None or not loaded.loop.makes_tokens:
            raise InputError(f"this bundle does not transcribe: it has no preprocessing.audio with a token "
                             f"loop ({loaded.config.file})")
        start_time = time.perf_counter()
        text = loaded.tokenizer()
        mono = _mono(samples)
        resampled, energy, frame = self.resample(mono, sample_rate)
        rate = audio.sample_rate
        if not resampled:
            raise InputError(f"samples: {len(mono)} sample(s) at {sample_rate} Hz is less than one sample at "
                             f"{rate} Hz")
        spans = windows(energy, len(resampled), int(audio.window_seconds * rate), frame)
        pieces: list[WindowText] = []
        finish = "done"
        for index, (lo, hi) in enumerate(spans):
            began = time.perf_counter()
            piece = resampled[lo:hi]
            ids, words, reason = self.decode_window(piece, text, max_new_tokens, cancel, **search)
            window = WindowText(index, lo / rate, hi / rate, words, ids, time.perf_counter() - began)
            pieces.append(window)
            if on_text is not None:
                on_text(window)
            if reason == "cancelled" or (cancel is not None and cancel()):
                finish = "cancelled"
                break
        self.generation.reset()
        return TranscriptionResult(
            " ".join(p.text for p in pieces if p.text), [t for p in pieces for t in p.tokens],
            len(mono) / sample_rate, time.perf_counter() - start_time, pieces, finish,
            list(loaded.warnings))
