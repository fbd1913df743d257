"""COUNT / SUM / AVG (DISTINCT x) over frames, without a loop over rows or partitions.

A row j is the first occurrence of its value inside a frame ``[lo, hi)`` exactly when the
previous row with the same value, ``prev[j]``, lies before ``lo``. So::

    count_distinct(lo, hi) = #{ j in [lo, hi) : prev[j] < lo }
    sum_distinct(lo, hi)   = sum of x[j] over the same rows

Frames starting at the partition start (growing frames, whole partitions) need one prefix sum
of first-in-partition flags. Other frames need a 2-D dominance count, answered by a
merge-sort tree over ``prev``: level L sorts ``prev`` inside blocks of 2**L rows and keeps
prefix sums of the weights in that order; a frame decomposes into O(log length) blocks
(bottom-up segment-tree walk, vectorized over all rows per level), each answered with one
np.searchsorted on ``block * K + prev`` (ascending over the whole level). Only the levels the
longest frame needs are built: O(n log(frame)) memory and time.

EXCLUDE CURRENT ROW removes the current row's value when it occurs nowhere else in the frame;
EXCLUDE GROUP / TIES go through materialized frames (``distinct_elements``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.functions.window.frames import FrameBounds
from plansight.engine.functions.window.materialize import Expansion, expand_frames
from plansight.engine.functions.window.prefix_sums import Segments, prefix
from plansight.engine.functions.window.summation import channel_prefix, channel_sum
from plansight.engine.kernels.nested_keys import nested_codes


def value_codes(values: pa.Array) -> np.ndarray:
    """int64 codes, equal exactly for equal values (NaN == NaN, -0.0 == 0.0); NULL slots hold
    an arbitrary code. Numbers are their own codes (no sort); structs, lists, maps and
    intervals get nested_codes (NULLs inside equal); other types get dense ranks.

    Example:
        >>> value_codes(pa.array(["b", "a", "b", None]))[:3].tolist()
        [1, 0, 1]
    """
    typ = values.type
    if pa.types.is_dictionary(typ):
        values = values.dictionary_decode()
        typ = values.type
    if pa.types.is_floating(typ):
        floats = values.cast(pa.float64()).fill_null(0.0).to_numpy()
        # one bit pattern per value: +0.0 for -0.0, one canonical NaN
        floats = np.where(np.isnan(floats), np.nan, floats + 0.0)
        return floats.view(np.int64)
    if pa.types.is_boolean(typ):
        return values.cast(pa.int64()).fill_null(0).to_numpy()
    if pa.types.is_integer(typ):
        raw = values.fill_null(0).to_numpy()
        return raw.view(np.int64) if raw.dtype == np.uint64 else raw.astype(np.int64)
    if pa.types.is_temporal(typ) and not pa.types.is_interval(typ):
        storage = pa.int32() if typ.bit_width == 32 else pa.int64()
        return values.cast(storage).fill_null(0).to_numpy().astype(np.int64)
    if pa.types.is_nested(typ) or pa.types.is_interval(typ):
        return nested_codes(values)[0]
    ranks = pc.rank(values, sort_keys="ascending", tiebreaker="dense")
    return ranks.to_numpy().astype(np.int64) - 1


def occurrences(codes: np.ndarray, contributing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(prev, next): nearest contributing rows with the same code before / after each row
    (-1 / n when there is none). Non-contributing rows get prev = n, so they never count."""
    n = len(codes)
    rows = np.flatnonzero(contributing).astype(np.int64)
    order = np.argsort(codes[rows], kind="stable")  # rows stay ascending within a code
    sorted_rows, sorted_codes = rows[order], codes[rows][order]
    same = sorted_codes[1:] == sorted_codes[:-1]
    prev = np.full(n, n, dtype=np.int64)
    nxt = np.full(n, n, dtype=np.int64)
    prev[sorted_rows] = np.concatenate(([-1], np.where(same, sorted_rows[:-1], -1)))
    nxt[sorted_rows] = np.concatenate((np.where(same, sorted_rows[1:], n), [n]))
    return prev, nxt


