"""Placeholder tokens: one image token in a prompt becomes one per merged patch of its image."""

from __future__ import annotations

from ..errors import InputError


def tokens_per_image(grid: tuple[int, int, int], merge: int) -> int:
    t, h, w = grid
    return t * (h // merge) * (w // merge)


def expand_image_tokens(ids: list[int], token: int, counts: list[int]) -> list[int]:
    """``ids`` with the i-th ``token`` repeated ``counts[i]`` times (the processor's expansion of
    ``<|image_pad|>``); a prompt already expanded (runs of exactly those lengths) is kept."""
    runs = _runs(ids, token)
    if [n for _, n in runs] == counts:
        return list(ids)
    if len(runs) != len(counts) or any(n != 1 for _, n in runs):
        raise InputError(f"the prompt has {sum(n for _, n in runs)} image token(s) (id {token}) for "
                         f"{len(counts)} image(s): put one image token per image where it goes")
    out: list[int] = []
    images = iter(counts)
    for i in ids:
        out.extend([i] * next(images) if i == token else [i])
    return out


def _runs(ids: list[int], token: int) -> list[tuple[int, int]]:
    """(start, length) of each run of ``token``."""
    runs: list[tuple[int, int]] = []
    for pos, i in enumerate(ids):
        if i != token:
            continue
        if runs and runs[-1][0] + runs[-1][1] == pos:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((pos, 1))
    return runs
