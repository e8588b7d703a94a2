"""ort-extensions' transform-list processor file (onnxruntime-genai's vision.config_filename)
read as transformers' Qwen2-VL keys; what onnxpipe's image graph can't run is refused with the
JSON path in that file."""

import copy
import json

import pytest

from onnxpipe.errors import ConfigError
from onnxpipe.image.config import load_processor_config
from tests.fixtures.genai_qwen25_vl import MAX_PIXELS, MEAN, MIN_PIXELS, PROCESSOR, STD


def load(tmp_path, doc):
    (tmp_path / "processor_config.json").write_text(json.dumps(doc))
    return load_processor_config(str(tmp_path), "processor_config.json", "$.preprocessing.image.config")[0]


def edited(index, **attrs):
    doc = copy.deepcopy(PROCESSOR)
    doc["processor"]["transforms"][index]["operation"].setdefault("attrs", {}).update(attrs)
    return doc


def refused(tmp_path, doc, path, text):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, doc)
    assert info.value.file == str(tmp_path / "processor_config.json")
    assert info.value.path == path
    assert text in info.value.message


def test_genai_qwen25_vl_list_reads_as_the_qwen2_vl_keys(tmp_path):
    config = load(tmp_path, PROCESSOR)
    assert config.pixel_range == (MIN_PIXELS, MAX_PIXELS)
    assert (config.do_resize, config.resample, config.do_rescale, config.do_normalize) == (True, 3, True, True)
    assert config.rescale_factor == pytest.approx(1 / 255)
    assert list(config.image_mean) == MEAN and list(config.image_std) == STD
    assert (config.patch_size, config.temporal_patch_size, config.merge_size) == (14, 2, 2)


def test_missing_steps_turn_them_off(tmp_path):
    doc = copy.deepcopy(PROCESSOR)
    transforms = doc["processor"]["transforms"]
    doc["processor"]["transforms"] = [t for t in transforms
                                      if t["operation"]["type"] in ("DecodeImage", "PatchImage")]
    config = load(tmp_path, doc)
    assert (config.do_resize, config.do_rescale, config.do_normalize, config.do_convert_rgb) == \
        (False, False, False, False)


@pytest.mark.parametrize("index, attrs, key, text", [
    (2, {"smart_resize": 0}, "smart_resize", "smart_resize: only 1 is supported"),
    (2, {"interpolation": "LINEAR"}, "interpolation", 'interpolation: only "CUBIC" is supported'),
    (2, {"merge_size": 4}, "merge_size", "merge_size 4 differs from PatchImage's 2"),
    (0, {"color_space": "BGR"}, "color_space", 'color_space: only "RGB" is supported'),
    (3, {"offset": 1}, "offset", 'unknown Rescale attribute "offset"; valid: rescale_factor'),
])
def test_values_onnxpipe_does_not_run(tmp_path, index, attrs, key, text):
    refused(tmp_path, edited(index, **attrs), f"$.processor.transforms[{index}].operation.attrs.{key}", text)


def test_normalize_without_the_rgb_flag(tmp_path):
    doc = copy.deepcopy(PROCESSOR)
    del doc["processor"]["transforms"][4]["operation"]["attrs"]["qwen2_5_vl"]
    refused(tmp_path, doc, "$.processor.transforms[4].operation.attrs",
            "ort-extensions normalises the decoded channels in B, G, R order")


def test_other_transforms_and_orders(tmp_path):
    doc = copy.deepcopy(PROCESSOR)
    doc["processor"]["transforms"][2]["operation"]["type"] = "CenterCrop"
    refused(tmp_path, doc, "$.processor.transforms[2].operation.type", 'transform "CenterCrop" is not supported')
    doc = copy.deepcopy(PROCESSOR)
    transforms = doc["processor"]["transforms"]
    transforms[3], transforms[4] = transforms[4], transforms[3]
    refused(tmp_path, doc, "$.processor.transforms[4].operation.type", 'transform "Rescale" out of order')
    doc = copy.deepcopy(PROCESSOR)
    doc["processor"]["transforms"].pop()
    refused(tmp_path, doc, "$.processor.transforms", "no PatchImage transform")


def gemma3_list(index=None, **attrs):
    from tests.fixtures.genai_gemma3 import PROCESSOR as GEMMA3

    doc = copy.deepcopy(GEMMA3)
    if index is not None:
        doc["processor"]["transforms"][index]["operation"].setdefault("attrs", {}).update(attrs)
    return doc


def test_genai_gemma3_list_reads_as_gemma3_keys(tmp_path):
    """onnxruntime-genai's Gemma 3 list (Resize to a fixed size, Permute3D): a fixed size,
    bicubic, rescale, normalise, 256 soft tokens per image."""
    config = load(tmp_path, gemma3_list())
    assert config.fixed and config.image_processor_type == "Gemma3ImageProcessor"
    assert (config.size.height, config.size.width, config.image_seq_length) == (64, 64, 256)
    assert (config.resample, config.do_rescale, config.do_normalize) == (3, True, True)
    assert list(config.image_mean) == [0.5] * 3 and list(config.image_std) == [0.5] * 3


