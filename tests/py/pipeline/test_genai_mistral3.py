"""An onnxruntime-genai Mistral 3 bundle (model.type "mistral3": Pixtral vision + embedding +
decoder sections, tests/fixtures/genai_mistral3.py) loaded unchanged: greedy tokens agree with
onnxruntime-genai's, with an image and without (margin rule, tests/agreement.py)."""

from __future__ import annotations

import array
import json
import shutil
from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.errors import ConfigError, InputError
from onnxpipe.image import Image
from onnxpipe.image.pixtral import expand, image_tokens, target_size
from tests.agreement import assert_greedy_agrees
from tests.fixtures import tiny_models
from tests.fixtures.genai_mistral3 import IMG, IMG_BREAK, IMG_END

TOLERANCE = 1e-3   # the same ONNX files as onnxruntime-genai: only feeds and pixels could differ
INST = 3


@pytest.fixture(scope="module")
def bundle() -> Path:
    return tiny_models.ensure("genai_mistral3")


@pytest.fixture(scope="module")
def expected(bundle) -> dict:
    return json.loads((bundle / "expected.json").read_text())


@pytest.fixture(scope="module")
def pipe(bundle):
    return onnxpipe.load(bundle)


def _image(bundle, info: dict, rgb: bytes | None = None, name: str = "image") -> Image:
    return Image(rgb if rgb is not None else (bundle / f"{name}.rgb").read_bytes(), info["width"], info["height"])


def _agrees(result, case: dict) -> None:
    assert len(result.tokens) == len(case["greedy_tokens"])
    assert_greedy_agrees(result.tokens, case["greedy_tokens"], case["margins"], TOLERANCE)


def _run(pipe, expected, **kw):
    return pipe.generate(max_new_tokens=expected["max_new_tokens"], do_sample=False, **kw)


def test_bundle_is_genai_only(bundle, expected):
    assert (bundle / "genai_config.json").is_file() and not (bundle / "pipeline.json").exists()
    # ort-extensions' ConvertRGB swaps the RGB decode: the vision session gets B, G, R
    assert expected["channels"] == "BGR"


def test_image_prompt_gives_the_genai_tokens(pipe, bundle, expected):
    case = expected["cases"]["image"]   # ids as onnxruntime-genai's processor expanded them
    assert case["input_ids"].count(IMG) == 12 and case["input_ids"].count(IMG_BREAK) == 2
    result = _run(pipe, expected, input_ids=case["input_ids"], images=[_image(bundle, expected["image"])])
    _agrees(result, case)


def test_text_prompt_and_one_img_expand_as_genai_does(pipe, bundle, expected):
    """generate(prompt=...): the [IMG] of the text becomes genai's rows (3 x 4 here), so the
    prompt ids and the tokens are genai's; the same from ids holding one [IMG]."""
    case, image = expected["cases"]["image"], _image(bundle, expected["image"])
    result = _run(pipe, expected, prompt=case["prompt"], images=[image])
    assert result.prompt_tokens == len(case["input_ids"])
    _agrees(result, case)
    ids = [i for i in case["input_ids"] if i not in (IMG_BREAK, IMG_END)]
    one = [i for k, i in enumerate(ids) if i != IMG or ids[k - 1] != IMG]
    assert one.count(IMG) == 1
    _agrees(_run(pipe, expected, input_ids=one, images=[image]), case)


def test_text_prompt_feeds_no_image_features(pipe, expected):
    case = expected["cases"]["text"]
    _agrees(_run(pipe, expected, input_ids=case["input_ids"]), case)


def test_an_image_of_another_size_is_resized_as_genai_does(pipe, bundle, expected):
    """A 20x44 image: ort-extensions' smart_resize rounds 2.5 and 5.5 up (24x48, transformers'
    rule would give 16x48); the pixels are genai's within one 8-bit level, and so are the
    [IMG] rows and the tokens."""
    info, case = expected["other"], expected["cases"]["other"]
    image = _image(bundle, info, name="other")
    pixels = pipe.loaded.images.processor.process(image).pixel_values
    assert pixels[1] == tuple(case["pixel_shape"]) == (1, 3, 24, 48)
    reference = array.array("f", (bundle / info["pixels"]).read_bytes())
    assert max(abs(a - b) for a, b in zip(pixels[0], reference)) <= 1 / 255 / 0.26 + 1e-5
    result = _run(pipe, expected, prompt=case["prompt"], images=[image])
    assert result.prompt_tokens == len(case["input_ids"])
    _agrees(result, case)


def test_two_images_of_different_sizes(pipe, bundle, expected):
    """Two [IMG] in the prompt, a 24x32 and a 20x44 image: genai pads them into one batch and
    runs its vision session per image on the unpadded size, as the per-image loop here does."""
    case = expected["cases"]["two"]
    assert case["image_sizes"] == [[24, 32], [24, 48]]
    images = [_image(bundle, expected["image"]), _image(bundle, expected["other"], name="other")]
    result = _run(pipe, expected, prompt=case["prompt"], images=images)
    assert result.prompt_tokens == len(case["input_ids"])
    _agrees(result, case)


