"""Registries that the stages fill and config reads, so config never imports a stage.

- ``LOOPS`` and ``SCHEDULERS``: the names ``generation.loop`` and ``generation.scheduler`` accept.
  The loop strategies (``loops/``) and the diffusion schedulers (``diffusion/``) register
  themselves under their ``name``; the schema's fields take the registries as their choices, so
  each name is written once, on its class.
- ``DRAFTERS`` and ``PHONEMIZERS``: the names ``generation.speculative.method`` and
  ``preprocessing.phonemes.engine`` accept, registered by ``search/speculative.py`` and
  ``phonemes/engines.py`` with what each name makes.
- ``PROCESSOR_READERS``: "image" -> ``image/config.py``'s reader of an image processor file
  (``(bundle_dir, ref, where) -> (config, path)``), for translations that check a bundle's
  processor file against its own config (``config/genai_mistral3.py``).
- Load-time checks: each stage (controls, streaming, denoising, speech segments, images, search
  options, speculative decoding, vision) registers the check of its own keys with
  ``register_check``; ``config/validate.py`` runs them, in ``order``, between its structural
  checks (``run_stage_checks``).

Stages register at import; ``onnxpipe/__init__.py`` imports ``onnxpipe.stages``, which imports
every stage that registers, so any use of the package sees the registries filled.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Callable, Generic, TypeVar

T = TypeVar("T")

# (spec, file, bundle_dir) -> None; raises ConfigError. bundle_dir is None when no files are at hand.
StageCheck = Callable[[object, str, "str | None"], None]


def _same(a: object, b: object) -> bool:
    """The same definition, also when its module was imported again (a test reloading it)."""
    if a is b:
        return True
    key = (lambda x: (getattr(x, "__module__", None), getattr(x, "__qualname__", None)))
    return key(a) == key(b) and key(a)[1] is not None


class Registry(Mapping[str, T], Generic[T]):
    """Names -> what a stage registered under them, in registration order; a name is
    registered once (a second, different registrant is refused)."""

    def __init__(self, what: str):
        self.what = what
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.what}: expected a non-empty name, found {name!r}")
        old = self._items.get(name)
        if old is not None and not _same(old, item):
            raise ValueError(f'{self.what} "{name}" is registered twice: {old!r} and {item!r}')
        self._items[name] = item
        return item

    def __getitem__(self, name: str) -> T:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._items)})"


LOOPS: Registry[type] = Registry("generation.loop")            # filled by loops/__init__.py
SCHEDULERS: Registry[type] = Registry("generation.scheduler")  # filled by diffusion/__init__.py
DRAFTERS: Registry[Callable] = Registry("generation.speculative.method")   # search/speculative.py
PHONEMIZERS: Registry[Callable] = Registry("preprocessing.phonemes.engine")  # phonemes/engines.py
PROCESSOR_READERS: Registry[Callable] = Registry("image processor file reader")   # image/config.py
STAGE_CHECKS: Registry[StageCheck] = Registry("load-time check")
_ORDER: dict[str, int] = {}     # stage check name -> its place


def register_check(name: str, check: StageCheck, *, order: int) -> StageCheck:
    """Run ``check(spec, file, bundle_dir)`` at every load, after the structural checks of
    flow, wires and output and before those of tokens and files. ``order`` sets its place
    among the stage checks: where a bundle has several problems, the first check to fail
    names the one reported."""
    taken = next((other for other, place in _ORDER.items() if place == order and other != name), None)
    if taken is not None:   # equal places would run in import order, which no one chose
        raise ValueError(f'load-time check "{name}": order {order} is taken by "{taken}"')
    STAGE_CHECKS.register(name, check)
    _ORDER[name] = order
    return check


def stage_checks() -> list[tuple[str, StageCheck]]:
    """(name, check) in the order they run."""
    return sorted(STAGE_CHECKS.items(), key=lambda item: _ORDER[item[0]])


def run_stage_checks(spec, file: str, bundle_dir: str | None = None) -> None:
    """Run every registered stage check; the first problem raises its ConfigError."""
    if not STAGE_CHECKS:
        raise RuntimeError("no load-time stage checks are registered: import onnxpipe.stages "
                           "(onnxpipe/__init__.py does) before validating a config")
    for _, check in stage_checks():
        check(spec, file, bundle_dir)


__all__ = ["DRAFTERS", "LOOPS", "PHONEMIZERS", "PROCESSOR_READERS", "SCHEDULERS", "STAGE_CHECKS", "Registry", "StageCheck", "register_check",
           "run_stage_checks", "stage_checks"]
