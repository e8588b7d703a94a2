"""Image preprocessing as one small ONNX graph the runtime runs (no numpy or PIL at run time).

``patchify_graph(...)``: input ``rgb`` uint8 [h, w, 3] and the int64 shape inputs a caller
computes in Python (``sizes`` [4] = 1, 3, new_h, new_w; ``blocks`` [7] = 3, gh/m, m, p, gw/m,
m, p; ``rows`` [2] = gh*gw, 3*t*p*p); output ``pixel_values`` float32 [gh*gw, 3*t*p*p], the
rows of Qwen2-VL's image processor:

1. resize to (new_h, new_w): bicubic (a = -0.5), antialiased when shrinking, pixel centres
   aligned (half_pixel), edge weights renormalised: Pillow's BICUBIC filter, which is what
   transformers' slow processor runs. Pillow resamples one axis at a time, back to 8 bits in
   between; Pillow 13 does the vertical pass first when the height shrinks and the width does
   not (``vertical_first``, see ``image/resize.py``), so the graph does the same;
2. rescale and normalise: (x * rescale - mean) / std per channel;
3. patchify: [3, gh/m, m, p, gw/m, m, p] -> (gh/m, gw/m, m, m, 3, p, p), each patch repeated
   ``temporal`` times along a new axis before the 3 x p x p block (one still frame), flattened.
"""

from __future__ import annotations

from functools import lru_cache

from .proto import Graph

__all__ = ["gemma4_graph", "hd_graph", "nchw_graph", "patchify_graph"]

OPSET = 18   # Resize's ``antialias`` attribute


@lru_cache(maxsize=None)
def patchify_graph(temporal: int, resize: bool, vertical_first: bool, rescale: float | None,
                   mean: tuple[float, ...] | None, std: tuple[float, ...] | None) -> bytes:
    """The graph in the module docstring; ``rescale``/``mean``/``std`` None skip their step."""
    g = Graph("image_patchify")
    g.input("rgb", "uint8", ["h", "w", 3])
    g.input("sizes", "int64", [4])
    g.input("blocks", "int64", [7])
    g.input("rows", "int64", [2])
    x = _pixels(g, resize, vertical_first, rescale, mean, std)
    x = g.node("Reshape", [x, "blocks"], "blocks7")
    x = g.node("Transpose", [x], "patch_major", perm=[1, 4, 2, 5, 0, 3, 6])
    g.const("axis5", [5], "int64", [1])
    x = g.node("Unsqueeze", [x, "axis5"], "framed")
    g.const("repeat", [1, 1, 1, 1, 1, temporal, 1, 1], "int64", [8])
    x = g.node("Tile", [x, "repeat"], "frames")
    g.node("Reshape", [x, "rows"], "pixel_values")
    g.output("pixel_values", "float32", ["patches", "patch_dim"])
    return g.to_bytes(opset=OPSET)


@lru_cache(maxsize=None)
def nchw_graph(resize: bool, vertical_first: bool, rescale: float | None,
               mean: tuple[float, ...] | None, std: tuple[float, ...] | None, bgr: bool = False) -> bytes:
    """Steps 1 and 2 only, for a fixed-size processor (Gemma 3) or Mistral 3's: input ``rgb``
    uint8 [h, w, 3] and ``sizes`` [4] = 1, 3, new_h, new_w; output ``pixel_values`` float32
    [1, 3, new_h, new_w]. ``bgr``: the channels in B, G, R order, channel i still normalised
    with mean[i] and std[i] (ort-extensions' ConvertRGB on an RGB decode, image/pixtral.py)."""
    g = Graph("image_nchw")
    g.input("rgb", "uint8", ["h", "w", 3])
    g.input("sizes", "int64", [4])
    if bgr and mean is not None:   # normalise in R, G, B order with the values reversed, then swap
        mean, std = mean[::-1], std[::-1]
    x = _pixels(g, resize, vertical_first, rescale, mean, std)
    if bgr:
        g.const("bgr", [2, 1, 0], "int64", [3])
        x = g.node("Gather", [x, "bgr"], "swapped", axis=1)
    g.node("Identity", [x], "pixel_values")
    g.output("pixel_values", "float32", [1, 3, "height", "width"])
    return g.to_bytes(opset=OPSET)


