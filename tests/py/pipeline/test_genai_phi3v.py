"""An onnxruntime-genai Phi-3-vision bundle (model.type "phi3v": vision + embedding + decoder
sections, tests/fixtures/genai_phi3v.py) loaded unchanged: the HD crops are ort-extensions'
within two 8-bit levels, the prompt ids onnxruntime-genai's, and the greedy tokens agree with
its own, with an image and without (margin rule, tests/agreement.py)."""

from __future__ import annotations

import array
import json
from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.errors import InputError
from onnxpipe.image import Image
from onnxpipe.image.processor import hd_size, hd_tokens
from tests.agreement import assert_greedy_agrees
from tests.fixtures import tiny_models

TOLERANCE = 1e-3   # the same ONNX files as onnxruntime-genai: only the pixels could differ


@pytest.fixture(scope="module")
def bundle() -> Path:
    return tiny_models.ensure("genai_phi3v")


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


@pytest.mark.parametrize("name", ["image", "tall"])
def test_hd_sizes_and_token_counts_follow_ort_extensions(expected, name):
    """A wide image is padded on its height, a tall one on its width (1008 x 1344, 1344 x 1008)."""
    info = expected["images"][name]
    (new_h, new_w), (top, bottom, left, right) = hd_size(info["height"], info["width"], 16)
    assert [new_h + top + bottom, new_w + left + right] == info["image_sizes"]
    assert (top + bottom > 0) == (name == "image") and (left + right > 0) == (name == "tall")
    assert hd_tokens(*info["image_sizes"]) == expected["cases"][name]["input_ids"].count(-1)


@pytest.mark.parametrize("name", ["image", "tall"])
def test_pixels_are_ort_extensions_within_two_levels(pipe, bundle, expected, name):
    """The global image (bicubic from the padded HD image), the crops of the bilinear resize,
    CLIP-normalised, then zero crops; ort-extensions' kept every stride-th row and column. One
    8-bit level is 1 / 255 / std, about 0.015."""
    info = expected["images"][name]
    done = pipe.loaded.images.processor.process(_image(bundle, expected, name))
    assert done.pixel_values[1] == tuple(info["pixel_shape"])
    assert list(done.hd_size) == info["image_sizes"]
    side, step = info["pixel_shape"][-1], info["stride"]
    ours = [v for row, v in enumerate(done.pixel_values[0])
            if (row // side) % step == 0 and (row % side) % step == 0]
    reference = array.array("f", (bundle / info["pixels"]).read_bytes())
    assert len(ours) == len(reference)
    assert max(abs(a - b) for a, b in zip(ours, reference)) <= 2 / 255 / 0.26 + 1e-4


@pytest.mark.parametrize("name", ["image", "tall"])
def test_image_prompt_gives_the_genai_ids_and_tokens(pipe, bundle, expected, name):
    """prompt= text with <|image_1|>: the pieces around the tag tokenized apart and the tag
    expanded to the image's count of -1 ids, as onnxruntime-genai's phi_image_processor does."""
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


def test_the_image_decides_the_tokens(pipe, bundle, expected):
    """The same image darkened changes the tokens: the agreement above needs the features at
    the image tokens (this tiny model reads an image's overall level, not its layout)."""
    case = expected["cases"]["image"]
    dark = bytes(b // 4 for b in (bundle / "image.rgb").read_bytes())
    result = pipe.generate(prompt=case["prompt"], images=[_image(bundle, expected, rgb=dark)],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.tokens != case["greedy_tokens"]


def test_image_tags_must_match_the_images(pipe, bundle, expected):
    with pytest.raises(InputError, match=r"image tags \[\] for 1 image\(s\): put <\|image_1\|>"):
        pipe.generate(prompt="<s>ab cd", images=[_image(bundle, expected)], max_new_tokens=1)
    with pytest.raises(InputError, match=r"image tags \['<\|image_1\|>'\] for 0 image\(s\)"):
        pipe.generate(prompt="<s><|image_1|>ab", max_new_tokens=1)


def test_ids_without_tags_are_refused_with_images(pipe, bundle, expected):
    ids = [i for i in expected["cases"]["text"]["input_ids"]]
    with pytest.raises(InputError, match=r"0 image placeholder\(s\) \(id -1\) for 1 image\(s\): give the "
                                         r"prompt as text with <\|image_1\|>"):
        pipe.generate(input_ids=ids, images=[_image(bundle, expected)], max_new_tokens=1)
