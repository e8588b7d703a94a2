"""The image processor's JSON (transformers' preprocessor_config.json keys) as a typed object.

Six processors' rules are implemented: Qwen2-VL's (dynamic resolution: smart_resize, bicubic,
rescale, normalise, patchify), Gemma 3's (a fixed size.height x size.width, bicubic, rescale,
normalise, [1, 3, h, w] pixels, image_seq_length soft tokens per image), Phi-3-vision's
(HD crops, image/processor.py), Phi-4-multimodal's (dynamic HD crops with an attention
mask, image/phi4.py), Gemma 4's (image/gemma4.py) and onnxruntime-genai's Mistral 3 / Pixtral
one (image/pixtral.py); a file naming another
processor type, a key this runtime would ignore, or a value it can't honour is refused at load
with the file and JSON path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..config.load import read_json
from ..config.parse import parse_spec
from ..config.ranges import check_ranges
from ..config.registry import PROCESSOR_READERS
from ..config.schema import Range, spec
from ..errors import ConfigError
from . import ort_extensions

QWEN_TYPES = ("Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast", "Qwen2VLImageProcessorPil")
FIXED_TYPES = ("Gemma3ImageProcessor",)   # every image resized to size.height x size.width
HD_TYPES = ("Phi3VImageProcessor",)   # Phi-3-vision's HD crops (ort-extensions' Phi3ImageTransform)
DYNAMIC_HD_TYPES = ("Phi4MultimodalImageProcessor",)   # Phi-4-multimodal's crops (image/phi4.py)
GEMMA4_TYPES = ("Gemma4ImageProcessor",)   # Gemma 4's patches and soft tokens (image/gemma4.py)
# onnxruntime-genai's mistral3_image_processor (ort-extensions' Pixtral list, image/pixtral.py):
# not transformers' PixtralImageProcessor, whose resize differs
PIXTRAL_TYPES = ("Mistral3ImageProcessor",)
PROCESSOR_TYPES = QWEN_TYPES + FIXED_TYPES + HD_TYPES + DYNAMIC_HD_TYPES + GEMMA4_TYPES + PIXTRAL_TYPES
BICUBIC = 3   # PIL's code for the bicubic filter, the only one implemented
PIXELS = Range(1, 2 ** 26, "pixels")   # an image resized to the budget is allocated whole


@dataclass(frozen=True)
class PixelBudget:
    shortest_edge: int | None = spec(None, "fewest pixels (min_pixels)", range=PIXELS)
    longest_edge: int | None = spec(None, "most pixels (max_pixels)", range=PIXELS)
    min_pixels: int | None = spec(None, "fewest pixels (older spelling)", range=PIXELS)
    max_pixels: int | None = spec(None, "most pixels (older spelling)", range=PIXELS)
    height: int | None = spec(None, "fixed height (Gemma3ImageProcessor)", range=Range(1, 8192, "pixels"))
    width: int | None = spec(None, "fixed width (Gemma3ImageProcessor)", range=Range(1, 8192, "pixels"))


@dataclass(frozen=True)
class ImageProcessorConfig:
    image_processor_type: str = spec("Qwen2VLImageProcessor", "processor rules", choices=PROCESSOR_TYPES)
    processor_class: str | None = spec(None, "transformers' processor name (not used)")
    do_resize: bool = spec(True, "smart_resize to multiples of patch_size * merge_size")
    resample: int = spec(BICUBIC, "resize filter (PIL code; 3 = bicubic, the only one implemented)",
                         range=Range(0, 5, "a PIL filter code"))
    size: PixelBudget | None = spec(None, "pixel budget")
    min_pixels: int | None = spec(None, "fewest pixels after resizing", range=PIXELS)
    max_pixels: int | None = spec(None, "most pixels after resizing", range=PIXELS)
    do_rescale: bool = spec(True, "multiply by rescale_factor")
    rescale_factor: float = spec(1 / 255, "pixel scale", range=Range(0, 1000, "a scale", open_low=True))
    do_normalize: bool = spec(True, "(x - image_mean) / image_std per channel")
    image_mean: tuple[float, ...] = spec((0.48145466, 0.4578275, 0.40821073), "channel means",
                                         range=Range(-1000, 1000, "a channel value"))
    image_std: tuple[float, ...] = spec((0.26862954, 0.26130258, 0.27577711), "channel deviations",
                                        range=Range(-1000, 1000, "a channel value"))
    do_convert_rgb: bool = spec(True, "images are RGB (callers hand over RGB bytes)")
    patch_size: int = spec(14, "vision patch side, pixels", range=Range(1, 1024, "pixels"))
    temporal_patch_size: int = spec(2, "frames per patch (a still image is repeated)",
                                    range=Range(1, 16, "frames"))
    merge_size: int = spec(2, "patches merged per token along each axis", range=Range(1, 64, "patches"))
    image_seq_length: int = spec(256, "soft tokens per image (Gemma3ImageProcessor)",
                                 range=Range(1, 1 << 20, "tokens"))
    num_crops: int = spec(16, "most 336 x 336 crops per image (Phi3VImageProcessor)",
                          range=Range(16, 16, "crops (ort-extensions' fixed 16)"))
    dynamic_hd: int = spec(36, "most 448 x 448 crops per image (Phi4MultimodalImageProcessor)",
                           range=Range(1, 1024, "crops"))
    max_soft_tokens: int = spec(280, "most soft tokens per image (Gemma4ImageProcessor)",
                                range=Range(1, 1 << 16, "tokens"))
    pooling_kernel_size: int = spec(3, "patches pooled per soft token along each axis (Gemma4ImageProcessor)",
                                    range=Range(3, 3, "patches (the value checked against onnxruntime-genai)"))
    bgr: bool = spec(False, "channels handed over as B, G, R (Mistral3ImageProcessor: ort-extensions' "
                            "ConvertRGB after its RGB decode)")

    @property
    def fixed(self) -> bool:
        """Every image resized to one size (Gemma 3), not Qwen2-VL's patch rows."""
        return self.image_processor_type in FIXED_TYPES

    @property
    def hd(self) -> bool:
        """Phi-3-vision's HD crops: [1, num_crops + 1, 3, 336, 336] pixels and image_sizes."""
        return self.image_processor_type in HD_TYPES

    @property
    def dynamic_hd_crops(self) -> bool:
        """Phi-4-multimodal: [1, crops, 3, 448, 448] pixels, image_sizes and crop masks."""
        return self.image_processor_type in DYNAMIC_HD_TYPES

    @property
    def gemma4(self) -> bool:
        """Gemma 4's patches: [1, patches, p * p * 3] pixels and (column, row) positions."""
        return self.image_processor_type in GEMMA4_TYPES

    @property
    def pixtral(self) -> bool:
        """Mistral 3 / Pixtral: smart-resized [1, 3, h, w] pixels, [IMG] rows (image/pixtral.py)."""
        return self.image_processor_type in PIXTRAL_TYPES

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size

    @property
    def pixel_range(self) -> tuple[int, int]:
        """(min_pixels, max_pixels) as transformers resolves them: the top-level keys win."""
        size = self.size or PixelBudget()
        low = self.min_pixels or size.shortest_edge or size.min_pixels or 56 * 56
        high = self.max_pixels or size.longest_edge or size.max_pixels or 28 * 28 * 1280
        return low, high


