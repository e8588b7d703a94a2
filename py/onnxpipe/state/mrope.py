"""mRoPE's 3-D positions for a chunk of ids with images: transformers' Qwen2-VL ``get_rope_index``.

Text tokens take the same position on the temporal, height and width axes, one more than the
previous token's largest. The tokens of an image (``t * (h / merge) * (w / merge)`` image tokens
in a row, in the grid's t, row, column order) take (start + t, start + row, start + column),
where ``start`` is the position after the text before it; the text after the image starts at
``start + max(h, w) / merge``.
"""

from __future__ import annotations

from ..errors import InputError


def layout(ids: list[int], token: int, grids: list[tuple[int, int, int]], merge: int,
           start: int = 0) -> tuple[list[list[int]], int]:
    """([temporal, height, width] positions for ``ids``, the next text position).

    The i-th image's tokens are the i-th block of ``t * (h / merge) * (w / merge)`` image
    tokens; consecutive images may touch.
    """
    axes: list[list[int]] = [[], [], []]
    images = iter(grids)
    pos, i, used = start, 0, 0
    while i < len(ids):
        if ids[i] != token:
            for axis in axes:
                axis.append(pos)
            pos += 1
            i += 1
            continue
        grid = next(images, None)
        if grid is None:
            raise InputError(f"more image tokens (id {token}) in the prompt than the {len(grids)} "
                             f"image(s) given fill")
        used += 1
        t, h, w = grid[0], grid[1] // merge, grid[2] // merge
        count = t * h * w
        if ids[i:i + count] != [token] * count:
            raise InputError(f"image {used} has a {grid[0]}x{grid[1]}x{grid[2]} grid: {count} image tokens "
                             f"expected at position {i}, found fewer")
        for ti in range(t):
            for hi in range(h):
                for wi in range(w):
                    axes[0].append(pos + ti)
                    axes[1].append(pos + hi)
                    axes[2].append(pos + wi)
        pos += max(h, w)   # transformers advances by the spatial extent, not by t
        i += count
    if used != len(grids):
        raise InputError(f"{len(grids)} image(s) given but the prompt's image tokens fill {used}")
    return axes, max(max(axis) for axis in axes) + 1 if ids else pos
