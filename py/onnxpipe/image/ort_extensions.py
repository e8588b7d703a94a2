"""ort-extensions' image processor file (a transform list, as onnxruntime-genai's
``vision.config_filename`` names) read as transformers' Qwen2-VL processor keys.

The list onnxruntime-genai ships for Qwen2.5-VL: DecodeImage, ConvertRGB, Resize (smart_resize,
Pillow's bicubic, which ort-extensions vendors), Rescale, Normalize (its ``qwen2_5_vl`` flag
puts the decoded BGR channels in RGB order) and PatchImage. The list it ships for Gemma 3
(model.type "gemma3"): DecodeImage, Resize to a fixed width x height (keep_aspect_ratio 0,
CUBIC), Rescale, Normalize and Permute3D [2, 0, 1] (channels first), read as transformers'
Gemma3ImageProcessor keys. The list it ships for Phi-3 / Phi-3.5-vision (model.type "phi3v"):
DecodeImage (BGR) and ConvertRGB, then Phi3ImageTransform (the HD transform: a bilinear resize
to at most 16 crops of 336 x 336, white padding, CLIP normalisation, a bicubic 336 x 336 global
image first, zero crops up to 17), read as the keys of image/config.py's Phi3VImageProcessor.
The list it ships for Phi-4-multimodal (model.type "phi4mm"): DecodeImage (RGB),
Phi4VisionDynamicPreprocess (dynamic HD crops of 448 x 448 and their attention mask), Rescale,
Normalize and Phi4VisionProcessor (a bicubic 448 x 448 global image first), with the
"phi4-vision-aligner" output aligner, read as Phi4MultimodalImageProcessor keys (image/phi4.py).
The list it ships for Gemma 4 (model.type "gemma4"): DecodeImage, Gemma4ImageTransform (read by
image/gemma4.py as Gemma4ImageProcessor keys). The list it ships for Mistral 3 / Pixtral
(model.type "mistral3"): DecodeImage, ConvertRGB, Resize (smart_resize), Rescale, Normalize,
Permute3D and PixtralImageSizes (read by image/pixtral.py as Mistral3ImageProcessor keys).
Those are the steps onnxpipe's image graph runs, in that order;
any other step, order, attribute or value is refused with the JSON path in the file.
"""

from __future__ import annotations

import json
from typing import Any

from ..config.parse import describe
from ..errors import ConfigError
from . import gemma4, pixtral

ORDER = ("DecodeImage", "ConvertRGB", "Phi3ImageTransform", "Phi4VisionDynamicPreprocess", "Gemma4ImageTransform",
         "Resize", "Rescale", "Normalize", "Phi4VisionProcessor", "PatchImage", "Permute3D",
         "PixtralImageSizes")
_ATTRS = {
    "DecodeImage": ("color_space",),
    "ConvertRGB": (),
    "Phi3ImageTransform": ("num_crops", "num_img_tokens"),
    "Phi4VisionDynamicPreprocess": ("dynamic_hd", "dyhd_base_resolution"),
    "Phi4VisionProcessor": ("dyhd_base_resolution", "interpolation"),
    "Gemma4ImageTransform": ("patch_size", "max_soft_tokens", "pooling_kernel_size"),
    # width, height and keep_aspect_ratio are the fixed-size mode's; smart_resize ignores them
    "Resize": ("width", "height", "keep_aspect_ratio", "interpolation", "smart_resize", "min_pixels",
               "max_pixels", "patch_size", "merge_size"),
    "Rescale": ("rescale_factor",),
    "Normalize": ("mean", "std", "qwen2_5_vl", "qwen3_vl"),
    "PatchImage": ("patch_size", "temporal_patch_size", "merge_size"),
    "Permute3D": ("dims",),
    "PixtralImageSizes": (),
}
# ort-extensions' defaults for the attributes read here
_RESIZE = {"interpolation": "CUBIC", "smart_resize": 0, "min_pixels": 3136, "max_pixels": 12845056,
           "patch_size": 14, "merge_size": 2}
_PATCH = {"patch_size": 14, "temporal_patch_size": 2, "merge_size": 2}


