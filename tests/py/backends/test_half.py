"""backends/half.py (the browser's float16 packing, pure Python) against numpy's float16."""

import math

import numpy as np

from onnxpipe.backends import half


def _values():
    rng = np.random.default_rng(0)
    special = [0.0, -0.0, 1.0, -2.5, 65504.0, -65504.0, 65519.99, 65520.0, -1e9, math.inf, -math.inf,
               6e-8, 5.96e-08, 2.9e-8, 3e-8, 1e-10, 6.1e-5, 1 + 2**-11, 1 + 3 * 2**-11, 2049.0, 2051.0]
    return special + (rng.standard_normal(2000) * np.logspace(-9, 5, 2000)).tolist()


def test_bits_equal_numpy_rounding():
    values = _values()
    with np.errstate(over="ignore"):  # numpy's overflow to inf is what half.to_bits must match
        want = np.array(values, np.float64).astype(np.float16).view(np.uint16).tolist()
    assert half.to_bits(values) == want


def test_unpacking_is_exact_and_widening_matches_numpy():
    bits = np.arange(0, 2**16, dtype=np.uint16)
    data = bits.astype("<u2").tobytes()
    want = bits.view(np.float16).astype(np.float32)
    got = np.array(half.from_bytes(data), np.float32)
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(got[finite], want[finite])
    assert np.isnan(got[~finite]).all()
    widened = np.frombuffer(half.to_float32(data).tobytes(), np.float32)
    np.testing.assert_array_equal(widened[finite], want[finite])
    (nan_bits,) = half.to_bits([math.nan])
    assert math.isnan(half.from_bytes(nan_bits.to_bytes(2, "little"))[0])
