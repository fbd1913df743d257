"""plansight.datasets.windows: sizes, partition counts, key width, per-partition sequences."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from plansight.datasets import KEY_WIDTH, WINDOW_QUERIES, WINDOW_WORKLOADS, window_workload

EXPECTED = {
    "small_1m": (1_000_000, 6_666),
    "medium_2_5m": (2_500_000, 16_666),
    "large_2m": (2_000_000, 4),
    "single_2m": (2_000_000, 1),
    "micro_1_5m": (1_500_000, 15_000),
}


def test_catalogue():
    assert {name: tuple(spec) for name, spec in WINDOW_WORKLOADS.items()} == EXPECTED
    assert len(WINDOW_QUERIES) == 5


@pytest.mark.parametrize("name", list(EXPECTED))
def test_shape_at_reduced_scale(name):
    rows, partitions = EXPECTED[name]
    table = window_workload(name, scale=0.05)
    assert table.schema == pa.schema(
        [("c1", pa.string()), ("sn", pa.int64()), ("v", pa.float64())])
    assert table.num_rows == round(rows * 0.05)
    keys = table.column("c1")
    assert len(pc.unique(keys)) == partitions
    assert pc.min(pc.utf8_length(keys)).as_py() == pc.max(pc.binary_length(keys)).as_py() \
        == KEY_WIDTH
    # sn is unique within a partition and numbers it 0..size-1.
    stats = table.group_by("c1").aggregate(
        [("sn", "count_distinct"), ("sn", "count"), ("sn", "min"), ("sn", "max")])
    assert stats.column("sn_count_distinct").equals(stats.column("sn_count"))
    assert pc.all(pc.equal(stats.column("sn_min"), 0)).as_py()
    assert pc.all(pc.equal(pc.add(stats.column("sn_max"), 1), stats.column("sn_count"))).as_py()
    sizes = stats.column("sn_count").to_numpy()
    assert sizes.max() - sizes.min() <= 1
    values = table.column("v").to_numpy()
    assert 0.0 <= values.min() and values.max() < 1.0


def test_full_size_partition_counts():
    table = window_workload("micro_1_5m")
    assert table.num_rows == 1_500_000
    assert len(pc.unique(table.column("c1"))) == 15_000


def test_rows_are_shuffled():
    table = window_workload("small_1m", scale=0.01)
    sn = table.column("sn").to_numpy()
    assert not np.all(np.diff(sn) >= 0)
    first_keys = table.column("c1").slice(0, 50).to_pylist()
    assert first_keys != sorted(first_keys)


def test_deterministic():
    assert window_workload("large_2m", 0.01, seed=3).equals(window_workload("large_2m", 0.01, 3))
    assert not window_workload("large_2m", 0.01, 3).equals(window_workload("large_2m", 0.01, 4))


def test_scale_keeps_partitions():
    small = window_workload("small_1m", scale=0.1)
    large = window_workload("small_1m", scale=0.2)
    assert large.num_rows == 2 * small.num_rows
    assert len(pc.unique(small.column("c1"))) == len(pc.unique(large.column("c1"))) == 6_666


def test_unknown_name():
    with pytest.raises(ValueError, match="small_1m"):
        window_workload("nope")


@pytest.mark.parametrize("query", list(WINDOW_QUERIES))
def test_queries_run_on_duckdb(query):
    duckdb = pytest.importorskip("duckdb")
    t = window_workload("small_1m", scale=0.01)  # DuckDB finds the local t by name
    result = duckdb.sql(WINDOW_QUERIES[query]).to_arrow_table()
    assert result.num_rows == t.num_rows