def is_transform_list(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("processor"), dict) \
        and "transforms" in doc["processor"]


def _fail(message: str, file: str, path: str) -> None:
    raise ConfigError(message, file=file, path=path)


def to_processor_keys(doc: dict[str, Any], file: str) -> dict[str, Any]:
    """transformers' preprocessor_config.json keys equivalent to the transform list."""
    phi4 = _PHI4_ALIGNER if doc["processor"].get("output_aligner") == _PHI4_ALIGNER else None
    unknown = sorted(set(doc["processor"]) - {"name", "transforms"} - ({"output_aligner"} if phi4 else set()))
    if unknown:
        _fail(f'unknown key "{unknown[0]}"; valid keys: name, transforms (and output_aligner '
              f'"{_PHI4_ALIGNER}" with the Phi-4 steps)', file, f"$.processor.{unknown[0]}")
    transforms = doc["processor"]["transforms"]
    if not isinstance(transforms, list):
        _fail(f"expected a list of transforms, found {describe(transforms)}", file, "$.processor.transforms")
    steps: dict[str, tuple[dict[str, Any], str]] = {}   # type -> (attrs, their JSON path)
    names: dict[str, Any] = {}    # type -> its operation name
    inputs: dict[str, Any] = {}   # type -> its operation inputs (the Phi-4 list wires them)
    last = -1
    for i, item in enumerate(transforms):
        path = f"$.processor.transforms[{i}].operation"
        op = item.get("operation") if isinstance(item, dict) else None
        if not isinstance(op, dict) or not isinstance(op.get("type"), str):
            _fail(f'expected {{"operation": {{"type": ..., "attrs": {{...}}}}}}, found {describe(item)}',
                  file, path)
        kind = op["type"]
        if kind not in ORDER:
            _fail(f'transform "{kind}" is not supported: onnxpipe runs {", ".join(ORDER)} (the '
                  f"Qwen2-VL / Qwen2.5-VL, Gemma 3, Phi-3-vision, Gemma 4 and Pixtral image steps), in that order",
                  file, f"{path}.type")
        if ORDER.index(kind) <= last:
            _fail(f'transform "{kind}" out of order: onnxpipe runs {", ".join(ORDER)} in that order, '
                  "each at most once", file, f"{path}.type")
        last = ORDER.index(kind)
        attrs = op.get("attrs", {})
        if not isinstance(attrs, dict):
            _fail(f"expected an object, found {describe(attrs)}", file, f"{path}.attrs")
        for key in attrs:
            if key not in _ATTRS[kind]:
                _fail(f'unknown {kind} attribute "{key}"; valid: {", ".join(_ATTRS[kind]) or "none"}',
                      file, f"{path}.attrs.{key}")
        steps[kind] = (attrs, f"{path}.attrs")
        names[kind] = op.get("name")
        inputs[kind] = op.get("inputs")
    if phi4 or any(k.startswith("Phi4") for k in steps):
        return _phi4(steps, names, inputs, phi4, file)
    if any(v is not None for v in inputs.values()):
        kind = next(k for k, v in inputs.items() if v is not None)
        _fail("inputs: only the Phi-4 steps name their inputs; the other lists run in order",
              file, steps[kind][1][:-len(".attrs")] + ".inputs")
    if "Phi3ImageTransform" in steps:
        return _phi3(steps, file)
    if "Gemma4ImageTransform" in steps:
        return gemma4.processor_keys(steps, file)
    if "PixtralImageSizes" in steps:
        return pixtral.processor_keys(steps, dict(_RESIZE), file)
    if "DecodeImage" in steps and "Permute3D" in steps and "PatchImage" not in steps:
        return _fixed_size(steps, file)
    if "Permute3D" in steps:
        _fail("Permute3D with PatchImage: a list either cuts patch rows (Qwen2-VL) or puts the "
              "channels first (Gemma 3), not both", file, steps["Permute3D"][1][:-len(".attrs")] + ".type")
    for kind in ("DecodeImage", "PatchImage"):
        if kind not in steps:
            _fail(f"no {kind} transform: onnxpipe's image steps start from a decoded image and end "
                  "in patch rows (Qwen2-VL) or channels-first pixels (Permute3D, Gemma 3)", file,
                  "$.processor.transforms")
    attrs, path = steps["DecodeImage"]
    if attrs.get("color_space", "RGB") != "RGB":
        _fail(f'color_space: only "RGB" is supported, found {describe(attrs["color_space"])}', file,
              f"{path}.color_space")
    patch, patch_path = steps["PatchImage"]
    patch = dict(_PATCH, **patch)
    out: dict[str, Any] = {"image_processor_type": "Qwen2VLImageProcessor",
                           "do_convert_rgb": "ConvertRGB" in steps, "do_resize": "Resize" in steps,
                           "do_rescale": "Rescale" in steps, "do_normalize": "Normalize" in steps,
                           "patch_size": patch["patch_size"], "merge_size": patch["merge_size"],
                           "temporal_patch_size": patch["temporal_patch_size"]}
    if "Resize" in steps:
        attrs, path = steps["Resize"]
        resize = dict(_RESIZE, **attrs)
        if resize["smart_resize"] != 1:
            _fail("smart_resize: only 1 is supported (sides snapped to patch_size * merge_size within "
                  f"min_pixels..max_pixels); found {describe(resize['smart_resize'])}"
                  f"{'' if 'smart_resize' in attrs else ' (the default when absent)'}", file,
                  f"{path}.smart_resize")
        if resize["interpolation"] != "CUBIC":
            _fail(f'interpolation: only "CUBIC" is supported, found {describe(resize["interpolation"])}',
                  file, f"{path}.interpolation")
        for key in ("patch_size", "merge_size"):
            if resize[key] != patch[key]:
                _fail(f"{key} {resize[key]} differs from PatchImage's {patch[key]}: the resize must "
                      "snap to the patch grid", file, f"{path}.{key}")
        out.update(resample=3, min_pixels=resize["min_pixels"], max_pixels=resize["max_pixels"])
    if "Rescale" in steps:
        attrs, _ = steps["Rescale"]
        out["rescale_factor"] = attrs.get("rescale_factor", 1 / 255)
    if "Normalize" in steps:
        attrs, path = steps["Normalize"]
        if not (attrs.get("qwen2_5_vl") or attrs.get("qwen3_vl")):
            _fail("without qwen2_5_vl: 1 (or qwen3_vl: 1) ort-extensions normalises the decoded "
                  "channels in B, G, R order; only the RGB order is supported", file, path)
        out.update(image_mean=attrs.get("mean", [0.48145466, 0.4578275, 0.40821073]),
                   image_std=attrs.get("std", [0.26862954, 0.26130258, 0.27577711]))
    return out


