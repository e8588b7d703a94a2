"""Generation loop strategies, chosen by ``generation.loop``: a registry, not a switch."""

from __future__ import annotations

from .autoregressive import Timing, token_steps

LOOPS = {
    "autoregressive": token_steps,
}

__all__ = ["LOOPS", "Timing", "token_steps"]
