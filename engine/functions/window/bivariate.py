"""corr, covar_*, regr_* and bit_and / bit_or / bit_xor over window frames, all rows at once.

Two-variable statistics: per row, the frame's co-moment state (functions/comoments.py) from
O(1) structures, then the shared finish::

    count                  prefix sums of "both values present" (and the FILTER)
    sums, cross, squares   compensated prefix sums of dx = x - c, dy = y - c' (c, c' the
                           partition means; retractable: a frame is P[hi] - P[lo])
    one value in a frame   prefix counts of value changes (a sparse table of min/max for
                           frames cut by EXCLUDE): exact zero spread for a constant frame
    NaN / inf in a frame   counted apart: the frame's statistics become NaN, as in DuckDB

bit_and, bit_or: idempotent, so any frame is two overlapping lookups of a sparse table (or
the van Herk pass for fixed-width ROWS frames). bit_xor is its own inverse: prefix xors,
``P[hi] ^ P[lo]``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.functions import comoments
from plansight.engine.functions.window.prefix_sums import (
    CompensatedPrefix,
    Segments,
    centered_sum_of_squares,
    prefix,
    sum_over,
    two_prod,
)
from plansight.engine.functions.window.sliding import sliding_reduce
from plansight.engine.functions.window.sparse_table import RangeExtremum

BITWISE = ("bit_and", "bit_or", "bit_xor")


def frame_reduce(filled: np.ndarray, op: np.ufunc, identity, segments: Segments, whole,
                 fixed_width, max_length: int) -> np.ndarray:
    """An associative, idempotent ``op`` over every row's frame (``identity`` if empty).

    ``whole``: the PartitionLayout when every frame is its partition; ``fixed_width``:
    (before, after, partition starts) for ROWS frames ``[i - before, i + after]``."""
    if fixed_width is not None and whole is None:
        before, after, partition_starts = fixed_width
        return sliding_reduce(filled, op, identity, partition_starts, before, after)
    if whole is not None:
        sizes = np.diff(whole.partition_starts)
        starts = whole.partition_starts[:-1][sizes > 0]
        return np.repeat(op.reduceat(filled, starts), sizes[sizes > 0])
    table = RangeExtremum(filled, op, identity, max_length)
    per_row = table.query(*segments[0])
    for lo, hi in segments[1:]:
        per_row = op(per_row, table.query(lo, hi))
    return per_row


def bitwise(func: str, values: pa.Array, contributing: np.ndarray, count: np.ndarray,
            segments: Segments, whole, fixed_width, max_length: int,
            result_type: pa.DataType) -> pa.Array:
    """bit_and / bit_or / bit_xor of the contributing values of every row's frame."""
    if pa.types.is_null(values.type) or pa.types.is_null(result_type):
        return pa.nulls(len(count), result_type)
    numbers = values.fill_null(0).to_numpy(zero_copy_only=False)
    if func == "bit_xor":
        xors = np.zeros(len(numbers) + 1, dtype=numbers.dtype)
        np.bitwise_xor.accumulate(np.where(contributing, numbers, 0).astype(numbers.dtype),
                                  out=xors[1:])
        per_row = np.zeros(len(count), dtype=numbers.dtype)
        for lo, hi in segments:
            per_row ^= xors[hi] ^ xors[lo]
    else:
        op = np.bitwise_and if func == "bit_and" else np.bitwise_or
        identity = np.array(-1 if func == "bit_and" else 0).astype(numbers.dtype)
        filled = np.where(contributing, numbers, identity).astype(numbers.dtype)
        per_row = frame_reduce(filled, op, identity, segments, whole, fixed_width, max_length)
    return pa.array(per_row, result_type, mask=count == 0)


def statistic(func: str, y: pa.Array, x: pa.Array, keep: np.ndarray | None,
              segments: Segments, whole, fixed_width, runs: np.ndarray,
              max_length: int) -> pa.Array:
    """corr / covar_* / regr_* of the pairs (y, x) in every row's frame."""
    valid = np.asarray(pc.and_(y.is_valid(), x.is_valid()).to_numpy(zero_copy_only=False),
                       dtype=bool)
    if keep is not None:
        valid &= keep
    count = sum_over(prefix(valid), segments)
    xs = _Variable(_doubles(x), valid, segments, runs, count)
    ys = _Variable(_doubles(y), valid, segments, runs, count)
    min_x, max_x = _one_value_bounds(xs.values, valid, segments, whole, fixed_width,
                                     max_length)
    min_y, max_y = _one_value_bounds(ys.values, valid, segments, whole, fixed_width,
                                     max_length)
    state = comoments.CoMoments(count, xs.total, ys.total, _cross(xs, ys, segments, count),
                                xs.m2, ys.m2, min_x, max_x, min_y, max_y)
    return comoments.finish(func, state)


