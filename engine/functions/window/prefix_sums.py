"""Prefix sums that give SUM over any row interval ``[lo, hi)`` as ``P[hi] - P[lo]``.

Integers: int64 cumulative sums. They wrap modulo 2**64, but the difference of two wrapped
prefixes is still exact whenever the frame's own sum fits in int64 (two's complement).

Floats: a float prefix loses the low bits of small frames far into a big partition
(``P[hi] - P[lo]`` cancels). So each prefix carries the rounding error of every addition,
recovered exactly after ``np.cumsum`` with the error-free TwoSum of (P[k-1], x[k], P[k])::

    P[k]  = fl(P[k-1] + x[k])                       (np.cumsum, sequential)
    e[k]  = (P[k-1] + x[k]) - P[k]                  (TwoSum, exact)
    sum(lo, hi) = (P[hi] - P[lo]) + (E[hi] - E[lo]) with E = cumsum(e)

which keeps the frame sum close to correctly rounded (error ~ eps * |sum| + eps**2 * sum|x|),
like a Kahan sum but O(1) per frame. Sums are returned as double-double pairs (hi, lo) for the
variance, which subtracts two such sums.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_SPLITTER = 134217729.0  # 2**27 + 1, Dekker's split of a double into two 26-bit halves

Segments = Sequence[tuple[np.ndarray, np.ndarray]]


def prefix(values: np.ndarray, dtype: type = np.int64) -> np.ndarray:
    """``[0, v0, v0+v1, ...]`` (len n + 1) in ``dtype``."""
    out = np.zeros(len(values) + 1, dtype=dtype)
    np.cumsum(values, dtype=dtype, out=out[1:])
    return out


def sum_over(prefix_sums: np.ndarray, segments: Segments) -> np.ndarray:
    """Sum over the union of the segments of every row from a prefix-sum array.

    Example:
        >>> p = prefix(np.array([1, 2, 3, 4]))
        >>> sum_over(p, [(np.array([0, 1]), np.array([2, 4]))]).tolist()
        [3, 9]
    """
    lo, hi = segments[0]
    total = prefix_sums[hi] - prefix_sums[lo]
    for lo, hi in segments[1:]:
        total += prefix_sums[hi] - prefix_sums[lo]
    return total


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, e) with s = fl(a + b) and s + e == a + b exactly."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, e) with p = fl(a * b) and p + e == a * b exactly (Dekker, no FMA needed)."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, e


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _SPLITTER * a
    hi = c - (c - a)
    return hi, a - hi


class CompensatedPrefix:
    """Float64 prefix sums with their exact rounding errors; range sums as (hi, lo).

    ``extra`` adds a second, tiny summand per row (the low part of a product) whose own
    rounding is negligible.

    Example:
        >>> p = CompensatedPrefix(np.array([1e16, 1.0, -1e16, 1.0]))
        >>> hi, lo = p.range_sum([(np.array([0, 1]), np.array([4, 2]))])
        >>> (hi + lo).tolist()
        [2.0, 1.0]
    """

    def __init__(self, values: np.ndarray, extra: np.ndarray | None = None):
        values = np.asarray(values, dtype=np.float64)
        self.sums = prefix(values, np.float64)
        _, errors = two_sum(self.sums[:-1], values)
        if extra is not None:
            errors = errors + extra
        self.errors = prefix(errors, np.float64)

    def range_sum(self, segments: Segments) -> tuple[np.ndarray, np.ndarray]:
        """Double-double sum over the union of each row's segments."""
        total_hi = total_lo = None
        for lo, hi in segments:
            seg_hi, seg_lo = two_sum(self.sums[hi], -self.sums[lo])
            seg_lo = seg_lo + (self.errors[hi] - self.errors[lo])
            if total_hi is None:
                total_hi, total_lo = seg_hi, seg_lo
            else:
                total_hi, carry = two_sum(total_hi, seg_hi)
                total_lo = total_lo + seg_lo + carry
        assert total_hi is not None and total_lo is not None
        return total_hi, total_lo


def centered_sum_of_squares(sum_hi: np.ndarray, sum_lo: np.ndarray, squares_hi: np.ndarray,
                            squares_lo: np.ndarray, count: np.ndarray) -> np.ndarray:
    """sum((x - mean)**2) = Q - T**2 / n from double-double T = sum(x), Q = sum(x**2),
    carrying the low parts so the cancellation keeps ~16 significant digits. Clamped at 0."""
    n = count.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        square, square_err = two_prod(sum_hi, sum_hi)
        square_err = square_err + 2.0 * sum_hi * sum_lo
        quotient = square / n
        back, back_err = two_prod(quotient, n)
        remainder = ((square - back) - back_err + square_err) / n
        diff, diff_err = two_sum(squares_hi, -quotient)
        result = diff + (diff_err + squares_lo - remainder)
    return np.maximum(result, 0.0)
