"""An onnxruntime-genai Phi-4-multimodal bundle with images (model.type "phi4mm": vision +
embedding + decoder sections, the speech block cleared; tests/fixtures/genai_phi4mm.py) loaded
unchanged: the crop layout, masks and token counts are ort-extensions', the pixels within one
8-bit level, the prompt ids onnxruntime-genai's, and the greedy tokens agree with its own, with
an image and without (margin rule, tests/agreement.py)."""

from __future__ import annotations

import array
import json
from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.errors import InputError
from onnxpipe.image import Image
from onnxpipe.image import phi4
from tests.agreement import assert_greedy_agrees
from tests.fixtures import tiny_models
from tests.fixtures.genai_phi4mm import DYNAMIC_HD, IMAGE_ID

TOLERANCE = 1e-3   # the same ONNX files as onnxruntime-genai: only the pixels could differ
NAMES = ["image", "tall", "large"]


@pytest.fixture(scope="module")
def bundle() -> Path:
    return tiny_models.ensure("genai_phi4mm")


@pytest.fixture(scope="module")
def expected(bundle) -> dict:
    return json.loads((bundle / "expected.json").read_text())


@pytest.fixture(scope="module")
def pipe(bundle):
    return onnxpipe.load(bundle)


def _image(bundle, expected, name: str = "image", rgb: bytes | None = None) -> Image:
    info = expected["images"][name]
    return Image(rgb if rgb is not None else (bundle / f"{name}.rgb").read_bytes(), info["width"], info["height"])


def _agrees(result, case: dict) -> None:
    assert len(result.tokens) == len(case["greedy_tokens"])
    assert_greedy_agrees(result.tokens, case["greedy_tokens"], case["margins"], TOLERANCE)


def test_bundle_is_genai_only(bundle):
    assert (bundle / "genai_config.json").is_file() and not (bundle / "pipeline.json").exists()


@pytest.mark.parametrize("name", NAMES)
def test_layout_masks_and_token_counts_follow_ort_extensions(expected, name):
    """A wide image padded at the right, a tall one at the bottom, a large one fitted to the
    closest grid of at most dynamic_hd crops; masks and counts exactly ort-extensions'."""
    info = expected["images"][name]
    lay = phi4.layout(info["height"], info["width"], DYNAMIC_HD)
    assert [lay.height + lay.pad_h, lay.width + lay.pad_w] == info["image_sizes"]
    assert [1, 1 + lay.rows * lay.cols, phi4.MASK, phi4.MASK] == info["mask_shape"]
    assert phi4.crop_masks(lay) == [float(v) for v in info["image_attention_mask"]]
    assert phi4.image_tokens(lay) == expected["cases"][name]["input_ids"].count(IMAGE_ID)
    assert (lay.pad_w > 0, lay.pad_h > 0) == {"image": (True, False), "tall": (False, True),
                                              "large": (False, True)}[name]


@pytest.mark.parametrize("name", NAMES)
def test_pixels_are_ort_extensions_within_one_level(pipe, bundle, expected, name):
    """The global image (bicubic from the padded HD image) then the crops of the bilinear
    resize, normalised with mean 0.5 and std 0.5; ort-extensions' kept every stride-th row and
    column. One 8-bit level is 1 / 255 / 0.5, about 0.008."""
    info = expected["images"][name]
    done = pipe.loaded.images.processor.process(_image(bundle, expected, name))
    assert done.pixel_values[1] == tuple(info["pixel_shape"])
    assert list(done.hd_size) == info["image_sizes"]
    assert done.masks[1] == tuple(info["mask_shape"])
    side, step = info["pixel_shape"][-1], info["stride"]
    ours = [v for row, v in enumerate(done.pixel_values[0])
            if (row // side) % step == 0 and (row % side) % step == 0]
    reference = array.array("f", (bundle / info["pixels"]).read_bytes())
    assert len(ours) == len(reference)
    assert max(abs(a - b) for a, b in zip(ours, reference)) <= 1 / 255 / 0.5 + 1e-4


@pytest.mark.parametrize("name", NAMES)
def test_image_prompt_gives_the_genai_ids_and_tokens(pipe, bundle, expected, name):
    """prompt= text with <|image_1|>: the tag becomes <|endoftext10|> (id 200010), expanded to
    the image's token count, as onnxruntime-genai's phi_multimodal_processor does."""
    case = expected["cases"][name]
    result = pipe.generate(prompt=case["prompt"], images=[_image(bundle, expected, name)],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.prompt_tokens == len(case["input_ids"])
    _agrees(result, case)


def test_text_prompt_feeds_no_image_features(pipe, expected):
    case = expected["cases"]["text"]
    result = pipe.generate(prompt=case["prompt"], max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.prompt_tokens == len(case["input_ids"])
    _agrees(result, case)


def test_genai_input_ids_run_as_given(pipe, bundle, expected):
    """The ids onnxruntime-genai's processor made (already expanded) run as the prompt text does."""
    case = expected["cases"]["image"]
    result = pipe.generate(input_ids=case["input_ids"], images=[_image(bundle, expected)],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    _agrees(result, case)


def test_the_image_decides_the_tokens(pipe, bundle, expected):
    """The same image darkened changes the tokens: the agreement above needs the features at
    the image tokens."""
    case = expected["cases"]["image"]
    dark = bytes(b // 4 for b in (bundle / "image.rgb").read_bytes())
    result = pipe.generate(prompt=case["prompt"], images=[_image(bundle, expected, rgb=dark)],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.tokens != case["greedy_tokens"]


def test_image_tags_must_match_the_images(pipe, bundle, expected):
    with pytest.raises(InputError, match=r"0 image token\(s\) \(id 200010\) for 1 image\(s\)"):
        pipe.generate(prompt="<|user|>ab cd", images=[_image(bundle, expected)], max_new_tokens=1)
    with pytest.raises(InputError, match=r"1 image token\(s\) \(id 200010\) but no image was given"):
        pipe.generate(prompt="<|user|><|image_1|>ab", max_new_tokens=1)


def test_extreme_aspect_ratios_are_refused(pipe):
    with pytest.raises(InputError, match=r"image of 1200x8: the aspect ratio is too extreme"):
        pipe.generate(prompt="<|image_1|>", images=[Image(bytes(1200 * 8 * 3), 1200, 8)], max_new_tokens=1)
