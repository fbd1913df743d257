"""The compiled bitmap membership test (KeyBitmap.contains) against a Python set: every
integer width, NULLs, sliced arrays (bit offsets), values at and beyond the bitmap's
bounds, the int64 extremes, and empty input."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from plansight.engine.physical.key_bitmap import KeyBitmap


def _expected(column: pa.Array, keys: set[int]) -> list[bool]:
    return [v is not None and v in keys for v in column.to_pylist()]


TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32()]


@pytest.mark.parametrize("type_", TYPES, ids=str)
@pytest.mark.parametrize("null_rate", [0.0, 0.3])
def test_contains_equals_a_set(type_, null_rate):
    rng = np.random.default_rng(5)
    top = min(120, np.iinfo(type_.to_pandas_dtype()).max)
    keys = rng.choice(np.arange(3, top - 3), 20, replace=False)
    values = rng.integers(0, top + 1, 5000)
    column = pa.array(values, type_, mask=rng.random(5000) < null_rate)
    bitmap = KeyBitmap(keys)
    expected = _expected(column, set(keys.tolist()))
    keep, kept = bitmap.contains_counted(column)
    assert keep.to_pylist() == expected
    assert kept == sum(expected)
    assert keep.null_count == 0


@pytest.mark.parametrize("offset,length", [(0, 0), (1, 0), (3, 1), (7, 9), (8, 8), (5, 61)])
def test_sliced_arrays_read_their_own_bits(offset, length):
    column = pa.array([i if i % 3 else None for i in range(80)], pa.int64())
    keys = np.array([1, 2, 4, 8, 16, 17, 32, 64])
    part = column.slice(offset, length)
    keep, kept = KeyBitmap(keys).contains_counted(part)
    assert keep.to_pylist() == _expected(part, set(keys.tolist()))
    assert kept == sum(_expected(part, set(keys.tolist())))


def test_bounds_and_int64_extremes_never_wrap():
    big = np.iinfo(np.int64)
    keys = np.array([big.max - 2, big.max])
    column = pa.array([big.min, big.min + 1, -1, 0, big.max - 3, big.max - 2, big.max - 1,
                       big.max, None], pa.int64())
    assert KeyBitmap(keys).contains(column).to_pylist() == [
        False, False, False, False, False, True, False, True, False]
    low = np.array([big.min, big.min + 5])
    assert KeyBitmap(low).contains(column).to_pylist() == [
        True, False, False, False, False, False, False, False, False]


def test_chunked_and_empty_columns():
    bitmap = KeyBitmap(np.array([10, 20]))
    chunked = pa.chunked_array([[10, 11], [], [20, None]], pa.int64())
    assert bitmap.contains(chunked).to_pylist() == [True, False, True, False]
    keep, kept = bitmap.contains_counted(pa.array([], pa.int32()))
    assert (keep.to_pylist(), kept) == ([], 0)


@pytest.mark.parametrize("type_", [pa.int8(), pa.int16(), pa.int32(), pa.int64(),
                                   pa.uint32()], ids=str)
@pytest.mark.parametrize("rows, top", [(5000, 100), (3000, 100_000), (1, 1), (0, 1)])
def test_key_summary_distinct_keys_equal_arrow_unique(type_, rows, top):
    """A build side's distinct integer keys taken by range flags (distinct_in_range) are
    Arrow's unique ones, in the same first-appearance order, NULLs left out; negative keys
    and a range too wide for the flags (hashed instead) too."""
    from plansight.engine.physical.dynamic_filter import KeySummary

    rng = np.random.default_rng(rows + top)
    high = min(top, np.iinfo(type_.to_pandas_dtype()).max)
    low = 0 if pa.types.is_unsigned_integer(type_) else -min(high, 50)
    values = rng.integers(low, high + 1, rows)
    keys = pa.array(values, type_, mask=rng.random(rows) < 0.1)
    for max_bitmap_bits in (0, 1 << 27):
        summary = KeySummary(type_, max_keys=1 << 20, max_bitmap_bits=max_bitmap_bits)
        summary.add(keys)
        part = summary.result()
        expected = pc.unique(keys.drop_null())
        got = part["set"]
        if not len(expected):
            assert part["rows"] == 0
            continue
        assert got.type == type_ and got.to_pylist() == expected.to_pylist()
