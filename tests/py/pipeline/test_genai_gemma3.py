"""An onnxruntime-genai Gemma 3 bundle (model.type "gemma3": vision + embedding + decoder
sections, tests/fixtures/genai_gemma3.py) loaded unchanged: greedy tokens agree with
onnxruntime-genai's, with an image and without (margin rule, tests/agreement.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.errors import InputError
from onnxpipe.image import Image
from tests.agreement import assert_greedy_agrees
from tests.fixtures import tiny_models
from tests.fixtures.genai_gemma3 import IMAGE, TOKENS_PER_IMAGE

TOLERANCE = 1e-3   # the same ONNX files as onnxruntime-genai: only feeds and pixels could differ


@pytest.fixture(scope="module")
def bundle() -> Path:
    return tiny_models.ensure("genai_gemma3")


@pytest.fixture(scope="module")
def expected(bundle) -> dict:
    return json.loads((bundle / "expected.json").read_text())


@pytest.fixture(scope="module")
def pipe(bundle):
    return onnxpipe.load(bundle)


def _rgb(bundle) -> bytes:
    return (bundle / "image.rgb").read_bytes()


def _image(bundle, expected, rgb: bytes | None = None) -> Image:
    info = expected["image"]
    return Image(rgb if rgb is not None else _rgb(bundle), info["width"], info["height"])


def _agrees(result, case: dict) -> None:
    assert len(result.tokens) == len(case["greedy_tokens"])
    assert_greedy_agrees(result.tokens, case["greedy_tokens"], case["margins"], TOLERANCE)


def test_bundle_is_genai_only(bundle, expected):
    assert (bundle / "genai_config.json").is_file() and not (bundle / "pipeline.json").exists()
    assert expected["channels"] == "RGB"   # ort-extensions hands the vision session R, G, B


def test_image_prompt_gives_the_genai_tokens(pipe, bundle, expected):
    case = expected["cases"]["image"]   # ids as onnxruntime-genai's processor expanded them
    assert case["input_ids"].count(IMAGE) == TOKENS_PER_IMAGE
    result = pipe.generate(input_ids=case["input_ids"], images=[_image(bundle, expected)],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    _agrees(result, case)


def test_one_soft_token_is_expanded_to_256(pipe, bundle, expected):
    case = expected["cases"]["image"]
    ids = [i for k, i in enumerate(case["input_ids"]) if i != IMAGE or case["input_ids"][k - 1] != IMAGE]
    assert ids.count(IMAGE) == 1
    result = pipe.generate(input_ids=ids, images=[_image(bundle, expected)],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    _agrees(result, case)
    assert result.prompt_tokens == len(case["input_ids"])


def test_text_prompt_feeds_no_image_features(pipe, expected):
    case = expected["cases"]["text"]
    result = pipe.generate(input_ids=case["input_ids"], max_new_tokens=expected["max_new_tokens"],
                           do_sample=False)
    _agrees(result, case)


def test_image_tokens_without_an_image(pipe, expected):
    with pytest.raises(InputError, match=f"image token\\(s\\) \\(id {IMAGE}\\) but no image was given"):
        pipe.generate(input_ids=expected["cases"]["image"]["input_ids"], max_new_tokens=2)


def test_the_image_decides_the_tokens(pipe, bundle, expected):
    """The same image with its colours inverted changes the tokens: the agreement above needs
    the features at the soft tokens."""
    case = expected["cases"]["image"]
    inverted = bytes(255 - b for b in _rgb(bundle))
    result = pipe.generate(input_ids=case["input_ids"], images=[_image(bundle, expected, inverted)],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.tokens != case["greedy_tokens"]


def test_an_image_of_another_size_is_resized_as_genai_does(pipe, bundle, expected):
    """A 96x40 image is resized to the processor file's fixed 64x64 (bicubic, antialiased, the
    horizontal pass first, as ort-extensions' vendored Pillow resample): its pixels are
    onnxruntime-genai's within one 8-bit level, and the tokens are genai's."""
    import array

    info, case = expected["other"], expected["cases"]["other"]
    image = Image((bundle / "other.rgb").read_bytes(), info["width"], info["height"])
    pixels = pipe.loaded.images.processor.process(image).pixel_values
    assert pixels[1] == (1, 3, 64, 64)
    reference = array.array("f", (bundle / info["pixels"]).read_bytes())
    assert max(abs(a - b) for a, b in zip(pixels[0], reference)) <= 2 / 255 + 1e-6
    result = pipe.generate(input_ids=case["input_ids"], images=[image],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    _agrees(result, case)


def test_text_prompt_start_of_image_is_expanded_as_genai_does(pipe, bundle, expected):
    """generate(prompt=...) with an image: each <start_of_image> becomes onnxruntime-genai's
    "\\n\\n<start_of_image>" + 256 soft tokens + "<end_of_image>\\n\\n" before tokenizing, so the
    prompt ids (and tokens) are genai's."""
    case = expected["cases"]["image"]
    result = pipe.generate(prompt=case["prompt"], images=[_image(bundle, expected)],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.prompt_tokens == len(case["input_ids"])
    _agrees(result, case)
    with pytest.raises(InputError, match="the prompt has 0 <start_of_image> for 1 image"):
        pipe.generate(prompt="<bos>ab cd", images=[_image(bundle, expected)], max_new_tokens=1)


def test_expected_outputs_know_the_pixels_are_rank_4(bundle, tmp_path):
    """A pipeline.json of the translated bundle: expected_outputs checks pixel_values as the
    [1, 3, h, w] it is (rank 4), not Qwen2-VL's rows."""
    import shutil

    from onnxpipe.config import genai_v1
    from onnxpipe.errors import ConfigError

    dest = tmp_path / "bundle"
    shutil.copytree(bundle, dest)
    doc = genai_v1.translate(json.loads((dest / "genai_config.json").read_text()), str(dest / "genai_config.json"))
    for rank in (4, 2):
        doc["preprocessing"]["image"]["expected_outputs"] = {"pixel_values": {"rank": rank, "dtype": "float32"}}
        (dest / "pipeline.json").write_text(json.dumps(doc))
        if rank == 4:
            onnxpipe.load(dest)
            continue
        with pytest.raises(ConfigError, match='makes "pixel_values" with rank 4, not 2'):
            onnxpipe.load(dest)
