"""A transformers.js Qwen2-VL folder (vision_encoder / embed_tokens / decoder_model_merged, no
pipeline.json) runs unchanged: two images of different sizes give transformers' `generate`
tokens (the tjs_qwen2_vl fixture holds qwen2_vl's graphs under transformers.js's names)."""

from __future__ import annotations

import onnxpipe
from tests.agreement import FP32_KERNELS
from tests.fixtures import tiny_models


def test_two_images_give_transformers_tokens():
    from onnxpipe.image import Image

    bundle = tiny_models.ensure("tjs_qwen2_vl")
    exp = tiny_models.load_expected(bundle)
    source = tiny_models.ensure("qwen2_vl")   # the raw RGB bytes of the same images
    images = [Image((source / i["file"].replace(".png", ".rgb")).read_bytes(), i["width"], i["height"])
              for i in exp["images"]]
    pipe = onnxpipe.load(str(bundle))
    spec = pipe.loaded.spec
    assert spec.pipeline.sessions["vision"].file["cpu"] == "onnx/vision_encoder.onnx"
    assert spec.tokens.extra["image_token"] == 300
    result = pipe.generate(input_ids=exp["input_ids"], images=images, max_new_tokens=exp["max_new_tokens"],
                           do_sample=False)
    assert result.prompt_tokens == len(exp["expanded_input_ids"])
    # every choice of the fixture wins by >= 2 * FP32_KERNELS: by the margin rule, equal tokens
    assert exp["min_logit_margin"] >= 2 * FP32_KERNELS
    assert result.tokens == exp["greedy_tokens"]