def test_the_image_decides_the_tokens(pipe, bundle, expected):
    case = expected["cases"]["image"]
    inverted = bytes(255 - b for b in (bundle / "image.rgb").read_bytes())
    result = _run(pipe, expected, input_ids=case["input_ids"],
                  images=[_image(bundle, expected["image"], inverted)])
    assert result.tokens != case["greedy_tokens"]


def test_prompt_rules():
    """genai's placement: each run of [IMG] is one image; images without one go after [INST]
    (first when there is none); expanded ids are kept; more runs than images are refused."""
    a, b = image_tokens(8, 16, 8, IMG, IMG_BREAK, IMG_END), image_tokens(16, 8, 8, IMG, IMG_BREAK, IMG_END)
    assert a == [IMG, IMG, IMG_END] and b == [IMG, IMG_BREAK, IMG, IMG_END]
    assert expand([1, IMG, IMG, 9, IMG], [a, b], IMG, IMG_BREAK, IMG_END, INST) == [1, *a, 9, *b]
    assert expand([1, INST, 9], [a], IMG, IMG_BREAK, IMG_END, INST) == [1, INST, *a, 9]
    assert expand([1, 9], [a], IMG, IMG_BREAK, IMG_END, None) == [*a, 1, 9]
    assert expand([1, *a, 9], [a], IMG, IMG_BREAK, IMG_END, INST) == [1, *a, 9]
    with pytest.raises(InputError, match="more runs of the image token"):
        expand([IMG, 9, IMG], [a], IMG, IMG_BREAK, IMG_END, INST)
    with pytest.raises(InputError, match="not the 1 image\\(s\\)' layout"):
        expand([1, *b, 9], [a], IMG, IMG_BREAK, IMG_END, INST)
    # ort-extensions' rounding: halves away from zero, the min_pixels branch truncated first
    assert target_size(20, 44, 8, 64, 4096) == (24, 48)
    assert target_size(3, 3, 8, 64, 4096) == (8, 8)
    assert target_size(9, 10, 8, 200, 4096) == (16, 16)


def _copy(bundle, tmp_path) -> Path:
    dest = tmp_path / "bundle"
    shutil.copytree(bundle, dest, ignore=shutil.ignore_patterns("*.rgb", "*.png", "*.f32"))
    return dest


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("change, file, path, message", [
    (lambda g: g["model"]["vision"].update(patch_size=8), "genai_config.json", "$.model.vision.patch_size",
     "patch_size \\* spatial_merge_size = 16 counts the \\[IMG\\] tokens, but processor_config.json "
     "resizes to multiples of 8"),
    (lambda g: g["model"].update(image_token_id=9), "genai_config.json", "$.model.image_token_id",
     "expected the \\[IMG\\] id of tokenizer.json \\(5\\), found integer 9"),
    (lambda g: g["model"]["vision"]["inputs"].update(image_sizes="image_sizes"), "genai_config.json",
     "$.model.vision.inputs.image_sizes", 'the key "image_sizes" in model.vision.inputs'),
    (lambda p: p["processor"]["transforms"][2]["operation"]["attrs"].update(smart_resize=0),
     "processor_config.json", "$.processor.transforms[2].operation.attrs.smart_resize",
     "smart_resize: only 1 is supported in the Pixtral list"),
    (lambda p: p["processor"]["transforms"].pop(5), "processor_config.json", "$.processor.transforms",
     "no Permute3D transform: the Pixtral list"),
    (lambda g: g["model"]["vision"].update(config_filename=None), "genai_config.json",
     "$.model.vision.config_filename", "expected the processor file's name \\(a non-empty string\\), found null"),
])
def test_what_genai_would_run_differently_is_refused(bundle, tmp_path, change, file, path, message):
    dest = _copy(bundle, tmp_path)
    _edit(dest / file, change)
    with pytest.raises(ConfigError, match=message) as info:
        onnxpipe.load(dest)
    assert Path(info.value.file).name == file and info.value.path == path


def test_a_pipeline_json_needs_the_row_markers(bundle, tmp_path):
    """The translated bundle as pipeline.json: the Mistral3ImageProcessor needs
    tokens.image_break (and image_end) to lay out the rows."""
    from onnxpipe.config import genai_v1

    dest = _copy(bundle, tmp_path)
    doc = genai_v1.translate(json.loads((dest / "genai_config.json").read_text()), str(dest / "genai_config.json"))
    assert {k: doc["tokens"]["extra"][k] for k in ("image_break", "image_end", "image_inst")} == \
        {"image_break": IMG_BREAK, "image_end": IMG_END, "image_inst": INST}
    del doc["tokens"]["extra"]["image_break"]
    (dest / "pipeline.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="ends each row of image tokens with a marker: expected "
                                          "tokens.image_break") as info:
        onnxpipe.load(dest)
    assert info.value.path == "$.tokens.image_break"
