"""Image outputs -> PNG: the pixels diffusers' VaeImageProcessor makes, in a file PIL reads."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from diffusers.image_processor import VaeImageProcessor
from PIL import Image

from onnxpipe.diffusion.image import png, to_pixels
from onnxpipe.errors import InputError
from tests.fixtures.tiny_models import ROOT, ensure


def test_pixels_equal_diffusers_postprocess_and_png_decodes():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 3, 5, 7)) * 0.8).astype(np.float32)
    x[0, 0, 0, :3] = [-1.0, 1.0, 0.0]       # the ends and the middle
    want = VaeImageProcessor().postprocess(torch.from_numpy(x), output_type="pil")
    images = to_pixels(x.reshape(-1).tolist(), x.shape)
    for (w, h, c, pixels), ref in zip(images, want):
        decoded = Image.open(io.BytesIO(png(w, h, c, pixels)))
        assert decoded.size == (7, 5) and decoded.mode == "RGB"
        assert np.array_equal(np.asarray(decoded), np.asarray(ref))


def test_layouts_ranges_and_bad_shapes():
    nhwc = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3) / 11
    (w, h, c, pixels), = to_pixels(nhwc.reshape(-1).tolist(), nhwc.shape, (0.0, 1.0), "NHWC")
    assert (w, h, c) == (2, 2, 3) and list(pixels) == [round(v * 255) for v in nhwc.reshape(-1)]
    grey = Image.open(io.BytesIO(png(*to_pixels([0.0, 0.5, 1.0, 2.0], (1, 1, 2, 2), (0.0, 1.0))[0])))
    assert grey.mode == "L" and list(np.asarray(grey).reshape(-1)) == [0, 128, 255, 255]
    with pytest.raises(InputError, match="1, 3 or 4 channels"):
        to_pixels([0.0] * 8, (1, 2, 2, 2))
    with pytest.raises(InputError, match="4 dims"):
        to_pixels([0.0] * 4, (2, 2))


def test_cli_writes_the_png(tmp_path):
    bundle = ensure("tiny_diffusion")
    out = tmp_path / "image.png"
    ids = json.dumps([[0, 1, 1, 1, 1, 1, 1, 1], [0, 17, 42, 9, 33, 5, 1, 1]])
    cmd = [sys.executable, "-m", "onnxpipe", "run", str(bundle), "--input", f"input_ids={ids}", "--out", str(out),
           "--steps", "3", "--scheduler", "ddim", "--guidance-scale", "2", "--seed", "4", "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "py")}, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["shape"] == [1, 3, 16, 16] and report["seed"] == 4 and report["num_steps"] == 3
    import onnxpipe
    result = onnxpipe.load(bundle).run({"input_ids": (json.loads(ids)[0] + json.loads(ids)[1], (2, 8))},
                                       num_steps=3, scheduler="ddim", guidance_scale=2.0, seed=4)
    values, shape = result.read("output")
    want = VaeImageProcessor().postprocess(torch.tensor(values).reshape(shape), output_type="pil")[0]
    assert np.array_equal(np.asarray(Image.open(out)), np.asarray(want))
    bad = subprocess.run(cmd[:5] + ["--input", "input_ids=[[1,2],[3]]"], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT / "py")}, cwd=ROOT)
    assert bad.returncode == 3 and "equal-length rows" in bad.stderr
