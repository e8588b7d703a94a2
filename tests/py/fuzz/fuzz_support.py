"""What the fuzz tests share: case counts per profile, the bundles, a per-case time limit, the
outcome rules (only onnxpipe's own errors, each naming where), and a session-reusing backend.

ONNXPIPE_FUZZ=long (``make fuzz``) multiplies every case count by LONG_FACTOR and draws fresh
random cases each run; the default (``make test``) profile is derandomized, so the same cases
run every time and a failure there is reproducible.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, event, settings

from onnxpipe.backends.native import NativeBackend
from onnxpipe.errors import BundleError, ConfigError, EngineError, InputError, OnnxpipeError

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "public" / "models"
FIXTURES = ROOT / "tests" / "fixtures" / ".cache"
LONG = os.environ.get("ONNXPIPE_FUZZ", "") == "long"
LONG_FACTOR = 12
CASE_SECONDS = 60 if LONG else 20   # one case (a load, a call) longer than this is a hang

settings.register_profile("fuzz", deadline=None, database=None, derandomize=True, print_blob=True,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("fuzz-long", deadline=None, print_blob=True,
                          database=None, suppress_health_check=list(HealthCheck))
PROFILE = "fuzz-long" if LONG else "fuzz"


def cases(n: int) -> settings:
    """Settings for a fuzz test of ``n`` cases in the make-test profile."""
    return settings(settings.get_profile(PROFILE), max_examples=n * LONG_FACTOR if LONG else n)


class Hang(Exception):
    """A case ran past CASE_SECONDS."""


@contextmanager
def time_limit(seconds: float = CASE_SECONDS):
    """Raise Hang in this (main) thread after ``seconds``; Python code is interrupted, a long
    onnxruntime call as soon as it returns."""
    def fire(signum, frame):
        raise Hang(f"case ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ---- bundles -----------------------------------------------------------------------------------

CONFIG_NAMES = ("pipeline.json", "genai_config.json", "config.json")


def config_file(bundle: Path) -> Path:
    """The file onnxpipe.load reads first in ``bundle`` (the one the config fuzz mutates)."""
    return next(bundle / n for n in CONFIG_NAMES if (bundle / n).is_file())


def real_bundles() -> list[Path]:
    return sorted(p for p in MODELS.iterdir() if p.is_dir() and any((p / n).is_file() for n in CONFIG_NAMES))


def fixture_bundles() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if p.is_dir() and any((p / n).is_file() for n in CONFIG_NAMES))


def linked_copy(bundle: Path, into: Path) -> Path:
    """``into``: every entry of ``bundle`` symlinked (model files are never copied) except the
    config file, which the caller writes."""
    into.mkdir(parents=True, exist_ok=True)
    keep = config_file(bundle).name
    for entry in bundle.iterdir():
        if entry.name != keep and not entry.name.startswith("."):
            (into / entry.name).symlink_to(entry.resolve())
    return into / keep


def dump(document) -> str:
    """JSON text as Python writes it (NaN and Infinity included: json.loads reads them back)."""
    return json.dumps(document, allow_nan=True, ensure_ascii=False)


# ---- outcomes ------------------------------------------------------------------------------------


def check_error(exc: BaseException, bundle_dir: Path, where: str) -> None:
    """Only onnxpipe's own errors, and each says where: a ConfigError names the file and a JSON
    path, a BundleError / EngineError names a path in the bundle."""
    if isinstance(exc, Hang):
        raise exc
    if not isinstance(exc, OnnxpipeError):
        raise AssertionError(f"{where}: {type(exc).__name__} leaked: {exc}") from exc
    event(f"{where}: {type(exc).__name__}")
    if isinstance(exc, ConfigError):
        assert exc.file, f"ConfigError without a file: {exc.message}"
        if exc.path is None:   # a file that is no JSON at all says where it stopped parsing
            assert "invalid JSON at line" in exc.message, f"ConfigError without a JSON path: {exc.message}"
        else:
            assert exc.path.startswith("$"), f"ConfigError with a path that is no JSON path: {exc.message}"
            assert exc.path in exc.message
        assert str(exc.file) in exc.message
    elif isinstance(exc, (BundleError, EngineError)):
        assert str(bundle_dir) in exc.message or "session" in exc.message, exc.message
    assert isinstance(exc.message, str) and exc.message.strip()


def check_input_error(exc: BaseException, names: tuple[str, ...]) -> None:
    """A bad call: an InputError naming one of ``names`` (the argument or the option given)."""
    if isinstance(exc, Hang):
        raise exc
    if not isinstance(exc, InputError):
        raise AssertionError(f"{type(exc).__name__} leaked instead of an InputError: {exc}") from exc
    event(f"InputError ({names[0]})")
    assert any(n in exc.message for n in names), f"{exc.message!r} names none of {names}"


# ---- a backend that opens each model file once --------------------------------------------------


class ReusingText:
    """A text_loader for onnxpipe.load that reads a tokenizer once per (folder, preprocessing
    spec): tokenizer.json takes about 0.1 s to read, and the spec decides everything it loads."""

    def __init__(self):
        self._loaded: dict[tuple, object] = {}

    def __call__(self, bundle_dir, spec):
        from onnxpipe.text import load_text_processor

        key = (str(bundle_dir), repr(spec))
        if key not in self._loaded:
            self._loaded[key] = load_text_processor(bundle_dir, spec)
        return self._loaded[key]


class ReusingBackend(NativeBackend):
    """The native onnxruntime backend, but a model file opened once with the same providers and
    options is not opened again: the real bundles take about a second each to open, and the
    config fuzz loads them hundreds of times. Options are still checked on every call (a bad
    option must still fail), and each load gets its own session object (own I/O binding)."""

    def __init__(self):
        super().__init__()
        self._opened: dict[tuple, object] = {}

    def open_session(self, name, path, providers, options, external_data=()):
        self.session_options(options, f"sessions.{name}.session_options")
        if not os.path.isfile(path):
            return super().open_session(name, path, providers, options, external_data)
        key = (os.path.realpath(path), tuple(providers), json.dumps(options, sort_keys=True, default=repr),
               tuple(external_data))
        if key not in self._opened:
            self._opened[key] = super().open_session(name, path, providers, options, external_data)
        return dataclasses.replace(self._opened[key], name=name, binding=None, bound_now={})
