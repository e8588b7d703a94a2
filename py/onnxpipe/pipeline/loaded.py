"""A loaded bundle: sessions open, state empty; the inputs, options and sampler every job uses."""

from __future__ import annotations

import dataclasses
import os

from ..audio.phi4_features import SpeechFrontEnd
from ..engine import controls as control_values
from ..engine.build import assemble, structure
from ..errors import ConfigError, InputError
from ..image.front import ImageFrontEnd, front_end_inputs
from ..loops import loop_for
from ..onnx_info.session import SessionGraph
from ..search import options as search_options
from ..search.sampler import Sampler
from .transcription import check_declarations as check_audio_declarations


def _native_text(bundle_dir, spec):
    from ..text import load_text_processor

    return load_text_processor(bundle_dir, spec)


def _native_phonemizer(bundle_dir, spec):
    from ..phonemes import load_phonemizer

    return load_phonemizer(bundle_dir, spec)


def bundle_kind(spec, loop) -> str:
    """"speech" when pipeline.output is a waveform (use speak); "voice-activity" when it is a
    speech probability per chunk of a streaming loop (use detect_speech); "transcription" for
    a token loop fed a waveform (preprocessing.audio; use transcribe); "image" when
    pipeline.output is an image (pipeline.output.image; use run); else "text". Known from the
    config and its loop alone, before any session opens (onnxpipe batch checks it so)."""
    out = spec.pipeline.output
    if out is not None and out.segments is not None:
        return "voice-activity"
    if out is not None and out.image is not None:
        return "image"
    if spec.preprocessing.audio is not None and loop.makes_tokens:
        return "transcription"   # a token loop fed a waveform: use transcribe
    return "speech" if out is not None and out.audio is not None else "text"


