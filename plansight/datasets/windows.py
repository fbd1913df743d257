"""Synthetic window-function workloads of DataFusion's partition-streaming RFC.

Each workload is one table ``(c1 utf8, sn int64, v float64)``: ``c1`` is a 100-byte
partition key, ``sn`` numbers the rows of a partition (0, 1, 2, ... — unique within it),
``v`` is a uniform random float in [0, 1). Partitions have equal sizes (give or take one
row) and the rows are shuffled, so every engine must sort or hash to find partitions.

    name          rows        partitions  rows per partition
    small_1m      1,000,000   6,666       150
    medium_2_5m   2,500,000   16,666      150
    large_2m      2,000,000   4           500,000
    single_2m     2,000,000   1           2,000,000
    micro_1_5m    1,500,000   15,000      100
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

KEY_WIDTH = 100  # bytes of every c1 value


class WindowWorkload(NamedTuple):
    """Rows and partitions of a window workload at scale 1."""

    rows: int
    partitions: int


WINDOW_WORKLOADS: dict[str, WindowWorkload] = {
    "small_1m": WindowWorkload(1_000_000, 6_666),
    "medium_2_5m": WindowWorkload(2_500_000, 16_666),
    "large_2m": WindowWorkload(2_000_000, 4),
    "single_2m": WindowWorkload(2_000_000, 1),
    "micro_1_5m": WindowWorkload(1_500_000, 15_000),
}

# The five queries of the RFC's benchmark, over a table named t.
WINDOW_QUERIES: dict[str, str] = {
    "count_running": "SELECT c1, sn, v, COUNT(sn) OVER (PARTITION BY c1 ORDER BY sn) FROM t",
    "sum_rows_100": "SELECT c1, sn, v, SUM(v) OVER (PARTITION BY c1 ORDER BY sn "
                    "ROWS BETWEEN 100 PRECEDING AND CURRENT ROW) FROM t",
    "min_rows_100": "SELECT c1, sn, v, MIN(v) OVER (PARTITION BY c1 ORDER BY sn "
                    "ROWS BETWEEN 100 PRECEDING AND CURRENT ROW) FROM t",
    "rank_lag": "SELECT c1, sn, v, RANK() OVER (PARTITION BY c1 ORDER BY sn), "
                "LAG(v) OVER (PARTITION BY c1 ORDER BY sn) FROM t",
    "sum_partition": "SELECT c1, sn, v, SUM(v) OVER (PARTITION BY c1) FROM t",
}


def window_workload(name: str, scale: float = 1.0, seed: int = 0) -> pa.Table:
    """Generate the window workload ``name`` with ``scale`` times its rows.

    The number of partitions does not change with ``scale`` (it is capped at the row count),
    so scaling grows the partitions.

    Args:
        name: One of ``WINDOW_WORKLOADS``.
        scale: Multiplier of the row count.
        seed: Seed of the random keys, values and shuffle.

    Example:
        >>> t = window_workload("small_1m", scale=0.01)
        >>> t.num_rows, len(t.column("c1").unique()), t.schema.names
        (10000, 6666, ['c1', 'sn', 'v'])
    """
    if name not in WINDOW_WORKLOADS:
        raise ValueError(
            f"unknown window workload {name!r}; expected one of {', '.join(WINDOW_WORKLOADS)}"
        )
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    spec = WINDOW_WORKLOADS[name]
    rows = max(1, round(spec.rows * scale))
    partitions = min(spec.partitions, rows)
    rng = np.random.default_rng([seed, list(WINDOW_WORKLOADS).index(name)])

    keys = _partition_keys(rng, partitions)
    # Row i of the unshuffled table belongs to partition i % partitions and is its
    # (i // partitions)-th row; a permutation then shuffles the rows.
    order = rng.permutation(rows)
    partition = order % partitions
    sn = order // partitions
    return pa.Table.from_arrays(
        [keys.take(pa.array(partition)), pa.array(sn, pa.int64()),
         pa.array(rng.random(rows), pa.float64())],
        schema=pa.schema([pa.field("c1", pa.string()), pa.field("sn", pa.int64()),
                          pa.field("v", pa.float64())]),
    )


def _partition_keys(rng: np.random.Generator, partitions: int) -> pa.StringArray:
    """Distinct 100-byte keys: 92 random letters, then the partition number in 8 digits.

    The random prefix makes comparisons realistic (keys differ early, in random order);
    the numeric suffix guarantees distinctness.
    """
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", np.uint8)
    matrix = np.empty((partitions, KEY_WIDTH), dtype=np.uint8)
    matrix[:, : KEY_WIDTH - 8] = letters[rng.integers(0, len(letters),
                                                      size=(partitions, KEY_WIDTH - 8))]
    powers = 10 ** np.arange(7, -1, -1, dtype=np.int64)
    matrix[:, KEY_WIDTH - 8:] = (np.arange(partitions)[:, None] // powers) % 10 + ord("0")
    offsets = np.arange(partitions + 1, dtype=np.int32) * KEY_WIDTH
    return pa.StringArray.from_buffers(partitions, pa.py_buffer(offsets), pa.py_buffer(matrix))
