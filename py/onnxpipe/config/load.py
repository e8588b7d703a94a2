"""Find a bundle's config, resolve presets, parse and validate: one call, one PipelineSpec."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..errors import BundleError, ConfigError, choices_text, nearest
from . import genai_paths, genai_v1, transformers_js
from .parse import describe, parse_spec
from .presets import PRESETS, apply_preset
from .schema import PipelineSpec
from .validate import validate_spec

PIPELINE_FILE = "pipeline.json"


@dataclass(frozen=True)
class LoadedConfig:
    spec: PipelineSpec
    bundle_dir: str
    file: str          # the file the spec came from (pipeline.json or genai_config.json)
    dtype: str | None = None        # the transformers.js dtype asked for (None: per provider)
    dtypes: tuple[str, ...] = ()    # the dtypes a transformers.js folder offers; () for others
    # genai_config.json's document, when the spec is its translation (errors are told in it)
    source: dict | None = field(default=None, compare=False, hash=False, repr=False)

    def told(self, exc: ConfigError) -> ConfigError:
        """``exc`` as the user's file says it: a translated document's path becomes the
        genai_config.json key it came from (config/genai_paths.py)."""
        return exc if self.source is None else genai_paths.remap(exc, self.source, self.file)

    @contextmanager
    def errors_told(self):
        """Config errors raised inside, told in the user's file (``told``)."""
        try:
            yield
        except ConfigError as exc:
            told = self.told(exc)
            if told is exc:
                raise
            raise told from None


def read_json(path: str) -> object:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise BundleError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}",
                          file=path, path="$") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                          file=path) from None


def resolve_document(document: object, file: str) -> PipelineSpec:
    """Presets applied, then parsed into a PipelineSpec (no file checks)."""
    if not isinstance(document, dict):
        raise ConfigError(f"expected a JSON object at the top level, found {describe(document)}",
                          file=file, path="$")
    if "version" not in document:
        raise ConfigError('missing "version": 2 (a folder with only genai_config.json is read as '
                          "an onnxruntime-genai bundle)", file=file, path="$.version")
    pipeline = document.get("pipeline")
    preset = pipeline.get("extends") if isinstance(pipeline, dict) else None
    if preset is not None:
        if not isinstance(preset, str):
            raise ConfigError(f"expected a preset name (a string), found {describe(preset)}. "
                              f"Built-in presets: {choices_text(PRESETS)}", file=file,
                              path="$.pipeline.extends")
        if preset not in PRESETS:
            hint = nearest(str(preset), PRESETS)
            tip = f' Did you mean "{hint}"?' if hint else ""
            raise ConfigError(f'Unknown pipeline preset "{preset}".{tip} Built-in presets: '
                              f"{choices_text(PRESETS)}", file=file, path="$.pipeline.extends")
        document = apply_preset(preset, document)
    return parse_spec(PipelineSpec, document, file)


def load_config(path: str, dtype: str | None = None) -> LoadedConfig:
    """Read the bundle at ``path`` (a folder, or its pipeline.json / genai_config.json).

    ``dtype`` picks a transformers.js folder's precision (fp32, fp16, q8, q4, q4f16, ...);
    other bundles offer no such choice.
    """
    path = os.fspath(path)
    if os.path.isfile(path):
        bundle_dir, name = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    elif os.path.isdir(path):
        bundle_dir = os.path.abspath(path)
        name = next((n for n in (PIPELINE_FILE, genai_v1.FILE)
                     if os.path.isfile(os.path.join(bundle_dir, n))), None)
        if name is None and transformers_js.looks_like(bundle_dir):
            name = transformers_js.CONFIG_FILE
        if name is None:
            raise BundleError(f"{path}: no {PIPELINE_FILE} or {genai_v1.FILE} in this folder, nor a "
                              f"transformers.js layout ({transformers_js.CONFIG_FILE} + onnx/model.onnx)")
    else:
        raise BundleError(f"{path}: no such model bundle (expected a folder with {PIPELINE_FILE})")
    file = os.path.join(bundle_dir, name)
    dtypes: tuple[str, ...] = ()
    source = None
    if name == transformers_js.CONFIG_FILE:
        document = transformers_js.translate(bundle_dir, dtype)
        dtypes = tuple(transformers_js.offered_dtypes(bundle_dir))
    elif dtype is not None:
        raise BundleError(f'{file}: dtype "{dtype}" was given, but this bundle offers no dtype choice '
                          f"(only transformers.js folders have model_<dtype>.onnx files); leave it out")
    else:
        document = read_json(file)
        if name == genai_v1.FILE:
            source, document = document, genai_v1.translate(document, file)
    try:
        spec = resolve_document(document, file)
        validate_spec(spec, file, bundle_dir)
    except ConfigError as exc:
        if source is None:
            raise
        raise genai_paths.remap(exc, source, file) from None
    return LoadedConfig(spec=spec, bundle_dir=bundle_dir, file=file, dtype=dtype, dtypes=dtypes, source=source)
