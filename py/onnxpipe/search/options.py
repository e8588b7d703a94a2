"""Search options: pipeline.json defaults overridden per call, checked before anything runs."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from ..config.schema import Generation, Speculative
from ..errors import InputError, choices_text, nearest
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
    num_beams: int = 1
    no_repeat_ngram_size: int = 0
    max_new_tokens: int | None = None
    max_length: int = 2048
    min_length: int = 0
    min_new_tokens: int = 0
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


def defaults_from(generation: Generation) -> SearchOptions:
    s = generation.sampling
    suppress = generation.suppress_tokens
    return SearchOptions(
        do_sample=s.do_sample, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
        min_p=s.min_p, repetition_penalty=s.repetition_penalty, random_seed=s.random_seed,
        num_beams=s.num_beams, no_repeat_ngram_size=s.no_repeat_ngram_size,
        max_length=generation.max_length, min_length=generation.min_length,
        stop_strings=generation.stop.strings, stop_token_ids=generation.stop.token_ids,
        suppress_tokens=suppress.always if suppress else (),
        suppress_tokens_at_start=suppress.at_start if suppress else (),
        speculative=generation.speculative)


def _type_ok(name: str, value) -> bool:
    kind = FIELDS[name].type
    if value is None:
        return "None" in str(kind)
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
            value = tuple([value] if isinstance(value, (str, int)) else value or ())
            if name in _ID_LISTS and not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                             for v in value):
                raise InputError(f'search option "{raw_name}": expected token ids (integers >= 0), '
                                 f"found {list(value)!r:.80}")
        if not _type_ok(name, value):
            raise InputError(f'search option "{raw_name}": expected {FIELDS[name].type}, found {value!r}')
        changes[name] = float(value) if FIELDS[name].type == "float" else value
    opts = dataclasses.replace(base, **changes)
    if opts.temperature == 0:   # the common spelling of "greedy"
        opts = dataclasses.replace(opts, do_sample=False, temperature=1.0)
    _check(opts)
    return opts


def _check(o: SearchOptions) -> None:
    problems = []
    if o.temperature <= 0:
        problems.append(f"temperature must be >= 0 (0 means greedy), found {o.temperature}")
    if not 0 < o.top_p <= 1:
        problems.append(f"top_p must be in (0, 1], found {o.top_p}")
    if o.top_k < 0:
        problems.append(f"top_k must be >= 0 (0: no limit), found {o.top_k}")
    if not 0 <= o.min_p < 1:
        problems.append(f"min_p must be in [0, 1), found {o.min_p}")
    if o.repetition_penalty <= 0:
        problems.append(f"repetition_penalty must be > 0, found {o.repetition_penalty}")
    if o.max_new_tokens is not None and o.max_new_tokens < 1:
        problems.append(f"max_new_tokens must be >= 1, found {o.max_new_tokens}")
    if o.max_length < 1:
        problems.append(f"max_length must be >= 1, found {o.max_length}")
    if o.num_beams != 1:
        problems.append(f"num_beams={o.num_beams}: beam search is not supported yet (use 1)")
    if o.no_repeat_ngram_size:
        problems.append("no_repeat_ngram_size is not supported yet (use 0)")
    if problems:
        raise InputError("bad search options: " + "; ".join(problems))
