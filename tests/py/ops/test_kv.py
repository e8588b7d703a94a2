"""KV-cache graphs against numpy slicing and padding."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxpipe.ops import grow_seq_graph, slice_seq_many_graph, zeros_graph

DTYPES = ["float32", "float16"]


def _run_all(model_bytes, **feeds):
    onnx.checker.check_model(onnx.load_from_string(model_bytes), full_check=True)
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _run(model_bytes, **feeds):
    (y,) = _run_all(model_bytes, **feeds)
    return y


def _cache(dtype, shape=(2, 3, 5, 4)):
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape).astype(dtype) + 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length", [0, 1, 3, 5, 9])
def test_slice_seq_rewinds(dtype, length):
    x = _cache(dtype)
    y = _run(slice_seq_many_graph(dtype, 1), x0=x, length=np.array([length], np.int64))
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, x[:, :, :length, :])


@pytest.mark.parametrize("dtype", DTYPES)
def test_slice_seq_rewinds_many_caches_of_their_own_shapes_in_one_run(dtype):
    caches = [_cache(dtype, (1, 2, 6, 4)), _cache(dtype, (1, 3, 6, 8)) * 2, _cache(dtype, (1, 1, 6, 2)) * 3]
    ys = _run_all(slice_seq_many_graph(dtype, 3), length=np.array([4], np.int64),
                  **{f"x{i}": x for i, x in enumerate(caches)})
    for y, x in zip(ys, caches):
        np.testing.assert_array_equal(y, x[:, :, :4, :])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seq,capacity", [(5, 5), (5, 8), (0, 4), (1, 16)])
def test_grow_seq_pads_with_zeros(dtype, seq, capacity):
    x = _cache(dtype, (1, 2, seq, 3))
    y = _run(grow_seq_graph(dtype), x=x, capacity=np.array([capacity], np.int64))
    expected = np.zeros((1, 2, capacity, 3), dtype)
    expected[:, :, :seq, :] = x
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 2, 0, 8), (2, 3, 7, 4)])
def test_zeros(dtype, shape):
    y = _run(zeros_graph(dtype), shape=np.array(shape, np.int64))
    assert y.dtype == np.dtype(dtype) and y.shape == shape
    assert not y.any()


def test_dtype_is_checked():
    with pytest.raises(ValueError, match="dtype: expected one of"):
        slice_seq_many_graph("int64", 1)
    with pytest.raises(ValueError, match="count"):
        slice_seq_many_graph("float32", 0)
    assert zeros_graph("float16") is zeros_graph("float16")
