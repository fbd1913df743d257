"""DuckDB's ORDER BY ALL: every select item, left to right, in the direction and NULL
order given (and the session's default NULL order when none is)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.differential.harness import assert_same, run_duckdb, run_plansight

TABLES = {"t": pa.table({"a": pa.array([2, 1, None, 1, 2], pa.int64()),
                         "b": pa.array(["x", None, "y", "a", "x"]),
                         "c": pa.array([0.5, -0.0, None, 1.5, 0.5])})}

QUERIES = [
    "SELECT a, b FROM t ORDER BY ALL",
    "SELECT a, b FROM t ORDER BY ALL DESC",
    "SELECT b, a, c FROM t ORDER BY ALL NULLS FIRST",
    "SELECT b, a FROM t ORDER BY ALL DESC NULLS LAST",
    "SELECT a, count(*) AS n FROM t GROUP BY ALL ORDER BY ALL DESC",
    "SELECT DISTINCT b FROM t ORDER BY ALL LIMIT 2",
    "SELECT a + 1 AS a1, upper(b) FROM t WHERE a IS NOT NULL ORDER BY ALL",
]


@pytest.mark.parametrize("partitions,batch_size", [(1, 8192), (2, 1), (3, 3), (8, 7)])
@pytest.mark.parametrize("sql", QUERIES)
def test_order_by_all(sql: str, partitions: int, batch_size: int) -> None:
    actual = run_plansight(sql, TABLES, target_partitions=partitions, batch_size=batch_size)
    expected = run_duckdb(sql, TABLES)
    # every column is a key: the order is total up to identical rows
    assert_same(actual, expected, ordered=True, key_positions=list(range(actual.num_columns)),
                limited="LIMIT" in sql)
