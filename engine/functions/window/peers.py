"""Partition and peer-group boundaries of rows already sorted by (partition keys, order keys).

Every window kernel works on integer row positions. A *partition* is a contiguous run of rows
given by the caller (``partition_starts``); a *peer group* is a maximal run of rows of one
partition whose ORDER BY keys are all equal (NULL equals NULL, NaN equals NaN, as in DuckDB's
sort). Without order keys the whole partition is one peer group.

::

    rows            0  1  2  3  4 | 5  6  7
    order key       1  1  2  N  N | 3  3  4        (N = NULL, a peer of N)
    group_index     0  0  1  2  2 | 3  3  4
    peer_start      0  0  2  3  3 | 5  5  7
    peer_end        2  2  3  5  5 | 7  7  8

All arrays are computed at once for all rows: one comparison of each key with itself shifted
by one row, a cumulative sum, and gathers. No Python loop over rows or partitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import NotSupportedError, PlanError


@dataclass(frozen=True, eq=False)
class PartitionLayout:
    """Per-row partition bounds of ``num_rows`` sorted rows.

    The per-row arrays are built on first use: a kernel that walks the partitions itself
    (a moving SUM/MIN over a fixed ROWS frame, ROW_NUMBER) reads only ``partition_starts``,
    and three gathers of n int64 each were an eighth of such a query.

    Attributes:
        num_rows: total number of rows.
        partition_starts: int64, first row of each partition plus ``num_rows`` as last element.
        partition_index: int64 per row, index of the row's partition.
        row_partition_start: int64 per row, first row of the row's partition.
        row_partition_end: int64 per row, one past the last row of the row's partition.
    """

    num_rows: int
    partition_starts: np.ndarray

    @cached_property
    def partition_index(self) -> np.ndarray:
        sizes = np.diff(self.partition_starts)
        return np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)

    @cached_property
    def row_partition_start(self) -> np.ndarray:
        return self.partition_starts[:-1][self.partition_index]

    @cached_property
    def row_partition_end(self) -> np.ndarray:
        return self.partition_starts[1:][self.partition_index]

    @cached_property
    def row_index(self) -> np.ndarray:
        """0..num_rows-1 as int64."""
        return np.arange(self.num_rows, dtype=np.int64)

    @cached_property
    def longest_partition(self) -> int:
        """Rows of the largest partition (0 without rows)."""
        return int(np.diff(self.partition_starts).max()) if self.num_rows else 0


def partition_layout(partition_starts: np.ndarray) -> PartitionLayout:
    """Validate ``partition_starts`` and broadcast partition bounds to every row.

    Example:
        >>> layout = partition_layout(np.array([0, 2, 2, 5]))
        >>> layout.partition_index.tolist(), layout.row_partition_end.tolist()
        ([0, 0, 2, 2, 2], [2, 2, 5, 5, 5])
    """
    starts = np.asarray(partition_starts)
    if starts.ndim != 1 or len(starts) == 0:
        raise PlanError("partition_starts must be a 1-D array with at least one element "
                        "(the total row count)")
    if len(starts) and not np.issubdtype(starts.dtype, np.integer):
        raise PlanError(f"partition_starts must hold integers, got dtype {starts.dtype}")
    starts = starts.astype(np.int64, copy=False)
    if starts[0] != 0 or np.any(np.diff(starts) < 0):
        raise PlanError("partition_starts must start at 0 and be non-decreasing")
    return PartitionLayout(num_rows=int(starts[-1]), partition_starts=starts)


@dataclass(frozen=True, eq=False)
class PeerGroups:
    """Peer groups (rows of a partition with equal order keys) of sorted rows.

    Attributes:
        group_index: int64 per row, global index of the row's peer group.
        group_starts: int64, first row of every peer group plus ``num_rows`` (len groups + 1).
        peer_start: int64 per row, first row of the row's peer group.
        peer_end: int64 per row, one past the last row of the row's peer group.
        first_group: int64 per row, index of the first peer group of the row's partition.
        end_group: int64 per row, one past the index of the last group of the row's partition.
    """

    group_index: np.ndarray
    group_starts: np.ndarray
    peer_start: np.ndarray
    peer_end: np.ndarray
    first_group: np.ndarray
    end_group: np.ndarray


def peer_groups(layout: PartitionLayout, order_keys: list[pa.Array]) -> PeerGroups:
    """Peer groups of the sorted rows: a new group starts at every partition start and at every
    row whose order keys differ from the previous row's.

    Example:
        >>> layout = partition_layout(np.array([0, 5, 8]))
        >>> peers = peer_groups(layout, [pa.array([1, 1, 2, None, None, 3, 3, 4])])
        >>> peers.peer_start.tolist(), peer_groups(layout, []).peer_end.tolist()
        ([0, 0, 2, 3, 3, 5, 5, 7], [5, 5, 5, 5, 5, 8, 8, 8])
    """
    n = layout.num_rows
    is_start = np.zeros(n + 1, dtype=bool)
    starts = layout.partition_starts
    is_start[starts] = True
    for key in order_keys:
        is_start[1:n] |= adjacent_differs(key)
    is_start[n] = True
    group_starts = np.flatnonzero(is_start).astype(np.int64)
    group_index = np.cumsum(is_start[:n], dtype=np.int64) - 1
    peer_start = group_starts[group_index]
    peer_end = group_starts[group_index + 1]
    # group index of every partition start (empty partitions point at the next group)
    partition_first = np.searchsorted(group_starts, starts, side="left").astype(np.int64)
    pidx = layout.partition_index
    return PeerGroups(group_index, group_starts, peer_start, peer_end,
                      partition_first[:-1][pidx], partition_first[1:][pidx])


def adjacent_differs(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Bool array of len(values) - 1: row i+1 differs from row i (NULL == NULL, NaN == NaN).

    Example:
        >>> adjacent_differs(pa.array([1.0, 1.0, None, None, float("nan"), float("nan")])).tolist()
        [False, True, False, True, False]
    """
    values = as_array(values)
    n = len(values)
    if n < 2:
        return np.zeros(0, dtype=bool)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if pa.types.is_null(values.type):
        return np.zeros(n - 1, dtype=bool)
    if values.null_count == 0 and pa.types.is_integer(values.type):
        numbers = values.to_numpy()
        return numbers[1:] != numbers[:-1]
    after, before = values.slice(1), values.slice(0, n - 1)
    try:
        differs = pc.not_equal(after, before)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as e:
        raise NotSupportedError(
            f"window ORDER BY / PARTITION BY key of type {values.type} is not supported") from e
    if pa.types.is_floating(values.type):
        both_nan = pc.and_(pc.is_nan(after), pc.is_nan(before))
        differs = pc.and_not(differs, both_nan)
    differs = _to_bool(differs.fill_null(False))
    valid_after = _to_bool(after.is_valid())
    valid_before = _to_bool(before.is_valid())
    return differs | (valid_after != valid_before)


def as_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A single contiguous Array (ChunkedArrays are combined)."""
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            return values.chunk(0)
        return values.combine_chunks() if values.num_chunks else pa.array([], type=values.type)
    if isinstance(values, pa.Array):
        return values
    raise PlanError("window function arguments must be pyarrow arrays, got "
                    f"{type(values).__name__}")


def _to_bool(values: pa.Array) -> np.ndarray:
    return values.to_numpy(zero_copy_only=False).astype(bool, copy=False)


def validity(values: pa.Array) -> np.ndarray:
    """Bool numpy array, True where ``values`` is not NULL."""
    if values.null_count == 0:
        return np.ones(len(values), dtype=bool)
    if pa.types.is_null(values.type):
        return np.zeros(len(values), dtype=bool)
    return _to_bool(values.is_valid())
