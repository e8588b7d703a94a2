"""Built-in presets for ``pipeline.extends``: a registry of JSON fragments.

A preset is merged *under* the config: the config's own fields win, objects merge key by
key, lists (flow, dataflow) are replaced whole. The resolved document is what is parsed.
"""

from __future__ import annotations

import copy
from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "autoregressive-decoder": {
        "pipeline": {"flow": [{"run": "decoder", "when": "step"}]},
        "generation": {"loop": "autoregressive"},
    },
    # each image through the vision session on its own (images differ in size); the embedding
    # runs every step, its rows at the image tokens replaced by the image features
    "vision-language": {
        "pipeline": {"flow": [
            {"run": "vision", "when": "init", "loop": "per_image", "loop_over": "pixel_values",
             "optional": True},
            {"run": "embedding", "when": "step",
             "merge": {"from": "vision.image_features", "into": "inputs_embeds", "token": "image_token"}},
            {"run": "decoder", "when": "step"},
        ]},
        "generation": {"loop": "autoregressive"},
    },
    "encoder-decoder": {
        "pipeline": {
            "flow": [
                {"run": "encoder", "when": "init"},
                {"run": "decoder", "when": "step", "cross_attention_from": "encoder"},
            ],
            "state": {"cross_cache": {"source": "encoder", "frozen": True}},
        },
        "generation": {"loop": "autoregressive"},
    },
    "speech-language": {
        "pipeline": {"flow": [
            {"run": "speech", "when": "init", "optional": True},
            {"run": "embedding", "when": "init"},
            {"run": "decoder", "when": "step"},
        ]},
        "generation": {"loop": "autoregressive"},
    },
    "multimodal": {
        "pipeline": {"flow": [
            {"run": "vision", "when": "init", "optional": True},
            {"run": "speech", "when": "init", "optional": True},
            {"run": "embedding", "when": "init"},
            {"run": "decoder", "when": "step"},
        ]},
        "generation": {"loop": "autoregressive"},
    },
    "text-to-speech": {
        "pipeline": {"flow": [{"run": "model", "when": "init"}]},
        "generation": {"loop": "single_pass"},
    },
}


def merge(base: Any, override: Any) -> Any:
    """Deep-merge ``override`` onto ``base`` (objects by key; anything else replaced)."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    return copy.deepcopy(override)


def apply_preset(name: str, document: dict[str, Any]) -> dict[str, Any]:
    """The document with preset ``name`` merged under it (``name`` must be known)."""
    resolved = merge(copy.deepcopy(PRESETS[name]), document)   # callers may mutate it
    return resolved
