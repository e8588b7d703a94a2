"""An onnxruntime-genai Gemma 4 bundle (model.type "gemma4": vision + embedding + decoder
sections, tests/fixtures/genai_gemma4.py) loaded unchanged: greedy tokens agree with
onnxruntime-genai's, with one image, two, a resized one and without (margin rule,
tests/agreement.py); prompt text is expanded as genai's processor does."""

from __future__ import annotations

import array
import json
import shutil
from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.errors import ConfigError, InputError
from onnxpipe.image import Image
from tests.agreement import assert_greedy_agrees
from tests.fixtures import tiny_models
from tests.fixtures.genai_gemma4 import IMAGE

TOLERANCE = 1e-3   # the same ONNX files as onnxruntime-genai: only feeds and pixels could differ


@pytest.fixture(scope="module")
def bundle() -> Path:
    return tiny_models.ensure("genai_gemma4")


@pytest.fixture(scope="module")
def expected(bundle) -> dict:
    return json.loads((bundle / "expected.json").read_text())


@pytest.fixture(scope="module")
def pipe(bundle):
    return onnxpipe.load(bundle)


def _image(bundle, info: dict, rgb: bytes | None = None) -> Image:
    rgb = rgb if rgb is not None else (bundle / info["file"].replace(".png", ".rgb")).read_bytes()
    return Image(rgb, info["width"], info["height"])


def _run(pipe, expected, case: dict, images=None, **kw):
    result = pipe.generate(images=images, max_new_tokens=expected["max_new_tokens"], do_sample=False, **kw)
    assert len(result.tokens) == len(case["greedy_tokens"])
    assert_greedy_agrees(result.tokens, case["greedy_tokens"], case["margins"], TOLERANCE)
    return result


def test_image_prompt_text_gives_the_genai_ids_and_tokens(pipe, bundle, expected):
    """<|image|> becomes "\\n\\n<|image>" + 16 <|image|> + "<image|>\\n\\n" (48x48: 144 patches,
    pooled 3 x 3) before tokenizing: the prompt ids and tokens are genai's."""
    case = expected["cases"]["image"]
    assert case["input_ids"].count(IMAGE) == 16
    result = _run(pipe, expected, case, [_image(bundle, expected["image"])], prompt=case["prompt"])
    assert result.prompt_tokens == len(case["input_ids"])
    _run(pipe, expected, case, [_image(bundle, expected["image"])], input_ids=case["input_ids"])


def test_text_prompt_feeds_no_image_features(pipe, expected):
    case = expected["cases"]["text"]
    _run(pipe, expected, case, prompt=case["prompt"])


def test_an_image_of_another_size_is_resized_as_genai_does(pipe, bundle, expected):
    """96x40 -> 72x24 (aspect kept within 16 soft tokens, sides multiples of 12): 108 patches,
    12 soft tokens; the float bicubic pixels are ort-extensions' within float error."""
    info, case = expected["other"], expected["cases"]["other"]
    image = _image(bundle, info)
    done = pipe.loaded.images.processor.process(image)
    assert done.pixel_values[1] == (1, 108, 48) and done.positions[1] == (1, 108, 2)
    assert done.positions[0][-2:] == [17, 5]   # (column, row) of the last patch
    reference = array.array("f", (bundle / info["pixels"]).read_bytes())
    assert len(reference) == len(done.pixel_values[0])
    assert max(abs(a - b) for a, b in zip(done.pixel_values[0], reference)) <= 1e-4
    result = _run(pipe, expected, case, [image], prompt=case["prompt"])
    assert result.prompt_tokens == len(case["input_ids"])


def test_two_images_in_one_prompt(pipe, bundle, expected):
    case, info = expected["cases"]["two"], expected["image"]
    rgb = (bundle / "image.rgb").read_bytes()
    images = [_image(bundle, info), _image(bundle, info, bytes(255 - b for b in rgb))]
    result = _run(pipe, expected, case, images, prompt=case["prompt"])
    assert result.prompt_tokens == len(case["input_ids"])


@pytest.mark.parametrize("form", ["<bos>ab<|image>cd", "<bos>ab cd", ""])
def test_prompt_forms_expand_as_genai_does(pipe, bundle, expected, form):
    """"<|image>" kept as the marker; no marker (or an empty prompt): one "<|image>" put before
    the text."""
    images = [_image(bundle, expected["image"])]
    text = pipe.loaded.images.expand_prompt(form, images)
    assert pipe.loaded.tokenizer().encode(text, add_special_tokens=True) == expected["prompt_forms"][form]


def test_marker_count_must_match_the_images(pipe, bundle, expected):
    images = [_image(bundle, expected["image"])]
    with pytest.raises(InputError, match=r"the prompt has 0 <\|image> and 2 <\|image\|> for 1 image"):
        pipe.generate(prompt="<bos>a<|image|>b<|image|>c", images=images, max_new_tokens=1)


def test_per_layer_inputs_are_refused_with_their_path(bundle, tmp_path):
    dest = tmp_path / "bundle"
    shutil.copytree(bundle, dest)
    cfg = json.loads((dest / "genai_config.json").read_text())
    cfg["model"]["embedding"]["outputs"]["per_layer_inputs"] = "per_layer_inputs"
    (dest / "genai_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=r"per-layer inputs .* not supported yet") as err:
        onnxpipe.load(dest)
    assert err.value.path == "$.model.embedding.outputs.per_layer_inputs"
    assert err.value.file.endswith("genai_config.json")
