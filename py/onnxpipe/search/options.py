"""Search options: pipeline.json defaults overridden per call, checked before anything runs."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

from ..config.registry import register_check
from ..config.schema import Generation, Range, Sampling, Speculative
from ..errors import ConfigError, InputError, choices_text, nearest
from .speculative import from_call

_ALIASES = {"seed": "random_seed", "stop": "stop_strings", "max_tokens": "max_new_tokens"}
_ID_LISTS = ("stop_token_ids", "suppress_tokens", "suppress_tokens_at_start")


@dataclass(frozen=True)
class SearchOptions:
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 50
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    random_seed: int = -1
    num_beams: int = 1                               # > 1: beam search (search/beam.py)
    no_repeat_ngram_size: int = 0
    length_penalty: float = 1.0                      # beam search only (as transformers)
    early_stopping: bool | str = False               # beam search: True, False or "never"
    num_return_sequences: int = 1                   # beam search: 1..num_beams best beams
    max_new_tokens: int | None = None
    max_length: int = 2048
    min_length: int = 0                              # end ids masked while the ids are shorter
    min_new_tokens: int = 0                          # end ids masked until this many new tokens
    stop_strings: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    suppress_tokens: tuple[int, ...] = ()            # never picked (masked in the sampler graph)
    suppress_tokens_at_start: tuple[int, ...] = ()   # not picked as a call's first new token
    speculative: Speculative | None = None           # drafts verified k at a time (search/speculative.py)

    @property
    def seed(self) -> int:
        return self.random_seed if self.random_seed >= 0 else int.from_bytes(os.urandom(4), "little")


FIELDS = {f.name: f for f in dataclasses.fields(SearchOptions)}

# the range pipeline.json declares for each option's default: a call's override stays inside it
RANGES: dict[str, Range] = {f.name: f.metadata["range"] for cls in (Sampling, Generation)
                            for f in dataclasses.fields(cls)
                            if f.name in FIELDS and f.metadata.get("range") is not None}


def _greedy_if_zero(opts: SearchOptions) -> SearchOptions:
    """Temperature 0 is the common spelling of "greedy", in pipeline.json and in a call."""
    if opts.temperature == 0:
        return dataclasses.replace(opts, do_sample=False, temperature=1.0)
    return opts


def defaults_from(generation: Generation) -> SearchOptions:
    s = generation.sampling
    suppress = generation.suppress_tokens
    return _greedy_if_zero(SearchOptions(
        do_sample=s.do_sample, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
        min_p=s.min_p, repetition_penalty=s.repetition_penalty, random_seed=s.random_seed,
        num_beams=s.num_beams, no_repeat_ngram_size=s.no_repeat_ngram_size,
        length_penalty=s.length_penalty, early_stopping=s.early_stopping,
        num_return_sequences=s.num_return_sequences,
        max_length=generation.max_length, min_length=generation.min_length,
        min_new_tokens=generation.min_new_tokens,
        stop_strings=generation.stop.strings, stop_token_ids=generation.stop.token_ids,
        suppress_tokens=suppress.always if suppress else (),
        suppress_tokens_at_start=suppress.at_start if suppress else (),
        speculative=generation.speculative))


def _type_ok(name: str, value) -> bool:
    kind = FIELDS[name].type
    if value is None:
        return "None" in str(kind)
    if name == "early_stopping":
        return isinstance(value, (bool, str))
    if "bool" in str(kind):
        return isinstance(value, bool)
    if "float" in str(kind):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if "int" in str(kind) and "tuple" not in str(kind):
        return isinstance(value, int) and not isinstance(value, bool)
    return True


def resolve(base: SearchOptions, overrides: dict) -> SearchOptions:
    """``base`` with caller overrides; unknown names and bad values raise InputError."""
    changes = {}
    for raw_name, value in overrides.items():
        name = _ALIASES.get(raw_name, raw_name)
        if name not in FIELDS:
            hint = nearest(raw_name, list(FIELDS) + list(_ALIASES))
            tip = f' Did you mean "{hint}"?' if hint else ""
            raise InputError(f'unknown search option "{raw_name}".{tip} Valid options: {choices_text(FIELDS)}')
        if name == "speculative":
            changes[name] = from_call(value)
            continue
        if name in _ID_LISTS or name == "stop_strings":
            if not isinstance(value, (str, int, list, tuple)) and value is not None:
                raise InputError(f'search option "{raw_name}": expected a list (or one value), found '
                                 f"{type(value).__name__}")
            value = tuple([value] if isinstance(value, (str, int)) else value or ())
            if name in _ID_LISTS and not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                             for v in value):
                raise InputError(f'search option "{raw_name}": expected token ids (integers >= 0), '
                                 f"found {list(value)!r:.80}")
            if name == "stop_strings" and not all(isinstance(v, str) and v for v in value):
                raise InputError(f'search option "{raw_name}": expected strings (not empty), '
                                 f"found {list(value)!r:.80}")
        if not _type_ok(name, value):
            raise InputError(f'search option "{raw_name}": expected {FIELDS[name].type}, found {value!r}')
        changes[name] = float(value) if FIELDS[name].type == "float" else value
    opts = _greedy_if_zero(dataclasses.replace(base, **changes))
    _check(opts)
    for name, value in changes.items():   # after _check, whose messages say more
        declared = RANGES.get(name)
        if declared is not None and isinstance(value, (int, float)) and not declared.holds(value):
            raise InputError(f'search option "{name}": expected a number in {declared.span()} '
                             f"({declared.unit}), found {value}")
    return opts


# where each option's pipeline.json default lives (load-time errors name it)
JSON_PATHS = {name: f"$.generation.sampling.{name}" for name in (
    "do_sample", "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "num_beams",
    "no_repeat_ngram_size", "length_penalty", "early_stopping", "num_return_sequences")}
JSON_PATHS.update(max_length="$.generation.max_length", min_length="$.generation.min_length",
                  min_new_tokens="$.generation.min_new_tokens", stop_strings="$.generation.stop.strings",
                  speculative="$.generation.speculative")


def problems(o: SearchOptions) -> list[tuple[str, str]]:
    """(option name, message) for each bad value or combination this runtime can't run."""
    found = []
    if o.temperature <= 0:
        found.append(("temperature", f"temperature must be >= 0 (0 means greedy), found {o.temperature}"))
    if not 0 < o.top_p <= 1:
        found.append(("top_p", f"top_p must be in (0, 1], found {o.top_p}"))
    if o.top_k < 0:
        found.append(("top_k", f"top_k must be >= 0 (0: no limit), found {o.top_k}"))
    if not 0 <= o.min_p < 1:
        found.append(("min_p", f"min_p must be in [0, 1), found {o.min_p}"))
    if o.repetition_penalty <= 0:
        found.append(("repetition_penalty", f"repetition_penalty must be > 0, found {o.repetition_penalty}"))
    if o.max_new_tokens is not None and o.max_new_tokens < 1:
        found.append(("max_new_tokens", f"max_new_tokens must be >= 1, found {o.max_new_tokens}"))
    if o.max_length < 1:
        found.append(("max_length", f"max_length must be >= 1, found {o.max_length}"))
    for name in ("min_length", "min_new_tokens", "no_repeat_ngram_size"):
        if getattr(o, name) < 0:
            found.append((name, f"{name} must be >= 0, found {getattr(o, name)}"))
    if o.early_stopping not in (True, False, "never"):
        found.append(("early_stopping", f'early_stopping must be true, false or "never", found {o.early_stopping!r}'))
    if not math.isfinite(o.length_penalty):
        found.append(("length_penalty", f"length_penalty must be a finite number, found {o.length_penalty}"))
    if o.num_beams < 1:
        found.append(("num_beams", f"num_beams must be >= 1, found {o.num_beams}"))
    if not 1 <= o.num_return_sequences <= max(o.num_beams, 1):
        found.append(("num_return_sequences", f"num_return_sequences must be in 1..num_beams "
                      f"({o.num_beams}), found {o.num_return_sequences}"))
    if o.no_repeat_ngram_size and o.speculative is not None:
        found.append(("no_repeat_ngram_size", "no_repeat_ngram_size with speculative decoding is not "
                      "supported (its bans differ per verified position): use one or the other"))
    if o.num_beams > 1:
        beam_refuses = (("do_sample", o.do_sample, "beam sampling (num_beams > 1 with do_sample) is not "
                         "supported: use do_sample false with num_beams, or num_beams 1 to sample"),
                        ("speculative", o.speculative is not None, "beam search with speculative decoding "
                         "is not supported: use one or the other"),
                        ("stop_strings", bool(o.stop_strings), "stop_strings with beam search are not "
                         "supported (beams end at end ids or the length only)"))
        found += [(name, message) for name, bad, message in beam_refuses if bad]
    return found


def _check(o: SearchOptions) -> None:
    found = problems(o)
    if found:
        raise InputError("bad search options: " + "; ".join(message for _, message in found))


def check_config(spec, file: str, bundle_dir: str | None = None) -> None:
    """Load-time: the bundle's own search defaults must be values and combinations that run."""
    generation = spec.generation
    if generation.loop != "autoregressive":
        return
    for name, message in problems(defaults_from(generation)):
        raise ConfigError(message, file=file, path=JSON_PATHS.get(name, "$.generation"))


register_check("search_options", check_config, order=60)
