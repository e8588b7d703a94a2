"""pipeline.json v2: schema, presets, onnxruntime-genai translation, validation."""

from .load import LoadedConfig, load_config, resolve_document
from .schema import PipelineSpec

__all__ = ["LoadedConfig", "PipelineSpec", "load_config", "resolve_document"]