def load_processor_config(bundle_dir: str, ref: str, where: str) -> tuple[ImageProcessorConfig, str]:
    """(the parsed file, its path); ``where`` is the JSON path of the reference to it."""
    path = os.path.join(bundle_dir, ref)
    if os.path.isabs(ref) or ".." in ref.replace("\\", "/").split("/"):
        raise ConfigError(f'expected a path inside the bundle, found "{ref}"', path=where)
    if not os.path.isfile(path):
        raise ConfigError(f'image processor config "{ref}" does not exist in {bundle_dir}', path=where)
    doc = read_json(path)
    if ort_extensions.is_transform_list(doc):   # onnxruntime-genai's vision.config_filename
        doc = ort_extensions.to_processor_keys(doc, path)
    config = parse_spec(ImageProcessorConfig, doc, path)
    _check(config, path)
    check_ranges(config, path)
    return config, path


def _check(config: ImageProcessorConfig, file: str) -> None:
    if config.fixed:
        size = config.size or PixelBudget()
        if size.height is None or size.width is None:
            raise ConfigError(f"{config.image_processor_type} resizes every image to one size: expected "
                              f'"size": {{"height": ..., "width": ...}}, found {size}', file=file, path="$.size")
    if config.bgr and not config.pixtral:
        raise ConfigError(f"bgr: only Mistral3ImageProcessor hands over B, G, R channels, not "
                          f"{config.image_processor_type}", file=file, path="$.bgr")
    if config.resample != BICUBIC:
        raise ConfigError(f"resample {config.resample} is not supported: only {BICUBIC} (bicubic) is implemented",
                          file=file, path="$.resample")
    for key in ("patch_size", "temporal_patch_size", "merge_size"):
        if getattr(config, key) <= 0:
            raise ConfigError(f"expected a positive integer, found {getattr(config, key)}", file=file,
                              path=f"$.{key}")
    for key in ("image_mean", "image_std"):
        if len(getattr(config, key)) != 3:
            raise ConfigError(f"expected 3 values (R, G, B), found {len(getattr(config, key))}",
                              file=file, path=f"$.{key}")
    if any(v == 0 for v in config.image_std):
        raise ConfigError("a channel deviation of 0 divides by zero", file=file, path="$.image_std")
    low, high = config.pixel_range
    if not 0 < low <= high:
        raise ConfigError(f"expected 0 < min_pixels <= max_pixels, found {low} and {high}", file=file,
                          path="$.max_pixels")


PROCESSOR_READERS.register("image", load_processor_config)   # for translations in config/ (genai_mistral3.py)
