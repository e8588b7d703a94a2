"""Image files -> Image (RGB bytes), natively. Decoding needs Pillow; the runtime never does
(the browser decodes with createImageBitmap and hands over RGB bytes)."""

from __future__ import annotations

import os
import warnings

from ..errors import InputError
from .processor import MAX_PIXELS, Image, check_size


def read_image(path: str) -> Image:
    """A PNG, JPEG or any format Pillow reads, converted to RGB; its size is checked from the
    header, before the pixels are decoded."""
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"image path: expected a file path (str), found {type(path).__name__}")
    try:
        from PIL import Image as PILImage
    except ImportError:
        raise InputError(f"{path}: decoding image files needs Pillow (pip install pillow); the API "
                         f"also takes raw RGB bytes: onnxpipe.image.Image(rgb, width, height)") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)   # check_size refuses it
            with PILImage.open(path) as im:
                check_size(im.width, im.height, f"{path}: image")
                rgb = im.convert("RGB")
    except InputError:
        raise
    except PILImage.DecompressionBombError as exc:   # raised by open() itself, past twice the limit
        raise InputError(f"{path}: image too large, expected at most {MAX_PIXELS} pixels: {exc}") from None
    except Exception as exc:   # noqa: BLE001 - Pillow raises OSError, ValueError, EOFError, SyntaxError... on bad files
        raise InputError(f"{path}: cannot read the image: {type(exc).__name__}: {exc}") from None
    return Image(rgb.tobytes(), rgb.width, rgb.height)
