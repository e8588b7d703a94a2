"""One RGB image -> Qwen2-VL's pixel rows and grid, by the graph of ``ops/image.py``.

The pixel work runs in the engine (onnxruntime natively, onnxruntime-web in the browser); only
the target size (``smart_resize``) and the shapes are computed here, in plain Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError
from ..ops.image import gemma4_graph, hd_graph, nchw_graph, patchify_graph
from . import gemma4, phi4, pixtral
from .config import ImageProcessorConfig
from .resize import smart_resize, vertical_first


# the most pixels an image may have (Pillow's decompression-bomb limit, ~268 MB of RGB): checked
# before anything of that size is decoded or run through the preprocessing graph
MAX_PIXELS = 1024 * 1024 * 1024 // 4 // 3


@dataclass(frozen=True)
class Image:
    """An RGB image: ``width * height * 3`` bytes, row by row (what a decoded PNG/JPEG holds)."""

    rgb: bytes | bytearray | memoryview
    width: int
    height: int

    def __post_init__(self) -> None:
        for key in ("width", "height"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InputError(f"image {key}: expected a positive integer, found {value!r}")
        check_size(self.width, self.height, "image")
        if not isinstance(self.rgb, (bytes, bytearray, memoryview)):
            raise InputError(f"image rgb: expected bytes (R, G, B per pixel), found {type(self.rgb).__name__}")
        # a memoryview's len() counts items, not bytes: only a flat run of single bytes is pixels
        if isinstance(self.rgb, memoryview) and (self.rgb.itemsize != 1 or not self.rgb.c_contiguous):
            raise InputError(f"image rgb: expected contiguous bytes, found a memoryview of format "
                             f"{self.rgb.format!r} (item size {self.rgb.itemsize})"
                             f"{'' if self.rgb.c_contiguous else ', not contiguous'}")
        found = self.rgb.nbytes if isinstance(self.rgb, memoryview) else len(self.rgb)
        if found != self.width * self.height * 3:
            raise InputError(f"image of {self.width}x{self.height}: expected {self.width * self.height * 3} "
                             f"RGB bytes, found {found}")


def check_size(width: int, height: int, what: str) -> None:
    """Refuse ``what`` (named in the error) when it has more than MAX_PIXELS pixels."""
    if width * height > MAX_PIXELS:
        raise InputError(f"{what} of {width}x{height}: too large, expected at most {MAX_PIXELS} pixels "
                         f"(found {width * height})")


@dataclass(frozen=True)
class ProcessedImage:
    pixel_values: tuple[list, tuple[int, int]]   # (flat float32 values, (patches, patch_dim))
    grid: tuple[int, int, int] | None            # (t, h, w) in patches; None for a fixed size
    hd_size: tuple[int, int] | None = None       # Phi-3-vision: the padded HD (height, width)
    masks: tuple[list, tuple] | None = None      # Phi-4-multimodal: image_attention_mask, its shape
    tokens: int | None = None                    # Phi-4-multimodal: image tokens in the prompt
    positions: tuple[list, tuple[int, int, int]] | None = None   # Gemma 4: (column, row) per patch


class ImageProcessor:
    def __init__(self, backend, config: ImageProcessorConfig, provider: str = "cpu"):
        self.backend = backend
        self.config = config
        self.provider = provider

    def target_size(self, height: int, width: int) -> tuple[int, int]:
        c = self.config
        if c.fixed:
            return c.size.height, c.size.width
        if c.gemma4:
            return gemma4.target_size(height, width, c.patch_size, c.max_soft_tokens, c.pooling_kernel_size)
        if c.pixtral:
            return pixtral.target_size(height, width, c.factor, *c.pixel_range)
        if c.do_resize:
            return smart_resize(height, width, c.factor, *c.pixel_range)
        if height % c.factor or width % c.factor:
            raise InputError(f"image of {width}x{height}: do_resize is off, so both sides must be "
                             f"multiples of patch_size * merge_size = {c.factor}")
        return height, width

    def process(self, image: Image) -> ProcessedImage:
        c, backend = self.config, self.backend
        height, width = self.target_size(image.height, image.width)
        resize = (height, width) != (image.height, image.width)
        if c.fixed or c.pixtral:   # Mistral 3: the target size is the image's own (image/pixtral.py)
            return self._nchw(image, height, width, resize)
        if c.hd:
            return self._hd(image)
        if c.dynamic_hd_crops:
            return self._dynamic_hd(image)
        if c.gemma4:
            return self._gemma4(image, height, width, resize)
        graph = patchify_graph(c.temporal_patch_size, resize,
                               resize and vertical_first(image.height, image.width, height, width),
                               c.rescale_factor if c.do_rescale else None,
                               tuple(c.image_mean) if c.do_normalize else None,
                               tuple(c.image_std) if c.do_normalize else None)
        session = backend.open_graph(graph, self.provider)
        p, m = c.patch_size, c.merge_size
        gh, gw = height // p, width // p
        rows = (gh * gw, 3 * c.temporal_patch_size * p * p)
        feeds = {"rgb": backend.tensor(memoryview(image.rgb), "uint8", (image.height, image.width, 3)),
                 "sizes": backend.tensor([1, 3, height, width], "int64", (4,)),
                 "blocks": backend.tensor([3, gh // m, m, p, gw // m, m, p], "int64", (7,)),
                 "rows": backend.tensor(list(rows), "int64", (2,))}
        out = backend.run(session, feeds, ["pixel_values"])["pixel_values"]
        values = backend.to_list(out)
        backend.dispose_many(list(feeds.values()) + [out])
        return ProcessedImage((values, rows), (1, gh, gw))

    def _nchw(self, image: Image, height: int, width: int, resize: bool) -> ProcessedImage:
        """Gemma 3 and Mistral 3: [1, 3, height, width] pixels. ort-extensions' resize (Pillow's
        ImagingResample, which it vendors) runs the horizontal pass first."""
        c, backend = self.config, self.backend
        graph = nchw_graph(resize, False, c.rescale_factor if c.do_rescale else None,
                           tuple(c.image_mean) if c.do_normalize else None,
                           tuple(c.image_std) if c.do_normalize else None, c.bgr)
        session = backend.open_graph(graph, self.provider)
        feeds = {"rgb": backend.tensor(memoryview(image.rgb), "uint8", (image.height, image.width, 3)),
                 "sizes": backend.tensor([1, 3, height, width], "int64", (4,))}
        out = backend.run(session, feeds, ["pixel_values"])["pixel_values"]
        values = backend.to_list(out)
        backend.dispose_many(list(feeds.values()) + [out])
        return ProcessedImage((values, (1, 3, height, width)), None)

    def _hd(self, image: Image) -> ProcessedImage:
        """Phi-3-vision: [1, num_crops + 1, 3, 336, 336] pixels and the HD size (ops/image.py's
        hd_graph); the sizes follow ort-extensions' hd_transform."""
        c, backend = self.config, self.backend
        (new_h, new_w), (top, bottom, left, right) = hd_size(image.height, image.width, c.num_crops)
        height, width = new_h + top + bottom, new_w + left + right
        m, n = height // HD_SIDE, width // HD_SIDE
        graph = hd_graph((new_h, new_w) != (image.height, image.width), tuple(c.image_mean),
                         tuple(c.image_std), c.num_crops, HD_SIDE)
        session = backend.open_graph(graph, self.provider)
        feeds = {"rgb": backend.tensor(memoryview(image.rgb), "uint8", (image.height, image.width, 3)),
                 "sizes": backend.tensor([1, 3, new_h, new_w], "int64", (4,)),
                 "pads": backend.tensor([0, 0, top, left, 0, 0, bottom, right], "int64", (8,)),
                 "blocks": backend.tensor([3, m, HD_SIDE, n, HD_SIDE], "int64", (5,)),
                 "cells": backend.tensor([m * n, 3, HD_SIDE, HD_SIDE], "int64", (4,)),
                 "fill": backend.tensor([0, 0, 0, 0, c.num_crops - m * n, 0, 0, 0], "int64", (8,))}
        out = backend.run(session, feeds, ["pixel_values"])["pixel_values"]
        values = backend.to_list(out)
        backend.dispose_many(list(feeds.values()) + [out])
        return ProcessedImage((values, (1, c.num_crops + 1, 3, HD_SIDE, HD_SIDE)), None, (height, width))


    def _dynamic_hd(self, image: Image) -> ProcessedImage:
        """Phi-4-multimodal: [1, 1 + rows * cols, 3, 448, 448] pixels (hd_graph, no zero crops),
        the padded size, the crop masks and the token count of image/phi4.py's layout."""
        c, backend = self.config, self.backend
        try:
            lay = phi4.layout(image.height, image.width, c.dynamic_hd)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        height, width, side, cells = lay.height + lay.pad_h, lay.width + lay.pad_w, phi4.SIDE, lay.rows * lay.cols
        graph = hd_graph((lay.height, lay.width) != (image.height, image.width), tuple(c.image_mean),
                         tuple(c.image_std), None, side, c.rescale_factor)
        session = backend.open_graph(graph, self.provider)
        feeds = {"rgb": backend.tensor(memoryview(image.rgb), "uint8", (image.height, image.width, 3)),
                 "sizes": backend.tensor([1, 3, lay.height, lay.width], "int64", (4,)),
                 "pads": backend.tensor([0, 0, 0, 0, 0, 0, lay.pad_h, lay.pad_w], "int64", (8,)),
                 "blocks": backend.tensor([3, lay.rows, side, lay.cols, side], "int64", (5,)),
                 "cells": backend.tensor([cells, 3, side, side], "int64", (4,)),
                 "fill": backend.tensor([0] * 8, "int64", (8,))}
        out = backend.run(session, feeds, ["pixel_values"])["pixel_values"]
        values = backend.to_list(out)
        backend.dispose_many(list(feeds.values()) + [out])
        return ProcessedImage((values, (1, cells + 1, 3, side, side)), None, (height, width),
                              (phi4.crop_masks(lay), (1, cells + 1, phi4.MASK, phi4.MASK)), phi4.image_tokens(lay))

    def _gemma4(self, image: Image, height: int, width: int, resize: bool) -> ProcessedImage:
        """Gemma 4: [1, patches, p * p * 3] pixels (ops/image.py's gemma4_graph) and
        [1, patches, 2] (column, row) positions."""
        backend, p = self.backend, self.config.patch_size
        session = backend.open_graph(gemma4_graph(resize), self.provider)
        patches = (height // p) * (width // p)
        feeds = {"rgb": backend.tensor(memoryview(image.rgb), "uint8", (image.height, image.width, 3)),
                 "sizes": backend.tensor([1, 3, height, width], "int64", (4,)),
                 "blocks": backend.tensor([3, height // p, p, width // p, p], "int64", (5,)),
                 "rows": backend.tensor([1, patches, p * p * 3], "int64", (3,))}
        out = backend.run(session, feeds, ["pixel_values"])["pixel_values"]
        values = backend.to_list(out)
        backend.dispose_many(list(feeds.values()) + [out])
        return ProcessedImage((values, (1, patches, p * p * 3)), None,
                              positions=(gemma4.positions(height, width, p), (1, patches, 2)))


HD_SIDE = 336   # ort-extensions' Phi-3 crop side


def hd_size(height: int, width: int, crops: int) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
    """((resized height, width), (top, bottom, left, right) white padding) of ort-extensions'
    hd_transform: the long side scale * 336 with the most scale whose crops fit ``crops``, the
    short side kept in proportion (truncated), then padded to a multiple of 336 (centred)."""
    ratio = width / height if width >= height else height / width
    scale = 1
    while scale * math.ceil(scale / ratio) <= crops:
        scale += 1
    scale -= 1
    long_side = scale * HD_SIDE
    short = int(long_side / ratio)
    new_h, new_w = (short, long_side) if width >= height else (long_side, short)
    if width >= height:
        tar = math.ceil(new_h / HD_SIDE) * HD_SIDE
        top = int((tar - new_h) / 2)
        return (new_h, new_w), (top, tar - new_h - top, 0, 0)
    tar = math.ceil(new_w / HD_SIDE) * HD_SIDE
    left = int((tar - new_w) / 2)
    return (new_h, new_w), (0, 0, left, tar - new_w - left)


def hd_tokens(height: int, width: int) -> int:
    """Image tokens of a padded HD size (ort-extensions' num_img_tokens): 144 per crop and for
    the global image, 12 newlines per crop row and the global image's, one separator."""
    m, n = height // HD_SIDE, width // HD_SIDE
    return (m * n + 1) * 144 + 1 + (m + 1) * 12
