"""Text -> waveform, sentence by sentence, for any pipeline whose ``pipeline.output`` is audio.

The front end (phonemes or tokenizer, from ``preprocessing``) turns each sentence into
pipeline inputs; the loop strategy (``generation.loop``) runs the flow; the output tensor
becomes float samples. Nothing here knows which voice it runs.
"""

from __future__ import annotations

import time
from array import array

from ..errors import InputError
from ..loops.sequence import Sequence
from ..search.stopping import stop_ids
from ..text.sentences import split_sentences
from .result import SentenceAudio, SpeechResult

# the pipeline inputs the front ends give, sentence by sentence (the caller never does)
FRONT_END_INPUTS = frozenset({"phoneme_ids", "phoneme_lengths", "input_ids"})


# the first sentence is cut after its first clauses when longer than LEAD_PHONEMES phonemes
# (~3 s of speech): its audio then starts after one clause's compute, not the whole sentence's;
# the lead piece keeps at least LEAD_MIN_PHONEMES (~0.7 s), so a lone "Well," is not cut off
LEAD_PHONEMES = 48
LEAD_MIN_PHONEMES = 12
# what a one-pass voice speaks at load (Pipeline.warm_up) after "Hello.", when that went at
# WARM_UP_LONG_MIN_RTF x real time or faster (measured again when the cold first run made 1x real
# time, so a slow voice pays no second run): as long as a typical first piece, so
# the first real one finds the engine's buffers grown (with "Hello." alone the first Speak of
# Piper in the browser was ~2x slower than the next; this costs it ~0.4 s of load). A slower
# voice (Kokoro in WASM, 0.8-1.4x) would spend seconds on it and keeps the short warm-up.
WARM_UP_TEXT = "When the storm finally passed over the valley, the villagers came out."
WARM_UP_LONG_MIN_RTF = 2.0


def sentence_inputs(pipeline, text: str) -> list[tuple[str, list[int], dict]]:
    """(sentence text, ids, loop inputs) per sentence, from the bundle's declared front end."""
    return [piece[:3] for piece in iter_sentence_inputs(pipeline, text)]


def iter_sentence_inputs(pipeline, text: str, lead: bool = False):
    """(sentence text, ids, loop inputs, pause after) per piece, each made when asked for:
    the first sentence's inputs before the rest of the text is phonemized. ``lead`` cuts a long
    first sentence after its first clauses (Phonemizer.iter_sentences)."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("text: expected some words to speak, found an empty text")
    if pipeline.phonemizer is not None:
        cut = (LEAD_PHONEMES, LEAD_MIN_PHONEMES) if lead else (0, 0)
        for s in pipeline.phonemizer.iter_sentences(text, *cut):
            yield (s.text, list(s.ids), {"phoneme_ids": (list(s.ids), (1, len(s.ids))),
                                         "phoneme_lengths": ([len(s.ids)], (1,))}, s.pause_after)
        return
    if pipeline.text is None:
        raise InputError(f"this bundle declares neither preprocessing.phonemes nor a tokenizer "
                         f"({pipeline.config.bundle_dir}): it cannot turn text into its inputs")
    sentences = split_sentences(text)
    for index, sentence in enumerate(sentences):
        ids = pipeline.text.encode(sentence, add_special_tokens=True)
        yield sentence, ids, {"input_ids": (ids, (1, len(ids)))}, index < len(sentences) - 1


def _waveform(pipeline, outputs: dict) -> array:
    tensor = outputs.get("output")
    if tensor is None:
        made = ", ".join(outputs) or "nothing"
        raise InputError(f"the flow made no pipeline output \"output\" (made: {made}); check pipeline.output")
    return pipeline.backend.to_float32(tensor)


def _run_one_pass(pipeline, inputs: dict, extra: dict, ids: list[int], cancel):
    given = {k: v for k, v in inputs.items() if k in pipeline.executor.plan.pipeline_inputs}
    result = pipeline.one_pass.run_values({**extra, **given})
    return _waveform(pipeline, result.outputs), []


def _run_token_loop(pipeline, inputs: dict, extra: dict, ids: list[int], cancel):
    """The loop feeds ``ids`` itself as input_ids; the final phase makes the waveform (carried by
    the loop's last response)."""
    loaded = pipeline.loaded
    opts = loaded.options()
    pipeline.reset()
    seq = Sequence([], ids, opts, stop_ids(opts, loaded.eos), loaded.sampler(opts), cancel=cancel)
    tokens = []
    for step in loaded.loop(loaded.executor, extra).run(seq):
        if step.token is not None:
            tokens.append(step.token)
        if step.finish_reason == "cancelled":
            return None, tokens
        if step.finish_reason:
            return _waveform(pipeline, step.outputs), tokens
    return None, tokens


def speak(pipeline, text: str, extra: dict, on_audio=None, cancel=None) -> SpeechResult:
    """Speak ``text``; ``on_audio(samples, sentence)`` sees each sentence's audio as it is made,
    ``cancel()`` returning True stops before the next sentence (or token)."""
    audio = pipeline.spec.pipeline.output.audio
    rate = audio.sample_rate
    silence = array("f", bytes(4 * int(round(audio.sentence_silence * rate))))
    run = _run_token_loop if pipeline.loaded.loop.makes_tokens else _run_one_pass
    result = SpeechResult(array("f"), rate, [], warnings=list(pipeline.warnings))
    start = time.perf_counter()
    for sentence, ids, inputs, pause_after in iter_sentence_inputs(pipeline, text, lead=True):
        if cancel is not None and cancel():
            result.finish_reason = "cancelled"
            break
        samples, tokens = run(pipeline, inputs, extra, ids, cancel)
        if samples is None:
            result.finish_reason = "cancelled"
            break
        if audio.peak_normalize:
            peak = max(max(samples, default=0.0), -min(samples, default=0.0))
            if peak > 0:
                samples = array("f", [v / peak for v in samples])
        chunk = samples
        if pause_after:
            chunk.extend(silence)
        now = time.perf_counter()
        part = SentenceAudio(sentence, ids, len(chunk), len(chunk) / rate, now - start, tokens)
        start = now
        result.samples.extend(chunk)
        result.sentences.append(part)
        if on_audio is not None:
            on_audio(chunk, part)
            start = time.perf_counter()   # the listener's time is not compute
    if pipeline.phonemizer is not None:
        result.warnings.extend(pipeline.phonemizer.warnings)
    return result
