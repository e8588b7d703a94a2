"""The fit check of a whole bundle as a load will open it: its wasm sessions, and the other
dtypes of a transformers.js folder when the one asked for does not fit (heap/fit.py)."""

from __future__ import annotations

import os

from ..config.load import load_config
from ..engine.build import choose_provider
from ..errors import InputError
from .fit import DEFAULT_CONTEXT, MAX_HEAPS, Fit, estimate, refusal

MAX_CONTEXT = 1 << 20


def context_length(value, max_length: int) -> int:
    """The KV cache a load reserves: ``value`` (a load's context_length) or the default, never
    past the bundle's own max_length."""
    if value is None:
        return min(max_length, DEFAULT_CONTEXT)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONTEXT:
        raise InputError(f"context_length: expected a number of tokens from 1 to {MAX_CONTEXT}, found {value!r}")
    return min(value, max_length)


def heaps(value) -> int | None:
    """A load's heaps: "auto" (None: the fewest of 1 or 2 that hold the weights expanded) or the
    number of onnxruntime-web instances (4 GiB heaps each) to spread a decoder over."""
    if value is None or value == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HEAPS:
        raise InputError(f'heaps: expected "auto" or a number of WASM heaps from 1 to {MAX_HEAPS}, found {value!r}')
    return value


def wasm_sessions(config, available, providers, variant) -> dict[str, tuple[str, list[str]]]:
    """name -> (model file, data files) of each session that will run on wasm."""
    out = {}
    for name, s in config.spec.pipeline.sessions.items():
        provider, _ = choose_provider(tuple(providers) if providers else s.execution_provider, tuple(available))
        if provider != "wasm":
            continue
        rel = s.file_for(variant or provider)
        if isinstance(rel, str):
            data = list(s.data_for(variant or provider))
            for guess in (rel + ".data", rel + "_data"):   # v1 bundles name no data files
                if guess not in data and os.path.exists(os.path.join(config.bundle_dir, guess)):
                    data.append(guess)
            out[name] = (rel, data)
    return out


def bundle_fit(config, sizes: dict[str, int], available, providers, variant, context,
               expand: str = "auto", heaps: int | None = None) -> Fit | None:
    """The heap the bundle's wasm sessions need, or None when none runs on wasm."""
    sessions = wasm_sessions(config, available, providers, variant)
    if not sessions:
        return None
    return estimate(config, sessions, config.bundle_dir, sizes, context, expand, heaps)


def check(config, sizes: dict[str, int], available, providers, variant, context, what: str,
          expand: str = "auto", heaps: int | None = None) -> Fit | None:
    """``bundle_fit``, refused (HeapError) when even the least it needs is past the heap; the
    refusal names the folder's dtypes that would fit."""
    fit = bundle_fit(config, sizes, available, providers, variant, context, expand, heaps)
    if fit is None or fit.fits:
        return fit
    others = {}
    for dtype in config.dtypes:
        if dtype == config.dtype:
            continue
        other = bundle_fit(load_config(config.bundle_dir, dtype=dtype), sizes, available, providers, variant,
                           context, expand, heaps)
        if other is not None:
            others[dtype] = other
    raise refusal(fit, what, others)