def _fixed_size(steps: dict[str, tuple[dict[str, Any], str]], file: str) -> dict[str, Any]:
    """Gemma 3's list (onnxruntime-genai's gemma_image_processor): every image resized to one
    width x height, channels first; transformers' Gemma3ImageProcessor keys."""
    attrs, path = steps["DecodeImage"]
    if attrs.get("color_space", "RGB") != "RGB":
        _fail(f'color_space: only "RGB" is supported, found {describe(attrs["color_space"])}', file,
              f"{path}.color_space")
    if "ConvertRGB" in steps:
        _fail("ConvertRGB before a fixed-size resize (Permute3D list): not part of Gemma 3's steps, "
              "not supported", file, steps["ConvertRGB"][1][:-len(".attrs")] + ".type")
    attrs, path = steps["Permute3D"]
    if attrs.get("dims") != [2, 0, 1]:
        _fail(f"dims: only [2, 0, 1] (channels first) is supported, found {describe(attrs.get('dims'))}",
              file, f"{path}.dims")
    if "Resize" not in steps:
        _fail("no Resize transform: a channels-first (Permute3D) list needs the fixed size its "
              "vision session takes", file, "$.processor.transforms")
    attrs, path = steps["Resize"]
    for key in ("smart_resize", "min_pixels", "max_pixels", "patch_size", "merge_size"):
        if key in attrs:
            _fail(f"{key}: a Qwen2-VL resize attribute, not supported with Permute3D (a fixed "
                  "width x height)", file, f"{path}.{key}")
    for key in ("width", "height"):
        value = attrs.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            _fail(f"expected the fixed {key} (a positive integer), found {describe(value)}", file,
                  f"{path}.{key}")
    if attrs.get("keep_aspect_ratio", 1) != 0:
        _fail("keep_aspect_ratio: only 0 is supported (every image stretched to width x height); "
              f"found {describe(attrs.get('keep_aspect_ratio', 1))}"
              f"{'' if 'keep_aspect_ratio' in attrs else ' (the default when absent)'}", file,
              f"{path}.keep_aspect_ratio")
    if attrs.get("interpolation", "CUBIC") != "CUBIC":
        _fail(f'interpolation: only "CUBIC" is supported, found {describe(attrs["interpolation"])}',
              file, f"{path}.interpolation")
    out: dict[str, Any] = {"image_processor_type": "Gemma3ImageProcessor", "do_convert_rgb": True,
                           "do_resize": True, "resample": 3,
                           "size": {"height": attrs["height"], "width": attrs["width"]},
                           "do_rescale": "Rescale" in steps, "do_normalize": "Normalize" in steps,
                           "image_seq_length": 256}   # onnxruntime-genai's, fixed
    if "Rescale" in steps:
        out["rescale_factor"] = steps["Rescale"][0].get("rescale_factor", 1 / 255)
    if "Normalize" in steps:
        attrs, path = steps["Normalize"]
        for key in ("qwen2_5_vl", "qwen3_vl"):
            if attrs.get(key):
                _fail(f"{key}: the Qwen-VL channel swap, not supported in a Permute3D list", file,
                      f"{path}.{key}")
        # without the flag ort-extensions normalises the decoded R, G, B channels in place
        out.update(image_mean=attrs.get("mean", [0.48145466, 0.4578275, 0.40821073]),
                   image_std=attrs.get("std", [0.26862954, 0.26130258, 0.27577711]))
    return out


