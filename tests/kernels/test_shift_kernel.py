"""lag/lead by a constant offset (kernels/shift.py): sources against a per-row reference, and
the SQL against DuckDB with NULL values and keys, empty partitions and tables, offsets past
every partition, at partitions 1/2/3/8 and batch sizes 1/3/7/8192."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from plansight.engine.functions.window.navigation import lag_lead
from plansight.engine.functions.window.peers import partition_layout
from plansight.engine.kernels.shift import shifted_sources
from tests.differential.harness import assert_same, run_duckdb, run_plansight


def _reference(sizes, back):
    """(source, found) one row at a time: row i reads i - back inside its own partition."""
    source, found = [], []
    start = 0
    for size in sizes:
        for i in range(start, start + size):
            inside = start <= i - back < start + size
            source.append(i - back if inside else 0)
            found.append(inside)
        start += size
    return source, found


@pytest.mark.parametrize("sizes", [[1], [5], [3, 1, 4], [0, 2, 0, 0, 5, 0], [40, 1, 7]])
@pytest.mark.parametrize("back", [0, 1, 2, 4, 5, 39, -1, -3, -6])
def test_sources_equal_a_row_by_row_reference(sizes, back):
    starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    source, found = shifted_sources(starts, back)
    assert (source.tolist(), found.tolist()) == _reference(sizes, back)


@pytest.mark.parametrize("func", ["lag", "lead"])
@pytest.mark.parametrize("offset", [None, 0, 1, 3, 100, -2])
def test_constant_offsets_equal_the_per_row_path(func, offset):
    # the same offsets given per row (one NULL among them) take the general path
    layout = partition_layout(np.array([0, 4, 4, 9, 10]))
    values = pa.array([1.5, None, 3.0, 4.0, 5.0, 6.0, None, 8.0, 9.0, 10.0])
    k = 1 if offset is None else offset
    constant = [values] if offset is None else [values, pa.array([k] * 10)]
    per_row = [values, pa.array([k] * 9 + [None])]
    got = lag_lead(func, constant, layout, ignore_nulls=False).to_pylist()
    general = lag_lead(func, per_row, layout, ignore_nulls=False).to_pylist()
    assert got[:9] == general[:9]
    with_default = lag_lead(func, [values, pa.array([k] * 10), pa.array([-1.0] * 10)], layout,
                            ignore_nulls=False).to_pylist()
    assert with_default == [-1.0 if g is None and (i - k if func == "lag" else i + k)
                            not in range(*_bounds(layout, i)) else g
                            for i, g in enumerate(got)]


def _bounds(layout, i):
    p = int(np.searchsorted(layout.partition_starts, i, side="right")) - 1
    return int(layout.partition_starts[p]), int(layout.partition_starts[p + 1])


def _table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": pa.array(np.arange(rows)),
        "g": pa.array(rng.integers(0, 7, rows), mask=rng.random(rows) < 0.1),
        "v": pa.array(rng.normal(size=rows).round(2), mask=rng.random(rows) < 0.2),
        "s": pa.array([f"s{i % 13}" for i in range(rows)], mask=rng.random(rows) < 0.1),
    })


TABLES = {"t": _table(200, 5), "t_empty": _table(200, 5).slice(0, 0),
          "t_one": _table(200, 5).slice(0, 1)}
WINDOWS = ["lag(v) OVER (PARTITION BY g ORDER BY id)",
           "lead(v, 2) OVER (PARTITION BY g ORDER BY id DESC)",
           "lag(s, 3, 'none') OVER (PARTITION BY g ORDER BY id)",
           "lead(v, 0) OVER (PARTITION BY g ORDER BY id)",
           "lag(v, -2, 0.5) OVER (PARTITION BY g ORDER BY id)",
           "lead(s, 1000) OVER (PARTITION BY g ORDER BY id)",
           "lag(v, 1) OVER (ORDER BY id)",
           "rank() OVER (PARTITION BY g ORDER BY id) * 10 + lag(id, 2, -1) OVER "
           "(PARTITION BY g ORDER BY id)"]


@pytest.mark.parametrize("table", sorted(TABLES))
@pytest.mark.parametrize(("partitions", "batch_size"), [(1, 8192), (2, 3), (3, 7), (8, 1)])
@pytest.mark.parametrize("window", WINDOWS)
def test_constant_offsets_match_duckdb(window, partitions, batch_size, table):
    sql = f"SELECT id, {window} AS w FROM {table}"
    actual = run_plansight(sql, TABLES, target_partitions=partitions, batch_size=batch_size)
    assert_same(actual, run_duckdb(sql, TABLES), ordered=False, sql=sql)
