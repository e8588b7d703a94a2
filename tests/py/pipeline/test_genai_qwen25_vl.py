"""An onnxruntime-genai Qwen2.5-VL bundle (model.type "qwen2_5_vl": vision + embedding + decoder
sections, tests/fixtures/genai_qwen25_vl.py) loaded unchanged: greedy tokens agree with
onnxruntime-genai's, with an image and without (margin rule, tests/agreement.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.errors import ConfigError, InputError
from onnxpipe.image import Image
from tests.agreement import assert_greedy_agrees
from tests.fixtures import tiny_models
from tests.fixtures.genai_qwen25_vl import IMAGE

TOLERANCE = 1e-3   # the same ONNX files as onnxruntime-genai: only feeds and positions could differ


@pytest.fixture(scope="module")
def bundle() -> Path:
    return tiny_models.ensure("genai_qwen25_vl")


@pytest.fixture(scope="module")
def expected(bundle) -> dict:
    return json.loads((bundle / "expected.json").read_text())


@pytest.fixture(scope="module")
def pipe(bundle):
    return onnxpipe.load(bundle)


def _image(bundle, expected) -> Image:
    info = expected["image"]
    return Image((bundle / info["file"].replace(".png", ".rgb")).read_bytes(), info["width"], info["height"])


def _agrees(result, case: dict) -> None:
    assert len(result.tokens) == len(case["greedy_tokens"])
    assert_greedy_agrees(result.tokens, case["greedy_tokens"], case["margins"], TOLERANCE)


def test_bundle_is_genai_only(bundle):
    assert (bundle / "genai_config.json").is_file() and not (bundle / "pipeline.json").exists()


def test_image_prompt_gives_the_genai_tokens(pipe, bundle, expected):
    case = expected["cases"]["image"]   # ids as onnxruntime-genai's processor expanded them
    result = pipe.generate(input_ids=case["input_ids"], images=[_image(bundle, expected)],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    _agrees(result, case)


def test_one_image_token_is_expanded_to_the_grid(pipe, bundle, expected):
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
    """Another image (the same one upside down) changes the tokens: the agreement above needs
    the features at the image tokens."""
    case, info = expected["cases"]["image"], expected["image"]
    rgb = (bundle / "image.rgb").read_bytes()
    row = info["width"] * 3
    flipped = b"".join(rgb[i:i + row] for i in range(len(rgb) - row, -1, -row))
    result = pipe.generate(input_ids=case["input_ids"], images=[Image(flipped, info["width"], info["height"])],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.tokens != case["greedy_tokens"]


def test_fed_rows_need_fixed_trailing_dims(bundle, tmp_path):
    """The [0, hidden] feed of a run without images needs hidden from the session: a symbolic
    one is refused at load, naming the session and input."""
    import shutil

    import onnx

    dest = tmp_path / "bundle"
    shutil.copytree(bundle, dest)
    model = onnx.load(str(dest / "embedding.onnx"))
    dim = next(i for i in model.graph.input if i.name == "image_features").type.tensor_type.shape.dim[1]
    dim.dim_param = "hidden"
    onnx.save(model, str(dest / "embedding.onnx"))
    with pytest.raises(ConfigError, match='input "image_features" of session "embedding" takes the rows, '
                                          "so it needs the shape \\[rows, fixed dims...\\]"):
        onnxpipe.load(dest)


def test_fara_runs_as_qwen25_vl(bundle, expected, tmp_path):
    """model.type "fara" (genai's Qwen-VL family: Qwen2.5-VL's decoder, vision state, positions and
    processor): the same files under that type; onnxruntime-genai 0.18 is run on the copy here,
    with the image and without, and onnxpipe gives its tokens."""
    import shutil

    from onnxpipe.image.files import read_image
    from tests.fixtures.genai_qwen25_vl import _genai_greedy

    fara = shutil.copytree(bundle, tmp_path / "fara")
    cfg = json.loads((fara / "genai_config.json").read_text())
    cfg["model"]["type"] = "fara"
    (fara / "genai_config.json").write_text(json.dumps(cfg))
    pipe = onnxpipe.load(fara)
    for name, image in (("image", fara / expected["image"]["file"]), ("text", None)):
        case = expected["cases"][name]
        ids, tokens = _genai_greedy(fara, case["prompt"], image)
        # genai's own run of the same graphs under qwen2_5_vl: the margins recorded there are this run's
        assert (ids, tokens) == (case["input_ids"], case["greedy_tokens"])
        result = pipe.generate(prompt=case["prompt"], images=[read_image(str(image))] if image else None,
                               max_new_tokens=expected["max_new_tokens"], do_sample=False)
        assert result.prompt_tokens == len(ids)
        _agrees(result, {"greedy_tokens": tokens, "margins": case["margins"]})
