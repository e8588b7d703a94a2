"""Images for vision-language bundles: the processor config, the pixel work (an ONNX graph the
engine runs), image-token expansion and the front end that turns images into pipeline inputs."""

from .processor import Image, ImageProcessor, ProcessedImage

__all__ = ["Image", "ImageProcessor", "ProcessedImage"]
