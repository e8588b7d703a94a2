"""onnxruntime-genai multimodal sections (model.vision / model.embedding / model.speech).

onnxruntime-genai 0.18 runs these bundles as a vision (or speech) session, an embedding session
that takes ``input_ids`` plus the image / audio features and merges them itself, and a decoder
fed ``inputs_embeds``; the image or audio preprocessing is an ort-extensions processor file
(``vision.config_filename``: a transform list such as DecodeImage, Resize, Rescale, Normalize,
PatchImage). None of the model types maps onto onnxpipe's flows yet, so each is refused here
with what it needs, naming the section of genai_config.json that needs it.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

SECTIONS = ("vision", "speech", "embedding")

# What onnxpipe's vision-language flow (docs/vision-language.md) lacks for the Qwen-VL family
# (genai's IsQwenVLFamily: 3-D mRoPE positions, which onnxpipe has as mrope_3d).
_QWEN_VL = ("an embedding session that takes the image features as an input and merges them "
            "itself (onnxruntime-genai feeds them with the prompt and an empty [0, hidden] tensor "
            "at later steps; onnxpipe's embedding takes input_ids only and the flow merges after "
            "it), and the ort-extensions transform list in vision.config_filename (onnxpipe's "
            "image front end reads transformers' preprocessor_config.json keys)")
_GEMMA3 = ("Gemma 3 images: each resized to 896x896 and expanded to <start_of_image>, 256 "
           "<image_soft_token> and <end_of_image> (onnxruntime-genai's gemma_image_processor), "
           "the embedding session merging the features itself")
# model.type -> (the section that needs the missing feature, the feature)
_VISION_TYPES = {
    "qwen2_5_vl": ("embedding", "Qwen2.5-VL image input: " + _QWEN_VL),
    "qwen3_vl": ("embedding", "Qwen3-VL image input: " + _QWEN_VL),
    "qwen3_5": ("embedding", "Qwen3.5 image input: " + _QWEN_VL),
    "qwen3_5_moe": ("embedding", "Qwen3.5-MoE image input: " + _QWEN_VL),
    "fara": ("embedding", "Fara (Qwen-VL family) image input: " + _QWEN_VL),
    "phi3v": ("vision", "Phi-3-vision HD crops: a global image plus up to num_crops 336x336 "
                        "sub-images per image, image_sizes, a token count that depends on each "
                        "image's size (onnxruntime-genai's phi_image_processor)"),
    "gemma3": ("vision", _GEMMA3),
    "mistral3": ("vision", "Pixtral images: pixel_values [images, 3, height, width] with "
                           "image_sizes, [IMG] tokens with an [IMG_BREAK] after each row and "
                           "[IMG_END] (onnxruntime-genai's mistral3_image_processor)"),
    "videochat_flash_qwen": ("vision", "VideoChat-Flash video frames with a fixed token count "
                                       "per frame (onnxruntime-genai's videochat_flash_processor)"),
    "phi4mm": ("vision", "Phi-4-multimodal images: HD crops with image_sizes and "
                         "image_attention_mask (onnxruntime-genai's phi_multimodal_processor)"),
    "gemma4": ("vision", "Gemma 4 images: soft tokens per image and per_layer_inputs from the "
                         "embedding session (onnxruntime-genai's gemma4_multimodal_processor)"),
}
_SPEECH = ("audio input: a speech session (audio_embeds, audio_sizes, audio_projection_mode) fed "
           "by the ort-extensions audio processor in speech.config_filename, its audio_features "
           "merged by the embedding session")
_ADAPTER = "a LoRA adapter applied to the decoder while an image or audio is in the prompt"


def _refuse(kind: Any, feature: str, file: str, path: str) -> None:
    named = f'model.type "{kind}"' if isinstance(kind, str) else "no model.type"
    raise ConfigError(f"{named}: {feature} is not supported yet; write a pipeline.json v2 for this "
                      f"bundle instead", file=file, path=path)


def check(model: dict[str, Any], file: str) -> None:
    """Refuse a bundle with model.vision / model.speech / model.embedding sections, naming the
    JSON path of the section (or key) that needs what onnxpipe can't run."""
    present = [s for s in SECTIONS if s in model]
    if not present:
        return
    kind = model.get("type")
    for section in ("vision", "speech"):
        body = model.get(section)
        if isinstance(body, dict) and "adapter_filename" in body:
            _refuse(kind, _ADAPTER, file, f"$.model.{section}.adapter_filename")
    vision = model.get("vision")
    if isinstance(vision, dict) and "pipeline" in vision:
        _refuse(kind, "a vision pipeline of several sessions (model.vision.pipeline stages)", file,
                "$.model.vision.pipeline")
    if "speech" in model:
        _refuse(kind, _SPEECH, file, "$.model.speech")
    if isinstance(kind, str) and kind in _VISION_TYPES:
        section, feature = _VISION_TYPES[kind]
        where = section if section in model else present[0]
        _refuse(kind, feature, file, f"$.model.{where}")
    if "vision" in model:
        _refuse(kind, "images (a model.vision section) for this model type", file, "$.model.vision")
    _refuse(kind, "a separate embedding session (model.embedding) feeding the decoder's "
                  "inputs_embeds", file, "$.model.embedding")
