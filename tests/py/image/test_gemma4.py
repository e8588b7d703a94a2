"""Gemma 4's image rules (image/gemma4.py): the resized size against transformers'
get_aspect_ratio_preserving_size, the processor file read and refused with its JSON path, the
prompt rule."""

import copy
import json

import pytest

from onnxpipe.errors import ConfigError, InputError
from onnxpipe.image import gemma4
from onnxpipe.image.config import load_processor_config
from tests.fixtures import tiny_models
from tests.fixtures.genai_gemma4 import PROCESSOR


def load(tmp_path, doc):
    (tmp_path / "processor_config.json").write_text(json.dumps(doc))
    return load_processor_config(str(tmp_path), "processor_config.json", "$.preprocessing.image.config")[0]


def test_target_size_is_transformers():
    """transformers' get_aspect_ratio_preserving_size, run when the fixture was built."""
    sizes = tiny_models.load_expected("genai_gemma4")["target_sizes"]
    assert len(sizes) == 21
    for height, width, patch, max_soft, *want in sizes:
        assert list(gemma4.target_size(height, width, patch, max_soft, 3)) == want, (height, width, patch)


def test_a_size_that_rounds_to_nothing_is_refused():
    """One soft token: a square's sides come to 3 patches less a float rounding, both 0
    (transformers raises "0 x 0" there)."""
    with pytest.raises(InputError, match="image of 17x17: the aspect ratio is too extreme"):
        gemma4.target_size(17, 17, 4, 1, 3)


def test_genai_gemma4_list_reads_as_gemma4_keys(tmp_path):
    config = load(tmp_path, PROCESSOR)
    assert config.gemma4 and not (config.fixed or config.hd)
    assert (config.patch_size, config.max_soft_tokens, config.pooling_kernel_size) == (4, 16, 3)
    assert (config.do_rescale, config.do_normalize) == (True, False)
    assert gemma4.soft_tokens(40, 96, config) == 12


@pytest.mark.parametrize("edit, path, text", [
    ({"pooling_kernel_size": 2}, "$.processor.transforms[1].operation.attrs.pooling_kernel_size",
     "pooling_kernel_size: only 3 is supported"),
    ({"max_soft_tokens": 0}, "$.processor.transforms[1].operation.attrs.max_soft_tokens",
     "expected a positive integer, found integer 0"),
    ({"crop": 1}, "$.processor.transforms[1].operation.attrs.crop",
     'unknown Gemma4ImageTransform attribute "crop"'),
])
def test_transform_attributes_are_refused_with_their_path(tmp_path, edit, path, text):
    doc = copy.deepcopy(PROCESSOR)
    doc["processor"]["transforms"][1]["operation"]["attrs"].update(edit)
    with pytest.raises(ConfigError) as info:
        load(tmp_path, doc)
    assert (info.value.file, info.value.path) == (str(tmp_path / "processor_config.json"), path)
    assert text in info.value.message


def test_other_transforms_beside_it_are_refused(tmp_path):
    doc = copy.deepcopy(PROCESSOR)
    doc["processor"]["transforms"].append({"operation": {"type": "Normalize", "attrs": {}}})
    with pytest.raises(ConfigError) as info:
        load(tmp_path, doc)
    assert info.value.path == "$.processor.transforms[2].operation.type"
    assert 'transform "Normalize" with Gemma4ImageTransform' in info.value.message


def test_prompt_rule():
    block = lambda n: f"\n\n<|image>{'<|image|>' * n}<image|>\n\n"   # noqa: E731
    assert gemma4.expand_prompt("a<|image>b<|image>c", [2, 1]) == "a" + block(2) + "b" + block(1) + "c"
    assert gemma4.expand_prompt("a<|image|>b", [3]) == "a" + block(3) + "b"
    assert gemma4.expand_prompt("ab", [1, 1]) == block(1) + " " + block(1) + " ab"
    assert gemma4.expand_prompt("", [2]) == block(2)
    with pytest.raises(InputError, match=r"the prompt has 1 <\|image> and 1 <\|image\|> for 2 image"):
        gemma4.expand_prompt("a<|image|>b<|image>c", [1, 2])
