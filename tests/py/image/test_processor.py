"""The image preprocessing graph against transformers' Qwen2VLImageProcessorPil (Pillow), the
processor the tiny Qwen2-VL fixture's oracle uses.

Tolerance: Pillow resamples in 8-bit fixed point one axis at a time; the graph does the same
passes in float (ONNX Resize, cubic a = -0.5, antialiased) and rounds to 8 bits after each.
When an axis grows, or the height shrinks while the width does not, the rows agree to within
one 8-bit level at under 1% of the values (fixed-point rounding at x.5; checked here); when both axes shrink Pillow 13 picks the pass order by a rule not reproduced,
and up to a few 8-bit levels differ at some pixels (bounded here).
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxpipe.backends.native import NativeBackend
from onnxpipe.image import Image, ImageProcessor
from onnxpipe.image.config import ImageProcessorConfig
from onnxpipe.image.resize import smart_resize
from onnxpipe.errors import InputError

PIL = pytest.importorskip("PIL.Image")
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)
CONFIG = ImageProcessorConfig(min_pixels=56 * 56, max_pixels=28 * 28 * 64)


def _reference(array: np.ndarray, config: ImageProcessorConfig):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    low, high = config.pixel_range
    proc = Qwen2VLImageProcessorPil(min_pixels=low, max_pixels=high, patch_size=config.patch_size,
                                    merge_size=config.merge_size, temporal_patch_size=config.temporal_patch_size,
                                    do_rescale=config.do_rescale, do_normalize=config.do_normalize)
    out = proc(images=[PIL.fromarray(array)], return_tensors="np")
    return out["pixel_values"], out["image_grid_thw"][0].tolist()


def _image(height: int, width: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    waves = [128 + 100 * np.sin(xx / 6 + c) * np.cos(yy / 5) for c in range(3)]
    return (np.stack(waves, -1) + rng.normal(0, 25, (height, width, 3))).clip(0, 255).astype(np.uint8)


def _levels(ours, ref) -> np.ndarray:
    """Differences in 8-bit levels (undoing the normalisation of the patch rows' channels)."""
    std = np.repeat(np.array(STD), 2 * 14 * 14)
    return np.abs(np.asarray(ours).reshape(ref.shape) - ref) * std * 255


@pytest.fixture(scope="module")
def processor():
    return ImageProcessor(NativeBackend(), CONFIG)


@pytest.mark.parametrize("height,width", [(40, 70), (100, 150), (56, 56), (29, 211), (150, 90)])
def test_rows_and_grid_equal_the_pillow_processor(processor, height, width):
    array = _image(height, width, height * width)
    ref, grid = _reference(array, CONFIG)
    got = processor.process(Image(array.tobytes(), width, height))
    assert list(got.grid) == grid
    assert got.pixel_values[1] == ref.shape
    levels = _levels(got.pixel_values[0], ref)
    # Pillow's 8-bit fixed-point rounding against float: a value at x.5 may land one level off
    assert levels.max() < 1.01 and (levels > 0.5).mean() < 0.01, (levels.max(), (levels > 0.5).mean())


@pytest.mark.parametrize("height,width", [(300, 200), (500, 420)])
def test_both_axes_shrinking_stays_within_a_few_levels(processor, height, width):
    array = _image(height, width, 7)
    ref, grid = _reference(array, CONFIG)
    got = processor.process(Image(array.tobytes(), width, height))
    assert list(got.grid) == grid
    levels = _levels(got.pixel_values[0], ref)
    assert levels.max() <= 8 and (levels > 0.5).mean() < 0.05, (levels.max(), (levels > 0.5).mean())


def test_without_rescale_and_normalise():
    config = ImageProcessorConfig(min_pixels=56 * 56, max_pixels=28 * 28 * 64, do_rescale=False,
                                  do_normalize=False)
    array = _image(60, 90, 3)
    ref, _ = _reference(array, config)
    got = ImageProcessor(NativeBackend(), config).process(Image(array.tobytes(), 90, 60))
    diff = np.abs(np.asarray(got.pixel_values[0]).reshape(ref.shape) - ref)
    assert diff.max() <= 1 and (diff > 0).mean() < 0.01


@pytest.mark.parametrize("size", [(10, 10), (37, 91), (1000, 333), (3136, 20)])
def test_smart_resize_equals_transformers(size):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize as reference

    assert smart_resize(*size, 28, 3136, 50176) == reference(*size, factor=28, min_pixels=3136, max_pixels=50176)


def test_bad_images_are_input_errors():
    with pytest.raises(InputError, match="expected 30 RGB bytes, found 29"):
        Image(b"x" * 29, 5, 2)
    with pytest.raises(InputError, match="width: expected a positive integer"):
        Image(b"", 0, 2)
    with pytest.raises(InputError, match="aspect ratio must be under 200"):
        smart_resize(1, 300, 28, 3136, 50176)