def _phi3(steps: dict[str, tuple[dict[str, Any], str]], file: str) -> dict[str, Any]:
    """Phi-3-vision's list (onnxruntime-genai's phi_image_processor): DecodeImage, ConvertRGB,
    Phi3ImageTransform and nothing after it. ort-extensions' transform always cuts up to 16
    crops of 144 tokens (its max_crops and num_img_tokens constants), so only those values of
    the attributes are accepted."""
    others = [k for k in steps if k not in ("DecodeImage", "ConvertRGB", "Phi3ImageTransform")]
    if others:
        _fail(f'transform "{others[0]}" with Phi3ImageTransform: the HD transform makes the pixels '
              "itself; onnxpipe runs DecodeImage, ConvertRGB, Phi3ImageTransform", file,
              steps[others[0]][1][:-len(".attrs")] + ".type")
    if "DecodeImage" not in steps:
        _fail("no DecodeImage transform before Phi3ImageTransform", file, "$.processor.transforms")
    attrs, at = steps["DecodeImage"]
    space = attrs.get("color_space", "RGB")
    # ort-extensions decodes to BGR and ConvertRGB swaps to RGB; RGB alone needs no swap
    if (space, "ConvertRGB" in steps) not in (("BGR", True), ("RGB", False)):
        _fail(f"color_space {describe(space)} {'with' if 'ConvertRGB' in steps else 'without'} ConvertRGB: "
              'only "BGR" followed by ConvertRGB (or "RGB" alone) hands Phi3ImageTransform RGB pixels',
              file, f"{at}.color_space")
    attrs, at = steps["Phi3ImageTransform"]
    for key, want in (("num_crops", 16), ("num_img_tokens", 144)):
        if attrs.get(key, want) != want:
            _fail(f"{key}: ort-extensions' Phi3ImageTransform always uses {want} (onnxruntime-genai's "
                  f"pixels and token counts follow it); found {describe(attrs[key])}", file, f"{at}.{key}")
    return {"image_processor_type": "Phi3VImageProcessor", "do_convert_rgb": True, "do_resize": True,
            "resample": 3, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711], "num_crops": 16}


_PHI4_ALIGNER = "phi4-vision-aligner"
_PHI4 = ("DecodeImage", "Phi4VisionDynamicPreprocess", "Rescale", "Normalize", "Phi4VisionProcessor")


