"""The compiled fixed-width ROWS frames (kernels/sliding.py) against a per-row reference and
bit for bit against the numpy form they replace (functions/window/sliding.padded_reduce)."""

from __future__ import annotations

import numpy as np
import pytest

from plansight.engine.functions.window.sliding import padded_reduce, sliding_reduce

_INT64 = np.iinfo(np.int64)
# (ufunc, identity) per dtype, as the window aggregates pass them
_FLOAT_OPS = [(np.add, 0.0), (np.fmin, np.nan), (np.maximum, -np.inf), (np.minimum, np.inf),
              (np.fmax, np.nan)]
_INT_OPS = [(np.add, 0), (np.minimum, _INT64.max), (np.maximum, _INT64.min)]


def _reference(values, op, identity, partition_index, before, after):
    """``op`` over each row's clipped frame, one row at a time."""
    out = []
    for i in range(len(values)):
        same = np.flatnonzero(partition_index == partition_index[i])
        lo, hi = max(i - before, same[0]), min(i + after, same[-1])
        acc = identity
        for j in range(lo, hi + 1):
            acc = op(acc, values[j])
        out.append(acc)
    return np.array(out, dtype=np.result_type(values.dtype, np.asarray(identity).dtype)
                    if op is np.add else values.dtype)


def _layout(sizes):
    """(partition index per row, partition starts) of partitions of ``sizes`` rows."""
    sizes = np.asarray(sizes, dtype=np.int64)
    return (np.repeat(np.arange(len(sizes), dtype=np.int64), sizes),
            np.concatenate(([0], np.cumsum(sizes))).astype(np.int64))


@pytest.mark.parametrize("sizes", [[1], [5], [3, 1, 4], [1, 1, 1, 1], [40], [2, 9, 1, 60],
                                   [0, 2, 0, 0, 5, 0]])
@pytest.mark.parametrize("before,after", [(0, 0), (1, 0), (0, 2), (3, 3), (100, 0), (2, 50)])
def test_frames_equal_a_row_by_row_reference(sizes, before, after):
    partition_index, starts = _layout(sizes)
    rng = np.random.default_rng(len(sizes) * 131 + before * 7 + after)
    floats = rng.normal(size=len(partition_index)).round(3)
    floats[rng.random(len(floats)) < 0.2] = np.nan
    ints = rng.integers(-1000, 1000, len(partition_index))
    for values, ops in ((floats, _FLOAT_OPS), (ints, _INT_OPS)):
        for op, identity in ops:
            got = sliding_reduce(values, op, identity, starts, before, after)
            expected = _reference(values, op, identity, partition_index, before, after)
            if op is np.add and values.dtype.kind == "f":
                np.testing.assert_allclose(got, expected, rtol=1e-12, equal_nan=True)
            else:
                np.testing.assert_array_equal(got, expected)


def test_float_sums_round_exactly_as_the_padded_blocks_did():
    """Same blocks, same order of additions: every bit equal (signed zeros, NaN, wide
    magnitudes), over partitions shorter and longer than the frame."""
    rng = np.random.default_rng(11)
    sizes = rng.integers(0, 300, 60)  # empty partitions too: they shift the blocks
    partition_index, starts = _layout(sizes)
    n = len(partition_index)
    values = rng.normal(size=n) * 10.0 ** rng.integers(-8, 16, n)
    values[rng.random(n) < 0.05] = -0.0
    values[rng.random(n) < 0.02] = np.nan
    for before, after in [(100, 0), (0, 100), (7, 3), (0, 0), (250, 1)]:
        for op, identity in _FLOAT_OPS:
            got = sliding_reduce(values, op, identity, starts, before, after)
            expected = padded_reduce(values, op, identity, starts, before, after)
            assert got.dtype == expected.dtype
            assert got.view(np.uint64).tolist() == expected.view(np.uint64).tolist()


def test_small_integers_sum_in_64_bits_and_keep_their_type_for_min_and_max():
    _, starts = _layout([3, 2])
    values = np.array([100, 100, 100, 7, 9], dtype=np.int8)
    sums = sliding_reduce(values, np.add, 0, starts, 2, 0)
    assert sums.dtype == np.int64 and sums.tolist() == [100, 200, 300, 7, 16]
    flags = np.array([1, 0, 1, 0, 0], dtype=np.uint8)
    lowest = sliding_reduce(flags, np.minimum, 255, starts, 1, 0)
    assert lowest.dtype == np.uint8 and lowest.tolist() == [1, 0, 0, 0, 0]


def test_wrapping_integer_sums_agree_with_numpy():
    """Integer SUM channels wrap modulo 2**64 (the caller checks overflow): as numpy did."""
    _, starts = _layout([4])
    values = np.array([_INT64.max, 5, _INT64.max, -3], dtype=np.int64)
    got = sliding_reduce(values, np.add, 0, starts, 1, 0)
    with np.errstate(over="ignore"):
        expected = padded_reduce(values, np.add, 0, starts, 1, 0)
    assert got.tolist() == expected.tolist()


def test_empty_input_and_other_ufuncs():
    empty = np.zeros(0, dtype=np.float64)
    assert sliding_reduce(empty, np.add, 0.0, np.zeros(1, dtype=np.int64), 3, 0).tolist() == []
    # ops the kernel does not number stay on the numpy form
    bits = np.array([6, 3, 5], dtype=np.int64)
    got = sliding_reduce(bits, np.bitwise_or, 0, _layout([3])[1], 1, 0)
    assert got.tolist() == [6, 7, 7]


def test_partitions_longer_than_a_segment_round_exactly_as_the_padded_blocks_did():
    """Partitions of more padded slots than one pass of the kernel holds (_SEGMENT_SLOTS):
    segments end on block boundaries, so every bit still equals the numpy form."""
    from plansight.engine.kernels.sliding import _SEGMENT_SLOTS

    rng = np.random.default_rng(12)
    sizes = [3 * _SEGMENT_SLOTS + 17, 5, 0, _SEGMENT_SLOTS - 1, 2 * _SEGMENT_SLOTS]
    _, starts = _layout(sizes)
    n = int(starts[-1])
    values = rng.normal(size=n) * 10.0 ** rng.integers(-8, 16, n)
    values[rng.random(n) < 0.01] = np.nan
    for before, after in [(100, 0), (0, 3), (7, 5), (0, 0), (10_000, 0), (_SEGMENT_SLOTS, 2)]:
        for op, identity in _FLOAT_OPS:
            got = sliding_reduce(values, op, identity, starts, before, after)
            expected = padded_reduce(values, op, identity, starts, before, after)
            assert got.view(np.uint64).tolist() == expected.view(np.uint64).tolist()
