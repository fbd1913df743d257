"""Ranking functions: pure integer arithmetic on partition and peer-group boundaries.

With ``pstart``/``pend`` the partition bounds, ``peer_start``/``peer_end`` the peer-group
bounds and ``group`` the global peer-group index of row i::

    row_number    i - pstart + 1
    rank          peer_start - pstart + 1
    dense_rank    group - first_group + 1
    percent_rank  (rank - 1) / (partition size - 1), 0 for a single-row partition
    cume_dist     (peer_end - pstart) / partition size
    ntile(k)      DuckDB's split: the first (size % k) buckets get one extra row

Frames do not apply to ranking functions.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plansight.engine.errors import PlanError
from plansight.engine.functions.window.peers import PartitionLayout, PeerGroups, validity

RANKING_FUNCTIONS = ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile")


def ranking(func: str, args: list[pa.Array], layout: PartitionLayout,
            peers: PeerGroups | None) -> pa.Array:
    """``func`` for every row; ``peers`` may be None for row_number and ntile.

    Example:
        >>> from .peers import partition_layout, peer_groups
        >>> layout = partition_layout(np.array([0, 4]))
        >>> peers = peer_groups(layout, [pa.array([1, 2, 2, 3])])
        >>> ranking("rank", [], layout, peers).to_pylist()
        [1, 2, 2, 4]
    """
    if func == "row_number":
        return pa.array(_row_numbers(layout.partition_starts, layout.num_rows),
                        type=pa.int64())
    rows = layout.row_index
    pstart, pend = layout.row_partition_start, layout.row_partition_end
    if func == "ntile":
        return _ntile(args[0], rows - pstart, pend - pstart)
    assert peers is not None
    if func == "rank":
        return pa.array(peers.peer_start - pstart + 1, type=pa.int64())
    if func == "dense_rank":
        return pa.array(peers.group_index - peers.first_group + 1, type=pa.int64())
    size = (pend - pstart).astype(np.float64)
    if func == "percent_rank":
        denominator = np.maximum(size - 1, 1)
        return pa.array((peers.peer_start - pstart) / denominator, type=pa.float64())
    if func == "cume_dist":
        return pa.array((peers.peer_end - pstart) / size, type=pa.float64())
    raise PlanError(f"unknown ranking function {func!r}")


def _row_numbers(starts: np.ndarray, num_rows: int) -> np.ndarray:
    """1, 2, ... within every partition: a running sum of ones that drops back at each
    partition start (two passes; row index minus partition start took five arrays).

    Example:
        >>> _row_numbers(np.array([0, 3, 3, 5]), 5).tolist()
        [1, 2, 3, 1, 2]
    """
    steps = np.ones(num_rows, dtype=np.int64)
    sizes = np.diff(starts)
    firsts, sizes = starts[:-1][sizes > 0], sizes[sizes > 0]
    steps[firsts[1:]] = 1 - sizes[:-1]
    return np.cumsum(steps, out=steps)


def _ntile(buckets_arg: pa.Array, position: np.ndarray, size: np.ndarray) -> pa.Array:
    if not (pa.types.is_integer(buckets_arg.type) or pa.types.is_null(buckets_arg.type)):
        raise PlanError(f"ntile() needs an integer argument, got {buckets_arg.type}")
    null = ~validity(buckets_arg)
    if pa.types.is_null(buckets_arg.type):
        return pa.nulls(len(position), type=pa.int64())
    buckets = buckets_arg.cast(pa.int64()).fill_null(1).to_numpy()
    if np.any(buckets[~null] <= 0):
        raise PlanError("Argument for ntile must be greater than zero")
    buckets = np.minimum(buckets, size)
    bucket_size = size // buckets
    large = size - buckets * bucket_size  # buckets with one extra row
    small_start = large * (bucket_size + 1)
    in_large = position < small_start
    result = np.where(in_large, 1 + position // (bucket_size + 1),
                      1 + large + (position - small_start) // np.maximum(bucket_size, 1))
    return pa.array(result, type=pa.int64(), mask=null)
