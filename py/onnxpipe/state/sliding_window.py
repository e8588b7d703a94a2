"""Bounded KV caches for sliding-window attention layers, as onnxruntime-genai keeps them.

What onnxruntime-genai (0.16-0.18) does for a model whose genai_config.json has
``decoder.sliding_window {window_size W, layers, cache_slack, slide_key_value_cache: false}``
(src/models/windowed_kv_cache.cpp ComputeWindowedKvCacheSize, src/models/kv_cache.cpp
DefaultKeyValueCache), and what its builder writes into the graph (GroupQueryAttention of the
listed layers: ``local_window_size = W``, ``sliding_window_cache = 1``):

- each listed layer's past and present are buffers of a fixed capacity C from the first step
  on (other layers are unchanged); C = W + slack, clamped to max_length, where slack is
  ``cache_slack`` or, when that is 0, the provider's default: 16 on CPU (the operator scans
  O(C) rows and compacts every C - W + 1 steps), 0 on CUDA (which requires C == W);
  providers without a windowed kernel get C = max_length;
- the operator evicts by itself: after T tokens rows [0, L(T)) hold the L most recent
  positions in order (formula in ``resident``); nothing outside the engine moves a row;
- attention_mask stays [batch, T] over absolute positions.

So this module only sizes the buffers and answers whether a rewind is exact. The window
itself, and hence the tokens, come from the graph; C changes neither.
"""

from __future__ import annotations

from ..config.schema import SlidingWindow
from ..errors import ConfigError

PATH = "$.pipeline.state.kv_cache.sliding_window"
# providers whose GroupQueryAttention evicts inside a window-sized buffer, and the slack
# onnxruntime-genai gives them when cache_slack is 0 (wasm runs the CPU kernels)
DEFAULT_SLACK = {"cpu": 16, "wasm": 16, "cuda": 0}


def capacity(window: SlidingWindow, provider: str, max_length: int) -> int:
    """Positions a windowed layer's buffer holds (onnxruntime-genai's rule; never below W)."""
    slack = window.cache_slack if window.cache_slack > 0 else DEFAULT_SLACK.get(provider)
    if slack is None:
        return max(max_length, window.window_size)
    return max(window.window_size, min(max_length, window.window_size + slack))


class Windowing:
    """Which KV inputs are windowed, their capacity, and the tokens seen so far."""

    def __init__(self, window: SlidingWindow, layers: dict[str, int], fmt: str, provider: str,
                 max_length: int, file: str):
        """``layers``: past input name -> model layer index, for every cached tensor."""
        if fmt == "combined":
            raise ConfigError("sliding_window needs separate key and value caches (format "
                              '"separate" or "shared_buffer"), found a combined cache', file=file,
                              path=PATH)
        if window.window_size is None or window.window_size < 1:
            raise ConfigError(f"window_size: expected an integer > 0, found {window.window_size}",
                              file=file, path=f"{PATH}.window_size")
        if window.cache_slack < 0:
            raise ConfigError(f"cache_slack: expected an integer >= 0, found {window.cache_slack}",
                              file=file, path=f"{PATH}.cache_slack")
        have = sorted(set(layers.values()))
        missing = [i for i in window.layers if i not in have]
        if missing:
            raise ConfigError(f"layers {missing} have no KV cache inputs; the session's KV "
                              f"layers are {have}", file=file, path=f"{PATH}.layers")
        chosen = set(window.layers) if window.layers else set(have)
        self.size = window.window_size
        self.capacity = capacity(window, provider, max_length)
        self.names = frozenset(name for name, layer in layers.items() if layer in chosen)
        self.total = 0   # tokens the windowed buffers have taken in (T)

    def resident(self, total: int) -> int:
        """L(T): rows holding positions after T tokens (GroupQueryAttention's contract)."""
        c, gap = self.capacity, self.capacity - self.size + 1
        if total <= c:
            return total
        return total - gap * -(-(total - c) // gap)

    def can_rewind(self, length: int) -> bool:
        """Going back to ``length`` tokens is exact only if those rows were never evicted."""
        dropped = self.total - length
        return dropped >= 0 and self.resident(length) == self.resident(self.total) - dropped