class LoadedPipeline:
    def __init__(self, config, backend, providers=None, text=True, text_loader=None, variant=None,
                 phonemizer_loader=None):
        self.config = config
        self.spec = config.spec
        self.backend = backend
        self.loop = loop_for(self.spec.generation.loop, config.file)
        assembly = assemble(config, backend, providers, variant)
        self.sessions = assembly.sessions
        self.executor = assembly.executor
        self.warnings = assembly.warnings
        self.structure = structure(self.spec)
        self.defaults = search_options.defaults_from(self.spec.generation)
        self.text = self._load_text(text_loader or _native_text) if text else None
        phonemes = self.spec.preprocessing.phonemes
        try:
            self.phonemizer = ((phonemizer_loader or _native_phonemizer)(config.bundle_dir, phonemes)
                               if phonemes is not None else None)
        except ConfigError as exc:   # the phonemizer knows the JSON path, not the file it came from
            if exc.file is not None:
                raise
            raise ConfigError(exc.detail, file=config.file, path=exc.path) from None
        self.controls = control_values.controls(self.spec.pipeline.inputs)
        self.images = ImageFrontEnd(self) if self.spec.preprocessing.image is not None else None
        self.speech = SpeechFrontEnd(self) if self.spec.preprocessing.speech is not None else None
        self._vocab_size: int | None = None
        self._grammar = None
        self._check_token_data()
        check_audio_declarations(self)

    def _check_token_data(self) -> None:
        """tokens.decoder_prefix / decoder_start / bos / pad and generation.suppress_tokens need a
        token loop; the ids fed to the model at every start (decoder_prefix, decoder_start) must be
        in the vocabulary. The others are checked where they are used, as onnxruntime-genai and
        transformers do: bos only when it is fed (``start_ids``), pad never (it only fills
        returned sequences up, GenerationResult.padded), suppressed ids past the vocabulary can't
        be picked anyway (the sampler leaves them out)."""
        tokens = self.spec.tokens
        lists = {"$.tokens.decoder_prefix": tokens.decoder_prefix,
                 "$.tokens.decoder_start": () if tokens.decoder_start is None else (tokens.decoder_start,),
                 "$.tokens.bos": () if tokens.bos is None else (tokens.bos,),
                 "$.tokens.pad": () if tokens.pad is None else (tokens.pad,)}
        suppress = self.spec.generation.suppress_tokens
        if suppress is not None:
            lists.update({"$.generation.suppress_tokens.always": suppress.always,
                          "$.generation.suppress_tokens.at_start": suppress.at_start})
        for path, ids in lists.items():
            if not ids:
                continue
            if not self.loop.makes_tokens:
                raise ConfigError(f'token ids here need a token loop; generation.loop is "{self.loop.name}"',
                                  file=self.config.file, path=path)
            if path in ("$.tokens.decoder_prefix", "$.tokens.decoder_start"):
                self._check_fed(path, ids)

    def _check_fed(self, path: str, ids) -> None:
        """Ids from the bundle that are about to be fed to the model: in the vocabulary."""
        vocab = self.vocab_size
        bad = [i for i in ids if i < 0 or (vocab is not None and i >= vocab)]
        if bad:
            raise self.config.told(ConfigError(
                f"ids {bad[:5]} are outside the vocabulary (0..{vocab - 1 if vocab else '?'}) and would be "
                f"fed to the model", file=self.config.file, path=path))

    def _load_text(self, loader):
        spec = self.spec.preprocessing.text
        try:
            return loader(self.config.bundle_dir, spec)
        except Exception:
            if spec is not None:
                raise
            return None   # no tokenizer declared or found: ids in, ids out

    # ---- what the bundle is ------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """What the bundle makes (``bundle_kind``)."""
        return bundle_kind(self.spec, self.loop)

    @property
    def eos(self) -> tuple[int, ...]:
        """Stop ids: the bundle's tokens.eos, else the tokenizer's."""
        eos = tuple(self.spec.tokens.eos)
        if not eos and self.text is not None:
            eos = tuple(getattr(self.text, "eos_token_ids", ()) or ())
        return eos

    @property
    def start_ids(self) -> tuple[int, ...]:
        """Where a token loop starts when the caller gives no prompt, as transformers'
        ``generate()`` does without inputs: tokens.decoder_prefix, else [decoder_start] (the
        decoder of an encoder-decoder), else [bos]; empty when the bundle names none."""
        tokens = self.spec.tokens
        if tokens.decoder_prefix:
            return tuple(tokens.decoder_prefix)
        for first in (tokens.decoder_start, tokens.bos):
            if first is not None:
                return (first,)
        return ()

    def fed_start_ids(self) -> tuple[int, ...]:
        """``start_ids`` about to be fed to the model: a bos start (fed only here, so not checked
        at load) checked against the vocabulary."""
        tokens = self.spec.tokens
        if not tokens.decoder_prefix and tokens.decoder_start is None and tokens.bos is not None:
            self._check_fed("$.tokens.bos", (tokens.bos,))
        return self.start_ids

    @property
    def vocab_size(self) -> int | None:
        """The logits' width: from the session's I/O, else detected in its graph (read once)."""
        if self._vocab_size is None and "logits" in self.executor.plan.pipeline_outputs:
            session, name = self.executor.plan.pipeline_outputs["logits"]
            shape = self.sessions[session].outputs[name].shape
            dim = shape[-1] if shape else None   # onnxruntime-web may report no shape at all
            if not isinstance(dim, int):   # symbolic: ask the graph itself
                facts = SessionGraph(self.backend, self.sessions[session]).facts()
                found = facts.vocab_size(name) if facts is not None else None
                dim = found.value if found is not None else None
            self._vocab_size = dim
        return self._vocab_size

    def tokenizer(self):
        if self.text is None:
            raise InputError(f"this bundle has no tokenizer ({self.config.bundle_dir}); pass input_ids=")
        return self.text

    def require_loop(self, makes_tokens: bool, use: str) -> None:
        """Refuse a job this bundle's loop strategy doesn't do; ``use`` names the right call."""
        if self.loop.makes_tokens != makes_tokens or self.loop.streams:
            use = "detect_speech() or speech_detector()" if self.loop.streams else use
            raise InputError(f'this bundle\'s loop is "{self.loop.name}": use {use}')

    # ---- per call ------------------------------------------------------------------------------

    def options(self, search: dict | None = None, max_new_tokens=None, reply_tokens=None):
        """Search options: the bundle's defaults with ``search`` (and ``max_new_tokens``) over them.

        ``reply_tokens``: the new-token budget when the call names neither ``max_new_tokens`` nor
        ``max_length`` (a bundle's max_length is its context, far longer than a reply)."""
        search = dict(search or {})
        if max_new_tokens is not None:
            search["max_new_tokens"] = max_new_tokens
        opts = search_options.resolve(self.defaults, search)
        if reply_tokens is not None and opts.max_new_tokens is None and "max_length" not in search:
            opts = dataclasses.replace(opts, max_new_tokens=reply_tokens)
        return opts

    def grammar(self):
        """The bundle's grammar session (grammar/engine.py): its engine gets the vocabulary on
        the first constrained call and keeps compiled grammars."""
        if self._grammar is None:
            from ..grammar.engine import GrammarSession
            from ..grammar.vocabulary import VocabularySource
            from ..text.base import resolve_text_files

            self.tokenizer()   # a clear error for a bundle without one
            tokenizer_file = resolve_text_files(self.config.bundle_dir, self.spec.preprocessing.text).tokenizer
            self._grammar = GrammarSession(
                self.backend.name, VocabularySource(
                    tokenizer_file, os.path.relpath(tokenizer_file, self.config.bundle_dir).replace(os.sep, "/"),
                    self.vocab_size, tuple(self.eos)))
        return self._grammar

    def sampler(self, options) -> Sampler:
        """A sampler for ``options`` on the engine and provider that make the logits."""
        info, provider = self._logits_info()
        return Sampler(self.backend, provider, options, info, self.vocab_size)

    def _logits_info(self):
        session, name = self.executor.plan.pipeline_outputs["logits"]
        return self.sessions[session].outputs[name], self.sessions[session].provider

    def inputs(self, given=None, controls=None, provided=()) -> dict:
        """Host values for the caller's pipeline inputs: controls resolved, ``given`` checked
        ((flat values, shape) or an array by name); ``provided`` are inputs a front end adds."""
        extra = control_values.resolve(self.spec.pipeline.inputs, controls or {})
        plan = self.executor.plan
        if given is not None and not isinstance(given, dict):
            raise InputError(f"inputs: expected a dict of name -> (flat values, shape), found {type(given).__name__}")
        for name, value in (given or {}).items():
            if name in front_end_inputs(self.spec):   # made per image by the front end, never given whole
                raise InputError(f'inputs["{name}"]: the image preprocessing makes this input; pass '
                                 f"images=[onnxpipe.image.Image(rgb, width, height)]")
            if hasattr(value, "shape") and hasattr(value, "tolist"):   # an array
                value = (value.reshape(-1).tolist(), tuple(value.shape))
            if not (isinstance(value, tuple) and len(value) == 2):
                raise InputError(f'inputs["{name}"]: expected (flat values, shape) or an array')
            values, shape = value
            count = 1
            for d in shape:
                count *= d
            if count != len(values):
                raise InputError(f'inputs["{name}"]: {len(values)} values do not fill shape {tuple(shape)}')
            if name not in plan.pipeline_inputs:
                raise InputError(f'inputs["{name}"]: not a pipeline input of this bundle; it takes '
                                 f"{', '.join(sorted(plan.pipeline_inputs))}")
            extra[name] = (list(values), tuple(shape))
        missing = sorted(plan.caller_inputs - set(extra) - set(provided) - set(front_end_inputs(self.spec)))
        if missing:
            raise InputError(f"this pipeline needs input(s) {', '.join(missing)}: pass "
                             f'inputs={{"{missing[0]}": (values, shape)}}')
        return extra

    def with_images(self, ids: list[int], images) -> tuple[list[int], dict]:
        """(prompt ids with image tokens expanded, the images' pipeline inputs); see image/front.py."""
        if images is not None and not isinstance(images, (list, tuple)):
            raise InputError(f"images: expected a list of onnxpipe.image.Image, found {type(images).__name__}")
        if not images:
            return ids, {}
        if self.images is None:
            raise InputError("this bundle takes no images (no preprocessing.image in its pipeline.json)")
        return self.images.prepare(ids, images)

    def with_audios(self, prompt, audios, images: bool = False) -> tuple[list[int], dict]:
        """(prompt ids with audio tokens expanded, the clips' pipeline inputs); see audio/phi4_features.py.
        ``images``: the prompt has images too (their tags already made ids, expanded by with_images)."""
        if not isinstance(audios, (list, tuple)):
            raise InputError(f"audios: expected a list of (samples, sample_rate), found {type(audios).__name__}")
        if self.speech is None:
            raise InputError("this bundle takes no audio (no preprocessing.speech in its pipeline.json)")
        return self.speech.prepare(prompt, audios, self.tokenizer(), images)

    def reset(self) -> None:
        """Empty state (no positions held)."""
        self.executor.reset()
