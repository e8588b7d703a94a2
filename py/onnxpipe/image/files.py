"""Image files -> Image (RGB bytes), natively. Decoding needs Pillow; the runtime never does
(the browser decodes with createImageBitmap and hands over RGB bytes)."""

from __future__ import annotations

from ..errors import InputError
from .processor import Image


def read_image(path: str) -> Image:
    """A PNG, JPEG or any format Pillow reads, converted to RGB."""
    try:
        from PIL import Image as PILImage
    except ImportError:
        raise InputError(f"{path}: decoding image files needs Pillow (pip install pillow); the API "
                         f"also takes raw RGB bytes: onnxpipe.image.Image(rgb, width, height)") from None
    try:
        with PILImage.open(path) as im:
            rgb = im.convert("RGB")
            return Image(rgb.tobytes(), rgb.width, rgb.height)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the image: {exc}") from None
