"""corr, covar_*, regr_* and bit_and / bit_or / bit_xor over window frames, all rows at once.

Two-variable statistics: per row, the frame's co-moment state (functions/comoments.py) from
O(1) structures, then the shared finish::

    count                  prefix sums of "both values present" (and the FILTER)
    sums, cross, squares   compensated prefix sums of dx = x - c, dy = y - c' (c, c' the
                           partition means; retractable: a frame is P[hi] - P[lo])
    min, max of x and y    a sparse table (exact zero spread for a constant frame)
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
    (before, after, partition index) for ROWS frames ``[i - before, i + after]``."""
    if fixed_width is not None and whole is None:
        before, after, partition_index = fixed_width
        return sliding_reduce(filled, op, identity, partition_index, before, after)
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
    ys, xs = _doubles(y), _doubles(x)
    count = sum_over(prefix(valid), segments)
    sum_x, m2x, min_x, max_x = _moments(xs, valid, segments, whole, fixed_width, runs,
                                        max_length, count)
    sum_y, m2y, min_y, max_y = _moments(ys, valid, segments, whole, fixed_width, runs,
                                        max_length, count)
    cxy = _cross(xs, ys, valid, segments, runs, count)
    state = comoments.CoMoments(count, sum_x, sum_y, cxy, m2x, m2y, min_x, max_x, min_y, max_y)
    return comoments.finish(func, state)


def _doubles(values: pa.Array) -> np.ndarray:
    return np.asarray(pc.cast(values, pa.float64(), safe=False).fill_null(0.0).to_numpy(
        zero_copy_only=False), dtype=np.float64)


def _centered(values: np.ndarray, valid: np.ndarray, runs: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values - their partition's mean of the finite contributing values, 0 elsewhere;
    the mean per row; which rows hold a non-finite contributing value)."""
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
    return np.where(use, values - center, 0.0), center, valid & ~finite


def _moments(values: np.ndarray, valid: np.ndarray, segments: Segments, whole, fixed_width,
             runs: np.ndarray, max_length: int, count: np.ndarray):
    """(sum, centered sum of squares, min, max) of every frame's contributing values."""
    shifted, center, odd = _centered(values, valid, runs)
    total_hi, total_lo = CompensatedPrefix(shifted).range_sum(segments)
    squares, squares_err = two_prod(shifted, shifted)
    square_hi, square_lo = CompensatedPrefix(squares, squares_err).range_sum(segments)
    m2 = centered_sum_of_squares(total_hi, total_lo, square_hi, square_lo, count)
    finite_count = count - sum_over(prefix(odd), segments)
    total = finite_count * center + (total_hi + total_lo)
    minimum = frame_reduce(np.where(valid, values, np.inf), np.fmin, np.inf, segments, whole,
                           fixed_width, max_length)
    maximum = frame_reduce(np.where(valid, values, -np.inf), np.fmax, -np.inf, segments,
                           whole, fixed_width, max_length)
    if odd.any():  # a NaN or an infinity in the frame: the sum follows IEEE, the spread is NaN
        nans = sum_over(prefix(odd & np.isnan(values)), segments)
        up = sum_over(prefix(odd & (values == np.inf)), segments)
        down = sum_over(prefix(odd & (values == -np.inf)), segments)
        total = np.where(up > 0, np.inf, total)
        total = np.where(down > 0, -np.inf, total)
        total = np.where((nans > 0) | ((up > 0) & (down > 0)), np.nan, total)
        poisoned = (nans + up + down) > 0
        m2 = np.where(poisoned, np.nan, m2)
        minimum = np.where(nans > 0, np.nan, minimum)
    return total, m2, minimum, maximum


def _cross(xs: np.ndarray, ys: np.ndarray, valid: np.ndarray, segments: Segments,
           runs: np.ndarray, count: np.ndarray) -> np.ndarray:
    """sum((x - mean_x) * (y - mean_y)) over every frame's pairs."""
    dx, _, odd_x = _centered(xs, valid, runs)
    dy, _, odd_y = _centered(ys, valid, runs)
    product, product_err = two_prod(dx, dy)
    cross_hi, cross_lo = CompensatedPrefix(product, product_err).range_sum(segments)
    sx_hi, sx_lo = CompensatedPrefix(dx).range_sum(segments)
    sy_hi, sy_lo = CompensatedPrefix(dy).range_sum(segments)
    with np.errstate(invalid="ignore", divide="ignore"):
        correction = (sx_hi + sx_lo) * (sy_hi + sy_lo) / np.maximum(count, 1)
        cross = (cross_hi - correction) + cross_lo
    odd = odd_x | odd_y
    if odd.any():
        cross = np.where(sum_over(prefix(odd), segments) > 0, np.nan, cross)
    return cross


__all__ = ["BITWISE", "bitwise", "frame_reduce", "statistic"]
