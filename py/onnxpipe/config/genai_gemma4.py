"""onnxruntime-genai's Gemma 4 bundles (model.type "gemma4"): what differs from Gemma 3's.

onnxruntime-genai 0.18 runs them as Gemma 3's (genai_multimodal.py: vision once per image, the
embedding merging image_features at the image token, a decoder fed inputs_embeds), except:
- the vision session takes pixel_values [1, patches, p * p * 3] and pixel_position_ids
  [1, patches, 2], made by ort-extensions' Gemma4ImageTransform (image/gemma4.py), and returns
  one row per soft token; the soft-token count depends on the image's size;
- the image token is "<|image|>" from tokenizer.json (genai_config.json names none);
- model.speech: onnxruntime-genai defaults speech.config_filename to a file name and refuses a
  gemma4 bundle without speech.filename unless that name is emptied, so a vision-only bundle
  carries ``"speech": {"config_filename": ""}``: no audio, accepted here; a speech session
  (audio input) is refused;
- the KV cache: the builder fixes each layer's heads and head size in the past inputs (the
  full-attention layers' differ from the sliding ones'); onnxruntime-genai takes them from the
  model, so decoder.num_key_value_heads / head_size (the sliding layers') are not applied to
  every layer here either (``per_layer_kv``);
- per_layer_inputs (an embedding output feeding the decoder, Gemma 4's E2B / E4B models) is
  refused: the model builder writes no such input, so no bundle of it was checked.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

TYPE = "gemma4"
IMAGE_TOKEN = "<|image|>"
VISION_INPUTS = ("pixel_values", "pixel_position_ids")
_PER_LAYER = ("per-layer inputs (an embedding output per_layer_inputs fed to the decoder, Gemma 4's "
              "E2B / E4B layout) are not supported yet; write a pipeline.json v2 for this bundle instead")


def check(model: dict[str, Any], file: str) -> None:
    """Refuse per_layer_inputs wherever genai_config.json names it."""
    for section, key in (("decoder", "inputs"), ("embedding", "outputs")):
        names = model.get(section, {}).get(key, {}) if isinstance(model.get(section), dict) else {}
        if isinstance(names, dict) and "per_layer_inputs" in names:
            raise ConfigError(f'model.type "{TYPE}": {_PER_LAYER}', file=file,
                              path=f"$.model.{section}.{key}.per_layer_inputs")


def per_layer_kv(doc: dict[str, Any]) -> None:
    """The translated KV cache with no global heads / head size: each layer's come from its
    past input (fixed by the builder), or from the graph where a dim is symbolic."""
    kv = doc["pipeline"]["state"]["kv_cache"]
    for key in ("num_heads", "head_size"):
        kv.pop(key, None)