def distinct_sums(bounds: FrameBounds, codes: np.ndarray, contributing: np.ndarray,
                  channels: tuple[np.ndarray, ...]) -> tuple[np.ndarray, list[np.ndarray]]:
    """(count, channel sums) over the distinct contributing values of every frame.

    Supports EXCLUDE NO OTHERS and CURRENT ROW (see ``distinct_elements`` for the rest).
    """
    assert bounds.spec.exclude in ("no_others", "current_row")
    prev, nxt = occurrences(codes, contributing)
    lo, hi = bounds.start, bounds.end
    if np.array_equal(lo, bounds.layout.row_partition_start):
        first = prev < bounds.layout.row_partition_start
        count = _weighted(first.astype(np.int64), lo, hi)
        sums = [_weighted(np.where(first, c, c.dtype.type(0)), lo, hi) for c in channels]
    else:
        max_length = int((hi - lo).max()) if len(lo) else 1
        count, sums = _DistinctTree(prev, channels, max_length).query(lo, hi)
    if bounds.spec.exclude == "current_row":
        rows = bounds.layout.row_index
        alone = (contributing & (rows >= lo) & (rows < hi) & (prev < lo) & (nxt >= hi))
        count = count - alone
        sums = [s - np.where(alone, c, c.dtype.type(0)) for s, c in zip(sums, channels)]
    return count, sums


def distinct_elements(segments: Segments, codes: np.ndarray, contributing: np.ndarray,
                      what: str) -> Expansion:
    """Materialized frames keeping only the first occurrence of each value per frame, in
    frame order."""
    expansion = expand_frames(segments, contributing, what)
    owner = expansion.owner()
    element_codes = codes[expansion.rows]
    order = np.lexsort((element_codes, owner))  # stable: frame order inside equal values
    sorted_owner, sorted_codes = owner[order], element_codes[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (sorted_owner[1:] != sorted_owner[:-1]) | (sorted_codes[1:] != sorted_codes[:-1])
    kept = np.sort(order[first])
    counts = np.bincount(owner[kept], minlength=len(expansion.offsets) - 1)
    return Expansion(expansion.rows[kept], prefix(counts))


def _weighted(weights: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return channel_sum(channel_prefix(weights), [(lo, hi)])


class _DistinctTree:
    """Merge-sort tree over ``prev`` with weight prefix sums per level."""

    def __init__(self, prev: np.ndarray, channels: tuple[np.ndarray, ...], max_length: int):
        n = len(prev)
        top = min(max(1, int(max_length)).bit_length() + 1, max(n - 1, 1).bit_length())
        block = 1 << top
        size = -(-n // block) * block
        keys = np.full(size, n + 1, dtype=np.int64)  # padding never counts (prev + 1 > lo + 1)
        keys[:n] = prev
        weights = []
        for channel in channels:
            padded = np.zeros(size, dtype=channel.dtype)
            padded[:n] = channel
            weights.append(padded)
        self.sum_dtypes = [np.float64 if c.dtype == np.float64 else np.int64 for c in channels]
        self.stride = np.int64(n + 3)
        self.levels: list[tuple[np.ndarray, list]] = []
        for level in range(top + 1):
            if level:
                grid = keys.reshape(-1, 1 << level)
                order = np.argsort(grid, axis=1, kind="stable")
                rows = np.arange(grid.shape[0], dtype=np.int64) << level
                flat = (order + rows[:, None]).ravel()
                keys = keys[flat]
                weights = [w[flat] for w in weights]
            node = np.arange(size, dtype=np.int64) >> level
            self.levels.append((node * self.stride + keys + 1,
                                [channel_prefix(w) for w in weights]))

    def query(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        count = np.zeros(len(lo), dtype=np.int64)
        sums = [np.zeros(len(lo), dtype=dtype) for dtype in self.sum_dtypes]
        threshold = lo + 1
        left, right = lo.copy(), hi.copy()
        for level, (composite, prefixes) in enumerate(self.levels):
            active = left < right
            if not active.any():
                break
            take = active & ((left & 1) == 1)
            self._add(level, composite, prefixes, left, threshold, take, count, sums)
            left = left + take
            take = (left < right) & ((right & 1) == 1)
            right = right - take
            self._add(level, composite, prefixes, right, threshold, take, count, sums)
            left >>= 1
            right >>= 1
        assert not (left < right).any(), "merge-sort tree built too shallow for the frames"
        return count, sums

    def _add(self, level: int, composite: np.ndarray, prefixes: list, node: np.ndarray,
             threshold: np.ndarray, take: np.ndarray, count: np.ndarray,
             sums: list[np.ndarray]) -> None:
        if not take.any():
            return
        picked = node[take]
        base = picked << level
        pos = np.searchsorted(composite, picked * self.stride + threshold[take], side="left")
        count[take] += pos - base
        for total, prefix_sums in zip(sums, prefixes):
            total[take] += channel_sum(prefix_sums, [(base, pos)])