def _phi4(steps: dict[str, tuple[dict[str, Any], str]], names: dict[str, Any], inputs: dict[str, Any],
          aligner: str | None, file: str) -> dict[str, Any]:
    """Phi-4-multimodal's list (onnxruntime-genai's phi_multimodal_processor): exactly _PHI4, the
    processor fed the normalised image and the dynamic step's mask, and the phi4-vision aligner
    (float masks, padding crops all ones). The crop side is 448: the token count ort-extensions
    writes (256 + 16 + 1 for the global image) holds for that side only."""
    for kind in _PHI4:
        if kind not in steps:
            _fail(f"no {kind} transform: the Phi-4 list is {', '.join(_PHI4)}", file, "$.processor.transforms")
    others = [k for k in steps if k not in _PHI4]
    if others:
        _fail(f'transform "{others[0]}" with the Phi-4 steps: onnxpipe runs {", ".join(_PHI4)}', file,
              steps[others[0]][1][:-len(".attrs")] + ".type")
    if aligner is None:
        _fail(f'expected "output_aligner": "{_PHI4_ALIGNER}" with the Phi-4 steps (onnxruntime-genai '
              "feeds float masks with padding crops all ones)", file, "$.processor.output_aligner")
    attrs, at = steps["DecodeImage"]
    if attrs.get("color_space", "RGB") != "RGB":
        _fail(f'color_space: only "RGB" is supported before Phi4VisionDynamicPreprocess, found '
              f"{describe(attrs['color_space'])}", file, f"{at}.color_space")
    for kind in ("Phi4VisionDynamicPreprocess", "Phi4VisionProcessor"):
        attrs, at = steps[kind]
        if attrs.get("dyhd_base_resolution", 448) != 448:
            _fail(f"dyhd_base_resolution: only 448 is supported (ort-extensions' token count of "
                  f"256 + 16 + 1 per global image assumes it); found {describe(attrs['dyhd_base_resolution'])}",
                  file, f"{at}.dyhd_base_resolution")
    attrs, at = steps["Phi4VisionProcessor"]
    if attrs.get("interpolation", "CUBIC") != "CUBIC":
        _fail(f'interpolation: only "CUBIC" is supported, found {describe(attrs["interpolation"])}', file,
              f"{at}.interpolation")
    wired = {"Rescale": [":0"], "Phi4VisionProcessor": [":0", f"{names['Phi4VisionDynamicPreprocess']}:1"]}
    for kind in _PHI4:
        want = wired.get(kind)
        if inputs[kind] is not None and inputs[kind] != want:
            _fail(f"inputs: expected {json.dumps(want)} (the previous step's image"
                  f"{', then the dynamic step mask' if kind == 'Phi4VisionProcessor' else ''}), found "
                  f"{json.dumps(inputs[kind])}", file, steps[kind][1][:-len(".attrs")] + ".inputs")
    hd = steps["Phi4VisionDynamicPreprocess"][0].get("dynamic_hd", 36)
    if isinstance(hd, bool) or not isinstance(hd, int) or hd <= 0:
        _fail(f"dynamic_hd: expected a positive integer, found {describe(hd)}", file,
              f"{steps['Phi4VisionDynamicPreprocess'][1]}.dynamic_hd")
    attrs = steps["Normalize"][0]
    for key in ("qwen2_5_vl", "qwen3_vl"):
        if attrs.get(key):
            _fail(f"{key}: the Qwen-VL channel swap, not part of the Phi-4 steps", file,
                  f"{steps['Normalize'][1]}.{key}")
    return {"image_processor_type": "Phi4MultimodalImageProcessor", "do_convert_rgb": True,
            "do_resize": True, "resample": 3, "do_rescale": True,
            "rescale_factor": steps["Rescale"][0].get("rescale_factor", 1 / 255), "do_normalize": True,
            "image_mean": attrs.get("mean", [0.48145466, 0.4578275, 0.40821073]),
            "image_std": attrs.get("std", [0.26862954, 0.26130258, 0.27577711]), "dynamic_hd": hd}
