"""Denoising (diffusion) support: schedulers, the initial noise, images out.

Schedulers are a registry by the name ``generation.scheduler`` uses; each one's settings are
diffusers' ``scheduler_config.json`` keys (``settings.py``), its arithmetic a small ONNX graph
(``steps.py``). Everything here is pure Python: it runs in Pyodide.
"""

from __future__ import annotations

from ..config.registry import SCHEDULERS
from ..errors import ConfigError
from .ddim import DDIM
from .euler import EulerDiscrete
from .steps import GUIDANCE_MODES, Plan, StepScheduler, input_graph

# the names generation.scheduler accepts: the schema reads this registry (config/registry.py)
for _cls in (EulerDiscrete, DDIM):
    SCHEDULERS.register(_cls.name, _cls)
del _cls
BY_DIFFUSERS_CLASS = {cls.diffusers_class: name for name, cls in SCHEDULERS.items()}


def scheduler_name(name: str | None, settings: dict | None, file: str, path: str) -> str:
    """The scheduler to use: ``name``, else the one ``settings["_class_name"]`` names."""
    if name is None:
        cls = (settings or {}).get("_class_name")
        if cls is None:
            raise ConfigError(f'a denoising pipeline needs "scheduler" ({", ".join(SCHEDULERS)}) or '
                              f'scheduler settings with "_class_name"', file=file, path=path)
        if cls not in BY_DIFFUSERS_CLASS:
            raise ConfigError(f'"_class_name" is "{cls}": this runtime has '
                              f"{', '.join(BY_DIFFUSERS_CLASS)}", file=file, path=path)
        return BY_DIFFUSERS_CLASS[cls]
    if name not in SCHEDULERS:
        raise ConfigError(f'unknown scheduler "{name}"; this runtime has {", ".join(SCHEDULERS)}',
                          file=file, path=path)
    return name


def make_scheduler(name: str | None, settings: dict | None, file: str = "pipeline.json",
                   path: str = "$.generation.scheduler",
                   settings_path: str = "$.generation.denoising.scheduler_config",
                   settings_file: str | None = None) -> StepScheduler:
    """The scheduler ``name`` (or the one the settings' _class_name names) with ``settings``;
    errors in the settings name ``settings_file`` (default ``file``) and ``settings_path``."""
    cls = SCHEDULERS[scheduler_name(name, settings, file, path)]
    return cls(settings, settings_file or file, settings_path)


__all__ = ["DDIM", "EulerDiscrete", "GUIDANCE_MODES", "Plan", "SCHEDULERS", "StepScheduler",
           "input_graph", "make_scheduler", "scheduler_name"]
