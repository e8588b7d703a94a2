"""Generation loop strategies, chosen by ``generation.loop``: a registry, not a switch.

Each strategy is one class that declares what it supplies and reads (``LoopStrategy``) and
runs itself; ``loop_for`` is the only lookup.
"""

from __future__ import annotations

from ..config.registry import LOOPS
from ..errors import ConfigError
from .autoregressive import Autoregressive
from .base import LoopStrategy
from .denoising import Denoising
from .sequence import GenerationStep, Sequence, Timing
from .single_pass import SinglePass
from .streaming import Streaming

# the names generation.loop accepts: the schema reads this registry (config/registry.py)
for _cls in (Autoregressive, SinglePass, Streaming, Denoising):
    LOOPS.register(_cls.name, _cls)
del _cls


def loop_for(name: str, file: str | None = None) -> type[LoopStrategy]:
    """The strategy class registered as ``name``."""
    cls = LOOPS.get(name)
    if cls is None:
        raise ConfigError(f'generation.loop "{name}" is not a loop this runtime has; it has '
                          f"{', '.join(LOOPS)}", file=file, path="$.generation.loop")
    return cls


__all__ = ["LOOPS", "Autoregressive", "Denoising", "GenerationStep", "LoopStrategy", "Sequence", "SinglePass", "Streaming",
           "Timing", "loop_for"]
