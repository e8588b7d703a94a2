"""Generation loop strategies, chosen by ``generation.loop``: a registry, not a switch."""

from __future__ import annotations

from .autoregressive import Timing, token_steps
from .single_pass import run_once

LOOPS = {
    "autoregressive": token_steps,
    "single_pass": run_once,
}

__all__ = ["LOOPS", "Timing", "run_once", "token_steps"]
