"""Phi-4-multimodal audio features and prompt ids, as onnxruntime-genai 0.18's
phi_multimodal_processor makes them (settings from config/genai_phi4_speech.py).

- ``Phi4AudioFeatures.process(samples, sample_rate)``: mono samples in [-1, 1] at one of the
  processor's target rates (8000 or 16000 Hz; ort-extensions resamples other rates with its own
  filters, which onnxpipe does not reproduce, so they are refused) -> audio_embeds
  [1, frames, n_mels] (ops/log_mel.py ``speechlib_log_mel_graph``, run by the backend) and
  audio_sizes (ceil(frames / audio_compression_rate)); clips longer than 480000 samples are cut
  there, as ort-extensions' AudioDecoder does;
- ``audio_prompt_ids(prompt, sizes, tokenizer)``: every ``<|audio_N|>`` tag becomes
  ``<|endoftext11|>``, the prompt is tokenized whole and the k-th id 200011 is repeated
  sizes[k] times; the tags must match the clips in number (genai pairs them in order, whatever N).
"""

from __future__ import annotations

import re
from typing import Sequence

from ..backends.base import Items
from ..config.genai_phi4_speech import AUDIO_TAG, AUDIO_TOKEN_ID, MODE_BOTH, MODE_SPEECH, RATES, audio_size
from ..errors import ConfigError, InputError
from ..ops.log_mel import speechlib_log_mel_graph

MAX_SAMPLES = 480_000   # ort-extensions' AudioDecoder keeps at most this many (30 s at 16 kHz)
TAG = re.compile(r"<\|audio_\d+\|>")


class Phi4AudioFeatures:
    def __init__(self, backend, processor: dict, provider: str = "cpu"):
        self.backend, self.processor, self.provider = backend, processor, provider

    def rates(self) -> tuple[int, ...]:
        return tuple(self.processor["decoder_rates"]) or RATES

    def process(self, samples: Sequence[float], sample_rate: int) -> tuple[tuple[list[float], tuple], int]:
        """((audio_embeds values, shape), audio_sizes) of one clip."""
        if sample_rate not in self.rates():
            raise InputError(f"sample_rate: this bundle's audio processor takes {' or '.join(map(str, self.rates()))} "
                             f"Hz (it resamples others with filters onnxpipe does not reproduce), found "
                             f"{sample_rate!r}; resample the clip to 16000 Hz first")
        s = self.processor["rates"][sample_rate]
        samples = list(samples[:MAX_SAMPLES])
        if len(samples) < s["frame_length"]:
            raise InputError(f"the clip has {len(samples)} samples, fewer than one {s['frame_length']}-sample "
                             f"frame at {sample_rate} Hz")
        b = self.backend
        graph = b.open_graph(speechlib_log_mel_graph(s["n_fft"], s["frame_length"], s["hop_length"],
                                                     s["mel_n_fft"], s["n_mels"]), self.provider)
        wave = b.tensor(samples, "float32", (1, len(samples)))
        out = b.run(graph, {"waveform": wave}, ["features"])["features"]
        values = b.to_list(out)
        b.dispose_many([wave, out])
        frames = (len(samples) - s["frame_length"]) // s["hop_length"] + 1
        return (values, (1, frames, s["n_mels"])), audio_size(frames, self.processor["compression"])


def audio_prompt_ids(prompt: str, sizes: list[int], tokenizer) -> list[int]:
    """The prompt ids with the audio tokens expanded (module docstring)."""
    tags = TAG.findall(prompt)
    if len(tags) != len(sizes):
        raise InputError(f"the prompt has the audio tags {tags} for {len(sizes)} clip(s): put one <|audio_N|> "
                         "per clip, in the clips' order")
    ids = tokenizer.encode(TAG.sub(AUDIO_TAG, prompt), add_special_tokens=True)
    if ids.count(AUDIO_TOKEN_ID) != len(sizes):
        raise InputError(f"the tokenizer makes {ids.count(AUDIO_TOKEN_ID)} id(s) {AUDIO_TOKEN_ID} from "
                         f"{len(sizes)} {AUDIO_TAG}: it needs {AUDIO_TAG} as one added token of that id")
    out: list[int] = []
    clips = iter(sizes)
    for i in ids:
        out.extend([i] * next(clips) if i == AUDIO_TOKEN_ID else [i])
    return out


def refuse_tags_without_clips(prompt: str) -> None:
    """A prompt's <|audio_N|> tags with no clip given: refused, as onnxruntime-genai 0.18 refuses
    them (more audio tokens than audios), rather than read as text."""
    tags = TAG.findall(prompt)
    if tags:
        raise InputError(f"the prompt has the audio tag(s) {tags} but no audio clip was given: pass one clip "
                         "per tag in audios ((samples, sample_rate) each), or take the tags out")


class SpeechFrontEnd:
    """preprocessing.speech: clips + a prompt -> the prompt ids and each clip's speech inputs."""

    def __init__(self, loaded):
        import os

        from ..config.genai_phi4_speech import read_processor
        from ..config.load import read_json

        self.spec = loaded.spec.preprocessing.speech
        path = os.path.join(loaded.config.bundle_dir, self.spec.config)
        if not os.path.isfile(path):
            raise ConfigError(f'the audio processor file "{self.spec.config}" is missing', file=loaded.config.file,
                              path="$.preprocessing.speech.config")
        provider = "wasm" if "wasm" in loaded.backend.providers else "cpu"   # features go back to the host
        self.features = Phi4AudioFeatures(loaded.backend, read_processor(read_json(path), path), provider)

    def prepare(self, prompt, clips, tokenizer, images: bool = False) -> tuple[list[int], dict]:
        """(the prompt ids with audio tokens expanded, the clips' pipeline inputs); ``clips`` a
        list of (mono samples in [-1, 1], sample rate); ``images``: the prompt has images too
        (audio_projection_mode 3, as onnxruntime-genai sets it, else 2)."""
        if not isinstance(prompt, str):
            raise InputError("audios: give the prompt as text with <|audio_1|> .. <|audio_N|> tags "
                             "(input_ids can't say where the clips go)")
        made, sizes = [], []
        for i, clip in enumerate(clips):
            if not (isinstance(clip, (tuple, list)) and len(clip) == 2):
                raise InputError(f"audios[{i}]: expected (samples, sample_rate), found {type(clip).__name__}")
            try:
                embeds, size = self.features.process(*clip)
            except InputError as exc:   # say which clip
                raise InputError(f"audios[{i}]: {exc.message}") from None
            made.append(embeds)
            sizes.append(size)
        ids = audio_prompt_ids(prompt, sizes, tokenizer)
        s = self.spec
        return ids, {s.audio_embeds: Items(made), s.audio_sizes: Items(([n], (1,)) for n in sizes),
                     s.projection_mode: Items(([MODE_BOTH if images else MODE_SPEECH], (1,)) for _ in sizes),
                     s.attention_mask: Items(([True] * shape[1], (1, shape[1])) for _, shape in made)}
