"""onnxruntime-genai's Phi-4-multimodal bundles (model.type "phi4mm"), images: what
config/genai_multimodal.py's translation adds for them.

onnxruntime-genai 0.18 runs the vision session on pixel_values [images, crops, 3, 448, 448],
image_sizes [images, 2] and image_attention_mask [images, crops, 32, 32] from ort-extensions'
Phi-4 steps (image/ort_extensions.py, image/phi4.py), replaces each <|image_N|> tag by
<|endoftext10|> (id 200010, fixed in its phi_multimodal_processor) repeated by the image's
token count, and feeds the embedding session input_ids, image_features and, when the session
takes it, audio_features ([0, hidden] without audio; onnxpipe feeds it when
embedding.inputs names it). onnxpipe runs the vision session once per
image (crops unpadded; a vision model reads each image on its own), with the same inputs.
A bundle with a speech session gets it added by config/genai_phi4_speech.py ``extend``.

A bundle without audio clears its speech block (``"speech": {"filename": "",
"config_filename": ""}``): onnxruntime-genai then loads no speech session (absent, the block's
default config_filename asks for one).
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .parse import describe

IMAGE_TOKEN = 200010   # onnxruntime-genai's image_special_token_id: <|endoftext10|>
VISION_INPUTS = ("pixel_values", "image_sizes", "attention_mask")
EMBEDDING_INPUTS = ("input_ids", "image_features", "audio_features")


def image_token(model: dict[str, Any], file: str) -> int:
    """200010: onnxruntime-genai ignores model.image_token_id for phi4mm, so another value
    there would say the bundle expects what it never gets."""
    given = model.get("image_token_id", IMAGE_TOKEN)
    if given != IMAGE_TOKEN:
        raise ConfigError(f'model.type "phi4mm": onnxruntime-genai marks image tokens with id {IMAGE_TOKEN} '
                          f"(<|endoftext10|>) whatever model.image_token_id says; expected {IMAGE_TOKEN} or "
                          f"no key, found {describe(given)}", file=file, path="$.model.image_token_id")
    return IMAGE_TOKEN


def extend(model: dict[str, Any], doc: dict[str, Any], file: str, speech: bool = False) -> None:
    """The crop masks as the third per-image input of the vision session; the embedding's
    audio_features from the speech session when the bundle has one (``speech``:
    config/genai_phi4_speech.py ``extend``), else fed [0, hidden] (as onnxruntime-genai feeds it
    without a speech session)."""
    vision, embedding = model["vision"], model["embedding"]
    doc["preprocessing"]["image"]["attention_mask"] = vision.get("inputs", {}).get(
        "attention_mask", "image_attention_mask")
    if speech:
        from . import genai_phi4_speech

        genai_phi4_speech.extend(model, doc, file)
        return
    audio = embedding.get("inputs", {}).get("audio_features")
    if audio is None:
        return   # an embedding session that takes no audio features
    hidden = model["decoder"].get("hidden_size")
    if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden <= 0:
        raise ConfigError(f"expected the hidden size (a positive integer): the embedding session's "
                          f'"{audio}" is fed [0, hidden_size] without audio; found {describe(hidden)}',
                          file=file, path="$.model.decoder.hidden_size")
    doc["pipeline"].setdefault("inputs", {})[audio] = {
        "dtype": "float32", "shape": [0, hidden], "default": [],
        "doc": "audio features (none: this bundle runs without a speech session)"}
    doc["pipeline"]["dataflow"].append({"from": f"inputs.{audio}", "to": f"embedding.{audio}"})
