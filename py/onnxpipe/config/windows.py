"""Analysis windows a pipeline's audio settings may name, as plain lists (no numpy).

Here, below the stages, so a config check (a processor file's declared window) and the graph that
uses the window (ops/log_mel.py) compare against one definition.
"""

from __future__ import annotations

import math


def hann_periodic(length: int) -> list[float]:
    """The periodic Hann window (numpy's hanning(length + 1)[:-1], torch.hann_window's default)."""
    return [0.5 - 0.5 * math.cos(2 * math.pi * i / length) for i in range(length)]