@lru_cache(maxsize=None)
def hd_graph(resize: bool, mean: tuple[float, ...], std: tuple[float, ...], crops: int | None, side: int,
             scale: float | None = None) -> bytes:
    """Phi-3-vision's HD transform (ort-extensions' Phi3ImageTransform): input ``rgb`` uint8
    [h, w, 3], ``sizes`` [4] = 1, 3, new_h, new_w (Pillow's bilinear resize, horizontal pass
    first, 8 bits after each), ``pads`` [8] (white padding of the short side to a multiple of
    ``side``), ``blocks`` [5] = 3, m, side, n, side, ``cells`` [4] = m * n, 3, side, side and
    ``fill`` [8] (zero crops after them); output ``pixel_values`` float32
    [1, crops + 1, 3, side, side]: the padded image normalised, resized bicubically (no
    rounding, as Pillow's float mode) to side x side as the global image, then its m x n crops
    row by row, then zero crops. Phi-4-multimodal's (ort-extensions' Phi4VisionDynamicPreprocess
    and Phi4VisionProcessor, image/phi4.py) is the same graph with the padding at the bottom and
    right, no zero crops, ``crops`` None (a dynamic count) and ``scale`` (its Rescale step,
    a multiplication) in place of the division by 255."""
    g = Graph("image_hd")
    g.input("rgb", "uint8", ["h", "w", 3])
    for name, n in (("sizes", 4), ("pads", 8), ("blocks", 5), ("cells", 4), ("fill", 8)):
        g.input(name, "int64", [n])
    x = _pixels(g, resize, False, None, None, None, mode="linear")
    g.const("white", [255.0], "float32", [])
    x = g.node("Pad", [x, "pads", "white"], "padded", mode="constant")
    g.const("mean", list(mean), "float32", [1, 3, 1, 1])
    g.const("std", list(std), "float32", [1, 3, 1, 1])
    if scale is None:
        g.const("full", [255.0], "float32", [])
        x = g.node("Div", [x, "full"], "rescaled")
    else:
        g.const("scale", [scale], "float32", [])
        x = g.node("Mul", [x, "scale"], "rescaled")
    x = g.node("Div", [g.node("Sub", [x, "mean"], "centred"), "std"], "hd")
    g.const("global_size", [1, 3, side, side], "int64", [4])
    whole = g.node("Resize", [x, "", "", "global_size"], "global", mode="cubic", cubic_coeff_a=-0.5,
                   antialias=1, exclude_outside=1, coordinate_transformation_mode="half_pixel")
    x = g.node("Reshape", [x, "blocks"], "blocks5")
    x = g.node("Transpose", [x], "crop_major", perm=[1, 3, 0, 2, 4])
    x = g.node("Reshape", [x, "cells"], "crops")
    x = g.node("Concat", [whole, x], "stacked", axis=0)
    x = g.node("Pad", [x, "fill"], "filled", mode="constant")
    g.node("Unsqueeze", [x, "axis0"], "pixel_values")   # axis0: defined by _pixels
    g.output("pixel_values", "float32", [1, "crops" if crops is None else crops + 1, 3, side, side])
    return g.to_bytes(opset=OPSET)


@lru_cache(maxsize=None)
def gemma4_graph(resize: bool) -> bytes:
    """Gemma 4's pixels (ort-extensions' Gemma4ImageTransform, image/gemma4.py): input ``rgb``
    uint8 [h, w, 3], ``sizes`` [4] = 1, 3, new_h, new_w, ``blocks`` [5] = 3, new_h / p, p,
    new_w / p, p and ``rows`` [3] = 1, patches, p * p * 3; output ``pixel_values`` float32
    [1, patches, p * p * 3]: the bicubic, antialiased resize in float (no rounding or clamping)
    times 1/255, patches row by row, each in (row, column, channel) order."""
    g = Graph("image_gemma4")
    g.input("rgb", "uint8", ["h", "w", 3])
    g.input("sizes", "int64", [4])
    g.input("blocks", "int64", [5])
    g.input("rows", "int64", [3])
    x = g.node("Transpose", [g.node("Cast", ["rgb"], "rgb_f", to=1)], "chw", perm=[2, 0, 1])
    x = g.node("Unsqueeze", [x, g.const("axis0", [0], "int64", [1])], "nchw")
    if resize:
        x = g.node("Resize", [x, "", "", "sizes"], "resized", mode="cubic", cubic_coeff_a=-0.5,
                   antialias=1, exclude_outside=1, coordinate_transformation_mode="half_pixel")
    x = g.node("Mul", [x, g.const("scale", [1 / 255], "float32", [])], "rescaled")
    x = g.node("Reshape", [x, "blocks"], "blocks5")
    x = g.node("Transpose", [x], "patch_major", perm=[1, 3, 2, 4, 0])
    g.node("Reshape", [x, "rows"], "pixel_values")
    g.output("pixel_values", "float32", [1, "patches", "patch_dim"])
    return g.to_bytes(opset=OPSET)


def _pixels(g: Graph, resize: bool, vertical_first: bool, rescale: float | None,
            mean: tuple[float, ...] | None, std: tuple[float, ...] | None, mode: str = "cubic") -> str:
    """Resize (step 1; Pillow's BICUBIC, or BILINEAR for ``mode`` "linear"), rescale and
    normalise (step 2) of ``rgb``: the name of the [1, 3, h, w] result."""
    x = g.node("Cast", ["rgb"], "rgb_f", to=1)
    x = g.node("Transpose", [x], "chw", perm=[2, 0, 1])
    g.const("axis0", [0], "int64", [1])
    x = g.node("Unsqueeze", [x, "axis0"], "nchw")
    if resize:
        g.const("lo", [0.0], "float32", [])
        g.const("hi", [255.0], "float32", [])
        # one axis per pass, each back to 8 bits, as Pillow does (its order: see the docstring)
        g.const("one_axis", [2 if vertical_first else 3], "int64", [1])
        first = g.node("ScatterElements", [g.node("Shape", [x], "in_shape"), "one_axis",
                                           g.node("Gather", ["sizes", "one_axis"], "one_size")],
                       "first_sizes")
        for name, sizes in (("pass1", first), ("pass2", "sizes")):
            x = g.node("Resize", [x, "", "", sizes], f"{name}_f", mode=mode, cubic_coeff_a=-0.5,
                       antialias=1, exclude_outside=1, coordinate_transformation_mode="half_pixel")
            x = g.node("Clip", [g.node("Round", [x], f"{name}_r"), "lo", "hi"], name)
    if rescale is not None:
        g.const("scale", [rescale], "float32", [])
        x = g.node("Mul", [x, "scale"], "rescaled")
    if mean is not None:
        g.const("mean", list(mean), "float32", [1, 3, 1, 1])
        g.const("std", list(std), "float32", [1, 3, 1, 1])
        x = g.node("Div", [g.node("Sub", [x, "mean"], "centred"), "std"], "normalised")
    return x