def _doubles(values: pa.Array) -> np.ndarray:
    return np.asarray(pc.cast(values, pa.float64(), safe=False).fill_null(0.0).to_numpy(
        zero_copy_only=False), dtype=np.float64)


class _Variable:
    """One variable's frame sums: ``shifted`` = value - its partition's mean over the finite
    contributing values (0 elsewhere), its compensated frame sum, the frame's sum of the
    values and centered sum of squares; a NaN or an infinity in a frame makes its sum follow
    IEEE and its spread NaN (``odd`` marks those rows)."""

    def __init__(self, values: np.ndarray, valid: np.ndarray, segments: Segments,
                 runs: np.ndarray, count: np.ndarray):
        self.values = values
        finite = np.isfinite(values)
        use = valid & finite
        sizes = np.diff(runs)
        starts = runs[:-1][sizes > 0]
        center = np.zeros(len(values))
        if len(starts):
            counts = np.add.reduceat(use.astype(np.float64), starts)
            sums = np.add.reduceat(np.where(use, values, 0.0), starts)
            means = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
            center = np.repeat(means, sizes[sizes > 0])
        self.shifted = np.where(use, values - center, 0.0)
        self.odd = valid & ~finite
        self.sum_hi, self.sum_lo = CompensatedPrefix(self.shifted).range_sum(segments)
        squares, squares_err = two_prod(self.shifted, self.shifted)
        square_hi, square_lo = CompensatedPrefix(squares, squares_err).range_sum(segments)
        self.m2 = centered_sum_of_squares(self.sum_hi, self.sum_lo, square_hi, square_lo,
                                          count)
        self.odd_count = sum_over(prefix(self.odd), segments) if self.odd.any() else None
        finite_count = count if self.odd_count is None else count - self.odd_count
        self.total = finite_count * center + (self.sum_hi + self.sum_lo)
        if self.odd_count is not None:
            nans = sum_over(prefix(self.odd & np.isnan(values)), segments)
            up = sum_over(prefix(self.odd & (values == np.inf)), segments)
            down = sum_over(prefix(self.odd & (values == -np.inf)), segments)
            total = np.where(up > 0, np.inf, self.total)
            total = np.where(down > 0, -np.inf, total)
            self.total = np.where((nans > 0) | ((up > 0) & (down > 0)), np.nan, total)
            self.m2 = np.where(self.odd_count > 0, np.nan, self.m2)


def _cross(xs: _Variable, ys: _Variable, segments: Segments, count: np.ndarray) -> np.ndarray:
    """sum((x - mean_x) * (y - mean_y)) over every frame's pairs."""
    product, product_err = two_prod(xs.shifted, ys.shifted)
    cross_hi, cross_lo = CompensatedPrefix(product, product_err).range_sum(segments)
    with np.errstate(invalid="ignore", divide="ignore"):
        correction = (xs.sum_hi + xs.sum_lo) * (ys.sum_hi + ys.sum_lo) / np.maximum(count, 1)
        cross = (cross_hi - correction) + cross_lo
    if xs.odd_count is not None or ys.odd_count is not None:
        odd = sum(c for c in (xs.odd_count, ys.odd_count) if c is not None)
        cross = np.where(odd > 0, np.nan, cross)
    return cross


def _one_value_bounds(values: np.ndarray, valid: np.ndarray, segments: Segments, whole,
                      fixed_width, max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """(min, max) of each frame's contributing values, or stand-ins that are equal exactly
    when the frame holds one value (all finish needs: a constant variable has no spread).

    A one-segment frame is constant when no contributing row after its first one differs
    from the contributing row before it: prefix counts of such changes, O(1) per frame.
    Frames cut by EXCLUDE take the real min and max (sparse table)."""
    if len(segments) > 1:
        return (frame_reduce(np.where(valid, values, np.inf), np.fmin, np.inf, segments,
                             whole, fixed_width, max_length),
                frame_reduce(np.where(valid, values, -np.inf), np.fmax, -np.inf, segments,
                             whole, fixed_width, max_length))
    lo, hi = segments[0]
    n = len(values)
    rows = np.flatnonzero(valid)
    following = np.full(n + 1, n, dtype=np.int64)  # first contributing row at or after i
    following[rows] = rows
    following = np.minimum.accumulate(following[::-1])[::-1]
    kept = values[rows]
    change = np.zeros(n, dtype=np.int64)
    if len(rows) > 1:
        change[rows[1:]] = kept[1:] != kept[:-1]  # NaN differs from everything
    changes = prefix(change)
    first = following[lo]
    has = first < hi
    after_first = np.minimum(first + 1, n)
    one_value = has & (changes[hi] - changes[after_first] == 0)
    value = values[np.minimum(first, max(n - 1, 0))] if n else np.zeros(0)
    return np.where(one_value, value, -np.inf), np.where(one_value, value, np.inf)


__all__ = ["BITWISE", "bitwise", "frame_reduce", "statistic"]