@pytest.mark.parametrize("index, attrs, key, text", [
    (1, {"keep_aspect_ratio": 1}, "keep_aspect_ratio", "keep_aspect_ratio: only 0 is supported"),
    (1, {"interpolation": "LINEAR"}, "interpolation", 'interpolation: only "CUBIC" is supported'),
    (1, {"smart_resize": 1}, "smart_resize", "a Qwen2-VL resize attribute, not supported with Permute3D"),
    (1, {"width": 0}, "width", "expected the fixed width (a positive integer), found integer 0"),
    (3, {"qwen2_5_vl": 1}, "qwen2_5_vl", "the Qwen-VL channel swap, not supported in a Permute3D list"),
    (4, {"dims": [0, 1, 2]}, "dims", "dims: only [2, 0, 1] (channels first) is supported"),
])
def test_gemma3_values_onnxpipe_does_not_run(tmp_path, index, attrs, key, text):
    refused(tmp_path, gemma3_list(index, **attrs), f"$.processor.transforms[{index}].operation.attrs.{key}",
            text)


def test_gemma3_list_without_a_resize_or_with_patches(tmp_path):
    doc = gemma3_list()
    del doc["processor"]["transforms"][1]
    refused(tmp_path, doc, "$.processor.transforms", "no Resize transform: a channels-first (Permute3D) list")
    doc = copy.deepcopy(PROCESSOR)
    doc["processor"]["transforms"].append(gemma3_list()["processor"]["transforms"][4])
    refused(tmp_path, doc, "$.processor.transforms[6].operation.type", "Permute3D with PatchImage")


def phi3_list(index=None, **attrs):
    from tests.fixtures.genai_phi3v import PROCESSOR as PHI3

    doc = copy.deepcopy(PHI3)
    if index is not None:
        doc["processor"]["transforms"][index]["operation"].setdefault("attrs", {}).update(attrs)
    return doc


def test_genai_phi3v_list_reads_as_the_hd_keys(tmp_path):
    """onnxruntime-genai's Phi-3-vision list (DecodeImage BGR, ConvertRGB, Phi3ImageTransform):
    HD crops, CLIP normalisation, ort-extensions' fixed 16 crops."""
    config = load(tmp_path, phi3_list())
    assert config.hd and not config.fixed and config.image_processor_type == "Phi3VImageProcessor"
    assert config.num_crops == 16 and list(config.image_std) == [0.26862954, 0.26130258, 0.27577711]


@pytest.mark.parametrize("index, attrs, key, text", [
    (2, {"num_crops": 4}, "num_crops", "num_crops: ort-extensions' Phi3ImageTransform always uses 16"),
    (2, {"num_img_tokens": 256}, "num_img_tokens", "always uses 144"),
    (0, {"color_space": "RGB"}, "color_space", 'color_space string "RGB" with ConvertRGB: only "BGR" followed'),
])
def test_phi3v_values_onnxpipe_does_not_run(tmp_path, index, attrs, key, text):
    refused(tmp_path, phi3_list(index, **attrs), f"$.processor.transforms[{index}].operation.attrs.{key}",
            text)


def test_phi3v_list_with_another_step(tmp_path):
    doc = phi3_list()
    doc["processor"]["transforms"].append({"operation": {"type": "Rescale"}})
    refused(tmp_path, doc, "$.processor.transforms[3].operation.type",
            'transform "Rescale" with Phi3ImageTransform: the HD transform makes the pixels itself')


def phi4_list(index=None, **attrs):
    from tests.fixtures.genai_phi4mm import PROCESSOR as PHI4

    doc = copy.deepcopy(PHI4)
    if index is not None:
        doc["processor"]["transforms"][index]["operation"].setdefault("attrs", {}).update(attrs)
    return doc


def test_genai_phi4mm_list_reads_as_the_dynamic_hd_keys(tmp_path):
    """onnxruntime-genai's Phi-4-multimodal list: dynamic HD crops, mean and std 0.5."""
    config = load(tmp_path, phi4_list())
    assert config.dynamic_hd_crops and not config.hd and config.image_processor_type == "Phi4MultimodalImageProcessor"
    assert config.dynamic_hd == 4 and list(config.image_std) == [0.5, 0.5, 0.5]


@pytest.mark.parametrize("index, attrs, key, text", [
    (1, {"dyhd_base_resolution": 336}, "dyhd_base_resolution", "dyhd_base_resolution: only 448 is supported"),
    (4, {"interpolation": "LINEAR"}, "interpolation", 'interpolation: only "CUBIC" is supported'),
    (0, {"color_space": "BGR"}, "color_space", 'color_space: only "RGB" is supported before Phi4Vision'),
])
def test_phi4mm_values_onnxpipe_does_not_run(tmp_path, index, attrs, key, text):
    refused(tmp_path, phi4_list(index, **attrs), f"$.processor.transforms[{index}].operation.attrs.{key}", text)


def test_phi4mm_list_wiring_and_aligner(tmp_path):
    doc = phi4_list()
    del doc["processor"]["output_aligner"]
    refused(tmp_path, doc, "$.processor.output_aligner", 'expected "output_aligner": "phi4-vision-aligner"')
    doc = phi4_list()
    doc["processor"]["transforms"][4]["operation"]["inputs"] = [":0", "other:1"]
    refused(tmp_path, doc, "$.processor.transforms[4].operation.inputs",
            'inputs: expected [":0", "phi4_vision_dynamic_preprocess:1"] (the previous step\'s image, then '
            'the dynamic step mask), found [":0", "other:1"]')
    doc = phi4_list()
    del doc["processor"]["transforms"][2]
    refused(tmp_path, doc, "$.processor.transforms", "no Rescale transform: the Phi-4 list is")
