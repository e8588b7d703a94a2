"""The fit check before download: config.json arithmetic against the exact plan of the graph,
and a bundle past the heap refused with its figures and the dtypes that would fit. (The
arithmetic against the heap measured in Chromium: tests/e2e/large-models.test.mjs.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from onnxpipe.config.load import load_config
from onnxpipe.errors import InputError
from onnxpipe.export import sized_configs
from onnxpipe.heap import bundle_fit
from onnxpipe.heap.fit import GiB, HeapError, Shape, _config_need, _graph_need, shape_of, with_context
from tests.fixtures import config_only, tiny_models

DTYPE_FILES = {"fp16": "model_fp16.onnx", "q8": "model_quantized.onnx", "q4": "model_q4.onnx",
               "q4f16": "model_q4f16.onnx"}


@pytest.fixture(scope="module")
def sized_small() -> Path:
    return tiny_models.ensure("sized_qwen_small")


@pytest.mark.parametrize("dtype", sorted(DTYPE_FILES))
def test_config_arithmetic_equals_the_graph(sized_small, dtype):
    rel = f"onnx/{DTYPE_FILES[dtype]}"
    stored = (sized_small / rel).stat().st_size
    exact = _graph_need(str(sized_small / rel), rel, "decoder", stored)
    counted = _config_need("decoder", rel, stored, shape_of(str(sized_small)), dtype)
    for a, b in ((counted.full, exact.full), (counted.least, exact.least)):
        assert abs(a - b) <= 0.01 * b, (dtype, counted, exact)


def test_shape_of_a_real_config():
    cfg = sized_configs.get("qwen2.5-1.5b").config
    shape = Shape(cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"],
                  cfg["num_key_value_heads"], 128, cfg["intermediate_size"])
    # 28 layers x 46.8M projection weights + the 233M lm_head; KV: 28 x 2 x 2 x 128 x 4 bytes a token
    assert shape.matmul_weights == 28 * 1536 * (1536 * 2 + 2 * 256 + 3 * 8960) + 151936 * 1536
    assert shape.kv_bytes(4096, 4) == 28 * 2 * 2 * 128 * 4096 * 4


def _config_only_folder(tmp: Path, name: str) -> tuple[Path, dict[str, int]]:
    """A transformers.js folder as the worker's file system holds it before download."""
    folder = tmp / name
    return folder, config_only.write(name, folder, placeholders=True)


def test_a_bundle_past_the_heap_is_refused_with_its_figures_and_what_fits(tmp_path):
    folder, sizes = _config_only_folder(tmp_path, "qwen2.5-3b")
    config = load_config(str(folder), dtype="fp16")
    with pytest.raises(HeapError) as err:
        bundle_fit.check(config, sizes, ("wasm",), ["wasm"], None, 4096, "qwen2.5-3b dtype fp16")
    message = str(err.value)
    assert err.value.kind == "memory"
    assert "qwen2.5-3b dtype fp16 needs" in message and "so it was not downloaded" in message
    assert "more than onnxruntime-web's 2 WASM heaps of 4.00 GiB hold" in message
    assert "KV cache 0.28 GiB at 4096 tokens" in message
    assert "(from config.json)" in message
    fitting = message.split("dtypes that fit: ")[1].split(";")[0]
    assert "q4f16" in fitting and "q8" in fitting and "fp16" not in fitting


def test_one_heap_or_two(tmp_path):
    """Qwen2.5-1.5B's q4f16 file: as stored it fits one heap; expanded to fp32 (fast) it takes two."""
    folder, sizes = _config_only_folder(tmp_path, "qwen2.5-1.5b")
    config = load_config(str(folder), dtype="q4f16")
    one = bundle_fit.check(config, sizes, ("wasm",), ["wasm"], None, 4096, "q4f16", heaps=1)
    assert one.heaps == 1 and one.fits and not one.fits_full
    two = bundle_fit.check(config, sizes, ("wasm",), ["wasm"], None, 4096, "q4f16")   # "auto"
    assert two.heaps == 2 and two.fits_full and two.summary()["heaps"] == 2
    assert two.budget < 4 * GiB and two.need > 4 * GiB
    # its fp16 file only fits spread over two heaps, and with expand_weights "none" q4f16 in one
    fp16 = bundle_fit.check(load_config(str(folder), dtype="fp16"), sizes, ("wasm",), ["wasm"], None, 4096, "fp16")
    assert fp16.heaps == 2
    assert bundle_fit.check(config, sizes, ("wasm",), ["wasm"], None, 4096, "x", "none").heaps == 1


def test_a_long_context_alone_can_be_past_the_heap(tmp_path):
    folder, sizes = _config_only_folder(tmp_path, "qwen2.5-1.5b")
    config = load_config(str(folder), dtype="q4f16")
    with pytest.raises(HeapError, match="at 32768 tokens"):
        bundle_fit.check(config, sizes, ("wasm",), ["wasm"], None, 32768, "q4f16", heaps=1)


def test_heaps():
    assert bundle_fit.heaps(None) is None and bundle_fit.heaps("auto") is None and bundle_fit.heaps(3) == 3
    for bad in (0, 5, 1.0, "2", True):
        with pytest.raises(InputError, match='heaps: expected "auto" or a number of WASM heaps from 1 to 4'):
            bundle_fit.heaps(bad)


def test_webgpu_sessions_are_not_weighed(tmp_path):
    folder, sizes = _config_only_folder(tmp_path, "qwen2.5-3b")
    config = load_config(str(folder), dtype="fp16")
    assert bundle_fit.check(config, sizes, ("webgpu", "wasm"), ["webgpu"], None, 4096, "fp16") is None


def test_context_length():
    assert bundle_fit.context_length(None, 32768) == 4096
    assert bundle_fit.context_length(None, 2048) == 2048
    assert bundle_fit.context_length(8192, 32768) == 8192
    assert bundle_fit.context_length(65536, 32768) == 32768
    for bad in (0, -1, 1.5, "4096", True, 1 << 21):
        with pytest.raises(InputError, match="context_length: expected a number of tokens"):
            bundle_fit.context_length(bad, 32768)


def test_with_context_caps_max_length(sized_small):
    config = load_config(str(sized_small), dtype="q4")
    assert config.spec.generation.max_length == 32768
    capped = with_context(config, 1000)
    assert capped.spec.generation.max_length == 1000 and capped.dtype == "q4"
    assert with_context(capped, 5000) is capped


def test_heap_limit_is_the_wasm32_memory():
    from onnxpipe.heap.fit import HEAP_LIMIT

    assert HEAP_LIMIT == 4 * GiB == 65536 * 65536
