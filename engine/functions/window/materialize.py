"""Materialized frames: the contributing rows of every frame, listed one after the other.

For aggregates with no invertible or idempotent structure (``string_agg``, DISTINCT over
frames with holes) the frame rows are expanded into one flat element array::

    row 0: frame rows [3, 4]     elements  3 4 | 5 | 5 6 7 | ...
    row 1: frame rows [5]        offsets   0   2   3       6
    row 2: frame rows [5, 6, 7]

Expansion is a vectorized ragged ``arange`` (np.repeat + cumsum) over the contributing rows
only; its size is the sum of all frame lengths, so it is capped (``MAX_ELEMENTS``) and bigger
requests raise NotSupportedError naming the frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plansight.engine.errors import NotSupportedError
from plansight.engine.functions.window.prefix_sums import Segments, prefix

MAX_ELEMENTS = 50_000_000


@dataclass(frozen=True, eq=False)
class Expansion:
    """Frame elements of every output row.

    Attributes:
        rows: int64 input-row index of every element, frame by frame in row order.
        offsets: int64 (n + 1); elements of output row i are ``rows[offsets[i]:offsets[i+1]]``.
    """

    rows: np.ndarray
    offsets: np.ndarray

    def owner(self) -> np.ndarray:
        """Output row of every element."""
        counts = np.diff(self.offsets)
        return np.repeat(np.arange(len(counts), dtype=np.int64), counts)


def expand_frames(segments: Segments, contributing: np.ndarray, what: str) -> Expansion:
    """List the contributing rows of every row's frame segments, in frame order.

    Example:
        >>> contributing = np.array([True, False, True, True])
        >>> seg = [(np.array([0, 0]), np.array([1, 4])), (np.array([2, 4]), np.array([4, 4]))]
        >>> e = expand_frames(seg, contributing, "demo")
        >>> e.rows.tolist(), e.offsets.tolist()
        ([0, 2, 3, 0, 2, 3], [0, 3, 6])
    """
    positions = np.flatnonzero(contributing).astype(np.int64)
    before = prefix(contributing)
    starts = np.stack([before[lo] for lo, _ in segments], axis=1).ravel()
    lengths = np.stack([before[hi] - before[lo] for lo, hi in segments], axis=1).ravel()
    total = int(lengths.sum())
    if total > MAX_ELEMENTS:
        raise NotSupportedError(
            f"{what} would materialize {total:,} frame rows (limit {MAX_ELEMENTS:,}); "
            "use a smaller frame, a whole-partition frame or a frame starting at "
            "UNBOUNDED PRECEDING")
    compact = ragged_arange(starts, lengths)
    per_row = lengths.reshape(-1, len(segments)).sum(axis=1)
    return Expansion(positions[compact], prefix(per_row))


def ragged_arange(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for every (s, l), without a Python loop.

    Example:
        >>> ragged_arange(np.array([5, 0, 2]), np.array([2, 0, 3])).tolist()
        [5, 6, 2, 3, 4]
    """
    total = int(lengths.sum())
    run_offsets = prefix(lengths)[:-1]
    return np.arange(total, dtype=np.int64) + np.repeat(starts - run_offsets, lengths)
