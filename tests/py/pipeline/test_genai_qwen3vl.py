"""onnxruntime-genai Qwen3-VL, Qwen3.5 and Qwen3.5-MoE bundles (model.types "qwen3_vl", "qwen3_5" and
"qwen3_5_moe": vision +
embedding + decoder sections, tests/fixtures/genai_qwen3vl.py) loaded unchanged: greedy tokens
agree with onnxruntime-genai 0.18's, with an image and without (margin rule, tests/agreement.py).
The translation is qwen2_5_vl's; what differs is in the files: 16-pixel patches and mean/std
0.5 in the processor file, the interleaved mRoPE layout inside the decoder graph (Qwen3.5: and
the conv / recurrent state of its Gated DeltaNet layer, as for its text-only bundles; Qwen3.5-MoE:
and the builder's com.microsoft MoE nodes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.image import Image
from onnxpipe.image.files import read_image
from tests.agreement import assert_greedy_agrees
from tests.fixtures import tiny_models
from tests.fixtures.genai_qwen3vl import IMAGE

TOLERANCE = 1e-3   # the same ONNX files as onnxruntime-genai: only feeds and positions could differ


@pytest.fixture(scope="module", params=["genai_qwen3vl", "genai_qwen35_vl", "genai_qwen35_moe_vl"])
def bundle(request) -> Path:
    return tiny_models.ensure(request.param)


@pytest.fixture(scope="module")
def expected(bundle) -> dict:
    return json.loads((bundle / "expected.json").read_text())


@pytest.fixture(scope="module")
def pipe(bundle):
    return onnxpipe.load(bundle)


def _image(bundle, expected) -> Image:
    info = expected["image"]
    return Image((bundle / "image.rgb").read_bytes(), info["width"], info["height"])


def _agrees(result, case: dict) -> None:
    assert len(result.tokens) == len(case["greedy_tokens"])
    assert_greedy_agrees(result.tokens, case["greedy_tokens"], case["margins"], TOLERANCE)


def test_bundle_is_genai_only(bundle):
    assert (bundle / "genai_config.json").is_file() and not (bundle / "pipeline.json").exists()
    kind = {"genai_qwen3vl": "qwen3_vl", "genai_qwen35_vl": "qwen3_5",
            "genai_qwen35_moe_vl": "qwen3_5_moe"}[bundle.name]
    assert json.loads((bundle / "genai_config.json").read_text())["model"]["type"] == kind


def test_image_prompt_gives_the_genai_tokens(pipe, bundle, expected):
    case = expected["cases"]["image"]   # ids as onnxruntime-genai's processor expanded them
    assert case["input_ids"].count(IMAGE) == 6   # a 64 x 96 image: 4 x 6 patches of 16, merged 2 x 2
    result = pipe.generate(input_ids=case["input_ids"], images=[_image(bundle, expected)],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    _agrees(result, case)


def test_prompt_text_and_png_give_the_genai_tokens(pipe, bundle, expected):
    """The path onnxruntime-genai takes: the prompt text (one <|image_pad|>, expanded to the grid)
    and the PNG file, decoded and cut into 16-pixel patch rows by onnxpipe's image graph."""
    case = expected["cases"]["image"]
    image = read_image(str(bundle / expected["image"]["file"]))
    result = pipe.generate(prompt=case["prompt"], images=[image],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.prompt_tokens == len(case["input_ids"])
    _agrees(result, case)


def test_text_prompt_feeds_no_image_features(pipe, expected):
    case = expected["cases"]["text"]
    result = pipe.generate(input_ids=case["input_ids"], max_new_tokens=expected["max_new_tokens"],
                           do_sample=False)
    _agrees(result, case)


def test_the_image_decides_the_tokens(pipe, bundle, expected):
    """The same image upside down changes the tokens: the agreement above needs the features."""
    case, info = expected["cases"]["image"], expected["image"]
    rgb = (bundle / "image.rgb").read_bytes()
    row = info["width"] * 3
    flipped = b"".join(rgb[i:i + row] for i in range(len(rgb) - row, -1, -row))
    image = Image(flipped, info["width"], info["height"])
    result = pipe.generate(input_ids=case["input_ids"], images=[image],
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.tokens != case["greedy_tokens"]


def test_the_interleaved_layout_decides_the_tokens(bundle, expected, tmp_path):
    """The same decoder with the sectioned mRoPE layout (Qwen2.5-VL's, mrope_layout 0) gives other
    tokens: agreeing above (and in the browser) needs the runtime to honour the interleaved one."""
    import shutil

    import onnx

    dest = tmp_path / "bundle"
    shutil.copytree(bundle, dest)
    model = onnx.load(str(dest / "model.onnx"))
    layouts = [a for n in model.graph.node if n.op_type == "MRotaryEmbedding" for a in n.attribute
               if a.name == "mrope_layout"]
    assert layouts and all(a.i == 1 for a in layouts)
    for a in layouts:
        a.i = 0
    onnx.save(model, str(dest / "model.onnx"), save_as_external_data=True, location="model.onnx.data")
    case = expected["cases"]["image"]
    result = onnxpipe.load(dest).generate(input_ids=case["input_ids"], images=[_image(bundle, expected)],
                                          max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.tokens != case["greedy_tokens"]
