"""Batch-row graphs (ops/kv_rows.py) against numpy padding, concatenation, slicing and take."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxpipe.ops.kv_rows import crop_seq_many_graph, gather_rows_graph, join_rows_many_graph, pad_seq_many_graph

DTYPES = ["float32", "float16"]


def _run(model_bytes, names, **feeds):
    onnx.checker.check_model(onnx.load_from_string(model_bytes), full_check=True)
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return sess.run(names, feeds)


def _cache(dtype, shape, start=1):
    return (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + start).astype(dtype)


def _seq_pads(before: int, after: int) -> np.ndarray:
    return np.array([0, 0, before, 0, 0, 0, after, 0], np.int64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [False, True])
def test_join_pads_both_to_one_length_and_stacks_rows(dtype, left):
    x = [_cache(dtype, (2, 3, 5, 4)), _cache(dtype, (2, 1, 5, 2), 100)]
    r = [_cache(dtype, (1, 3, 7, 4), 500), _cache(dtype, (1, 1, 7, 2), 900)]
    grow_x = (2, 0) if left else (0, 2)
    got = _run(join_rows_many_graph(dtype, 2), ["y0", "y1"], x0=x[0], x1=x[1], r0=r[0], r1=r[1],
               pads_x=_seq_pads(*grow_x), pads_r=_seq_pads(0, 0))
    for xi, ri, yi in zip(x, r, got):
        padded = np.pad(xi, [(0, 0), (0, 0), grow_x, (0, 0)])
        np.testing.assert_array_equal(yi, np.concatenate([padded, ri], axis=0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("start, end", [(0, 3), (2, 5), (0, 5), (4, 5)])
def test_crop_keeps_columns_start_to_end(dtype, start, end):
    x = [_cache(dtype, (2, 3, 5, 4)), _cache(dtype, (3, 1, 5, 2))]
    got = _run(crop_seq_many_graph(dtype, 2), ["y0", "y1"], x0=x[0], x1=x[1],
               start=np.array([start], np.int64), end=np.array([end], np.int64))
    for xi, yi in zip(x, got):
        np.testing.assert_array_equal(yi, xi[:, :, start:end])


@pytest.mark.parametrize("dtype", DTYPES)
def test_pad_grows_the_sequence_axis_with_zeros(dtype):
    x = _cache(dtype, (2, 3, 5, 4))
    (y,) = _run(pad_seq_many_graph(dtype, 1), ["y0"], x0=x, pads=_seq_pads(0, 3))
    np.testing.assert_array_equal(y, np.pad(x, [(0, 0), (0, 0), (0, 3), (0, 0)]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", [2, 3])
def test_gather_rows_takes_rows_in_order(dtype, rank):
    x = _cache(dtype, (4, 1, 6) if rank == 3 else (4, 6))
    index = np.array([3, 1], np.int64)
    (y,) = _run(gather_rows_graph(dtype, rank), ["y"], x=x, index=index)
    np.testing.assert_array_equal(y, x[index])


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="dtype"):
        join_rows_many_graph("int8", 1)
    with pytest.raises(ValueError, match="count"):
        crop_seq_many_graph("float32", 0)
