"""onnxruntime-genai multimodal sections (model.vision / model.embedding / model.speech).

onnxruntime-genai 0.18 runs these bundles as a vision (or speech) session, an embedding session
that takes ``input_ids`` plus the image / audio features and merges them itself, and a decoder
fed ``inputs_embeds``; the image or audio preprocessing is an ort-extensions processor file
(``vision.config_filename``: a transform list such as DecodeImage, Resize, Rescale, Normalize,
PatchImage).

model.types "qwen2_5_vl" and "gemma3" are translated onto the vision-language flow
(docs/vision-language.md): the vision session once per image, the embedding fed the image
features through a ``merge`` into its input, the processor file read by
image/ort_extensions.py; qwen2_5_vl with mrope_3d positions and Qwen2-VL patch rows (qwen3_vl,
qwen3_5, qwen3_5_moe and fara the same: onnxruntime-genai runs them through one vision state,
position rule and processor; Fara's decoder is Qwen2.5-VL's; Qwen3.5-MoE's MoE MLPs and the
interleaved mRoPE layout live inside the decoder graph, no DeepStack features reach it, and
Qwen3.5's conv / recurrent state is the decoder translation's), gemma3
with ordinary positions, [1, 3, h, w] pixels and 256 <image_soft_token> per image (the count
onnxruntime-genai's gemma_image_processor writes); phi3v (Phi-3 / Phi-3.5-vision) with ordinary
positions, HD crops [1, 17, 3, 336, 336] and image_sizes per image, and the -1 placeholder ids
its embedding session replaces (one per image token, <|image_N|> tags expanded by the count
onnxruntime-genai's phi_image_processor writes); phi4mm (Phi-4-multimodal images) as phi3v with
Phi-4's dynamic crops and masks and the 200010 image token (config/genai_phi4mm.py); its
model.speech (Phi-4-multimodal audio) extends that same document with the speech session and a
second merge into the embedding (config/genai_phi4_speech.py); mistral3 (Pixtral images) as
gemma3 with the image's own size and [IMG] rows (config/genai_mistral3.py). Every other type is
refused with what it needs, naming the section of genai_config.json that needs it.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from . import genai_phi4mm
from . import genai_gemma4
from . import genai_mistral3
from .genai_session import session_settings
from .parse import describe

SECTIONS = ("vision", "speech", "embedding")

# onto the vision-language flow by translate() below
# (the Qwen-VL family, genai's IsQwenVLFamily: fara, Qwen2.5-VL's decoder, and qwen3_5_moe,
# Qwen3.5's with MoE MLPs, run qwen2_5_vl's vision state, positions and processor; each type is
# checked against onnxruntime-genai: tests/py/pipeline/test_genai_qwen25_vl.py, test_genai_qwen3vl.py)
TRANSLATED = ("qwen2_5_vl", "qwen3_vl", "qwen3_5", "qwen3_5_moe", "fara", "gemma3", "phi3v", "phi4mm",
              "gemma4", "mistral3")
# model.type -> (the section that needs the missing feature, the feature)
_VISION_TYPES = {
    "qwen3vl": ("vision", 'Qwen3-VL under the name onnxruntime-genai 0.18\'s builder writes (its runtime '
                          'refuses it too: "Unsupported model_type"; genai runs model.type "qwen3_vl")'),
    "videochat_flash_qwen": ("vision", "VideoChat-Flash video frames with a fixed token count "
                                       "per frame (onnxruntime-genai's videochat_flash_processor)"),
}
_SPEECH = ("audio input: a speech session (audio_embeds, audio_sizes, audio_projection_mode) fed "
           "by the ort-extensions audio processor in speech.config_filename, its audio_features "
           "merged by the embedding session")
_ADAPTER = "a LoRA adapter applied to the decoder while an image or audio is in the prompt"


def speech_cleared(model: dict[str, Any]) -> bool:
    """onnxruntime-genai's "no audio" block for the types that always read model.speech
    (phi4mm, gemma4): config_filename "" and no (or an empty) filename, nothing else; without
    it genai 0.18 refuses the bundle ("speech.config_filename is set but speech.filename is
    missing")."""
    speech = model.get("speech")
    return (model.get("type") in ("phi4mm", "gemma4") and isinstance(speech, dict)
            and set(speech) <= {"filename", "config_filename"}
            and speech.get("filename", "") == "" and speech.get("config_filename") == "")


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
    if kind == genai_gemma4.TYPE:
        genai_gemma4.check(model, file)
    if "speech" in model and not speech_cleared(model):
        if kind == "phi4mm":   # Phi-4-multimodal audio: checked here, added by genai_phi4_speech.extend
            from . import genai_phi4_speech

            genai_phi4_speech.check(model, file)
            return
        _refuse(kind, _SPEECH, file, "$.model.speech")
    if kind in TRANSLATED:
        return   # translate() reads (and refuses) what it can't run key by key
    if isinstance(kind, str) and kind in _VISION_TYPES:
        section, feature = _VISION_TYPES[kind]
        where = section if section in model else present[0]
        _refuse(kind, feature, file, f"$.model.{where}")
    if "vision" in model:
        _refuse(kind, "images (a model.vision section) for this model type", file, "$.model.vision")
    _refuse(kind, "a separate embedding session (model.embedding) feeding the decoder's "
                  "inputs_embeds", file, "$.model.embedding")


# keys onnxruntime-genai reads in each section of a qwen2_5_vl (qwen3_vl, qwen3_5) bundle, and
# what onnxpipe does with them; vision.patch_size / window_size / tokens_per_second only matter to
# its QNN pipeline, video positions (genai's config.h) and its own patching of a processor list
# without PatchImage (refused by image/ort_extensions.py), so they don't change what runs here
_VISION_KEYS = ("filename", "config_filename", "spatial_merge_size", "patch_size", "window_size",
                "tokens_per_second", "session_options", "inputs", "outputs")
_VISION_INPUTS = ("pixel_values", "image_grid_thw")
_GEMMA3_VISION_KEYS = ("filename", "config_filename", "session_options", "inputs", "outputs")
_PHI3V_INPUTS = ("pixel_values", "image_sizes")
_EMBEDDING_KEYS = ("filename", "session_options", "inputs", "outputs")
_EMBEDDING_INPUTS = ("input_ids", "image_features")


def _keys(section: dict[str, Any], valid: tuple[str, ...], kind: Any, file: str, path: str) -> None:
    for key in section:
        if key not in valid:
            _refuse(kind, f'the key "{key}" in {path[2:]} (onnxpipe reads {", ".join(valid)})', file,
                    f"{path}.{key}")


def _section(model: dict[str, Any], name: str, file: str) -> dict[str, Any]:
    value = model.get(name)
    if not isinstance(value, dict):
        raise ConfigError(f"expected an object, found {describe(value)}", file=file, path=f"$.model.{name}")
    if not isinstance(value.get("filename"), str):
        raise ConfigError(f'expected "filename" (a string), found {describe(value.get("filename"))}',
                          file=file, path=f"$.model.{name}.filename")
    for key in ("inputs", "outputs", "session_options"):
        if not isinstance(value.get(key, {}), dict):
            raise ConfigError(f"expected an object, found {describe(value[key])}", file=file,
                              path=f"$.model.{name}.{key}")
    return value


def _session(section: dict[str, Any], file: str, path: str) -> dict[str, Any]:
    """A section's filename and session_options as a v2 session (as genai_v1 does the decoder's)."""
    return {"file": section["filename"],
            **session_settings(section.get("session_options", {}), file, f"{path}.session_options")}


def _soft_token(file: str, kind: str = "gemma3", content: str = "<image_soft_token>") -> int:
    """Gemma 3's <image_soft_token> (Gemma 4's <|image|>) id from the bundle's tokenizer.json, as
    onnxruntime-genai's processor finds it (genai_config.json has no image_token_id for it)."""
    import os

    from .load import read_json

    path = os.path.join(os.path.dirname(file), "tokenizer.json")
    doc = read_json(path) if os.path.isfile(path) else {}
    for entry in doc.get("added_tokens", []) if isinstance(doc, dict) else []:
        if isinstance(entry, dict) and entry.get("content") == content:
            return entry.get("id")
    raise ConfigError(f'model.type "{kind}": images take the {content} id, found neither '
                      "model.image_token_id nor that token in tokenizer.json's added_tokens",
                      file=file, path="$.model.image_token_id")


def translate(model: dict[str, Any], doc: dict[str, Any], file: str) -> dict[str, Any]:
    """The decoder-only translation ``doc`` of a bundle with model.vision / model.embedding,
    extended to the vision-language flow (model.types in TRANSLATED); unchanged without them."""
    if not any(s in model for s in SECTIONS):
        return doc
    kind = model["type"]
    speech = kind == "phi4mm" and "speech" in model and not speech_cleared(model)
    if speech:   # Phi-4-multimodal audio: its processor file, then the sections genai 0.18 needs beside it
        from . import genai_phi4_speech

        genai_phi4_speech.check_sections(model, file)
    phi4 = kind == "phi4mm"
    for name in ("vision", "embedding"):
        if name not in model:
            _refuse(kind, f"image input without a model.{name} section", file, "$.model")
    vision, embedding = _section(model, "vision", file), _section(model, "embedding", file)
    gemma4 = kind == genai_gemma4.TYPE   # Gemma 3's flow with per-patch positions: genai_gemma4.py
    mistral3 = kind == genai_mistral3.TYPE   # Gemma 3's flow with Pixtral's rows: genai_mistral3.py
    gemma, phi3v = kind == "gemma3" or gemma4 or mistral3, kind == "phi3v" or phi4   # phi4mm: phi3v's flow
    _keys(vision, genai_mistral3.VISION_KEYS if mistral3 else _GEMMA3_VISION_KEYS if gemma or phi3v
          else _VISION_KEYS, kind, file, "$.model.vision")
    _keys(vision.get("inputs", {}), genai_gemma4.VISION_INPUTS if gemma4 else ("pixel_values",) if gemma
          else genai_phi4mm.VISION_INPUTS if phi4
          else _PHI3V_INPUTS if phi3v else _VISION_INPUTS, kind, file, "$.model.vision.inputs")
    _keys(vision.get("outputs", {}), ("image_features",), kind, file, "$.model.vision.outputs")
    _keys(embedding, _EMBEDDING_KEYS, kind, file, "$.model.embedding")
    _keys(embedding.get("inputs", {}), genai_phi4mm.EMBEDDING_INPUTS if phi4 else _EMBEDDING_INPUTS, kind, file,
          "$.model.embedding.inputs")
    _keys(embedding.get("outputs", {}), ("inputs_embeds",), kind, file, "$.model.embedding.outputs")
    token = genai_mistral3.image_token(model, file) if mistral3 else model.get("image_token_id")
    if gemma and token is None:
        token = _soft_token(file, kind, genai_gemma4.IMAGE_TOKEN) if gemma4 else _soft_token(file)
    if phi4:
        token = genai_phi4mm.image_token(model, file)
    elif phi3v:   # negative ids mark image tokens; the embedding session places the rows itself
        if "image_token_id" in model:
            _refuse(kind, "model.image_token_id (Phi-3-vision marks image tokens with negative ids)",
                    file, "$.model.image_token_id")
        token = -1
    if not isinstance(token, int) or isinstance(token, bool):
        raise ConfigError(f"expected the image token id (an integer), found {describe(token)}", file=file,
                          path="$.model.image_token_id")
    merge = vision.get("spatial_merge_size", 2)
    if not isinstance(merge, int) or isinstance(merge, bool) or merge <= 0:
        raise ConfigError(f"expected a positive integer, found {describe(merge)}", file=file,
                          path="$.model.vision.spatial_merge_size")

    named = vision.get("inputs", {})
    pixels, grid = named.get("pixel_values", "pixel_values"), named.get("image_grid_thw", "image_grid_thw")
    if phi3v:
        grid = named.get("image_sizes", "image_sizes")
    if gemma4:
        grid = named.get("pixel_position_ids", "pixel_position_ids")
    features = vision.get("outputs", {}).get("image_features", "image_features")
    ids = embedding.get("inputs", {}).get("input_ids", "input_ids")
    fed = embedding.get("inputs", {}).get("image_features", "image_features")
    embeds = embedding.get("outputs", {}).get("inputs_embeds", "inputs_embeds")
    decoder_in = model["decoder"].get("inputs", {}).get("inputs_embeds", "inputs_embeds")

    pipeline = doc["pipeline"]
    pipeline["sessions"] = {"vision": _session(vision, file, "$.model.vision"),
                            "embedding": _session(embedding, file, "$.model.embedding"),
                            **pipeline["sessions"]}
    pipeline["flow"] = [
        {"run": "vision", "when": "init", "loop": "per_image", "loop_over": pixels},
        {"run": "embedding", "when": "step",
         "merge": {"from": f"vision.{features}", "into": fed, "token": "image_token"}},
        {"run": "decoder", "when": "step"},
    ]
    wires = [w for w in pipeline["dataflow"] if not w["to"].startswith("decoder.")]  # ids go to the embedding
    if ids != "input_ids":
        wires.append({"from": "inputs.input_ids", "to": f"embedding.{ids}"})
    if embeds != decoder_in:
        wires.append({"from": f"embedding.{embeds}", "to": f"decoder.{decoder_in}"})
    pipeline["dataflow"] = wires
    if gemma4:
        genai_gemma4.per_layer_kv(doc)
    if not (gemma or phi3v):   # ordinary positions (the decoder reads them from the attention mask)
        positions = pipeline["state"]["position_ids"]
        positions.update(strategy="mrope_3d", spatial_merge_size=merge)
    doc["tokens"].setdefault("extra", {})["image_token"] = token
    doc.setdefault("preprocessing", {})["image"] = {
        "config": vision.get("config_filename", "processor_config.json"), "format": "ort-extensions",
        "pixel_values": pixels, **({"grid_thw": grid} if gemma4 or not gemma else {})}
    # phi3v: image_sizes; gemma4: pixel_position_ids
    if phi4:   # the crop masks; audio_features from model.speech (config/genai_phi4_speech.py) or [0, hidden]
        genai_phi4mm.extend(model, doc, file, speech)
    if mistral3:
        genai_mistral3.extend(model, doc, file)
    return doc
