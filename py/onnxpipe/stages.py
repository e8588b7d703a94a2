"""The stages that fill config's registries (config/registry.py), imported in one place.

Config never imports a stage: each stage registers its loop or scheduler names and its
load-time check when it is imported, and ``onnxpipe/__init__.py`` imports this module, so the
registries are full before any config is parsed or validated. A new stage that registers
something adds its import here (no config module changes).
"""

from __future__ import annotations

from . import diffusion, loops  # noqa: F401  (LOOPS, SCHEDULERS; streaming and denoising checks)
from .diffusion import image as image_output  # noqa: F401
from .engine import controls  # noqa: F401
from .image import checks as vision  # noqa: F401
from .phonemes import engines as phonemizers  # noqa: F401  (PHONEMIZERS)
from .search import options, speculative  # noqa: F401  (DRAFTERS too)
from .speech import segments  # noqa: F401
