"""Uncorrelated scalar subqueries in window arguments and frame offsets, checked against DuckDB.

A frame offset must be known before the frames are cut: its subquery runs once while the
query is planned. In a window argument the subquery is an ordinary value (decorrelated into a
one-row join).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import plansight as ps
from plansight.errors import ExecutionError, PlanError
from tests.differential.harness import check
from tests.windows.window_cases import TABLES

U = pa.table({"k": pa.array([1, 2, None], pa.int64()), "f": [0.5, 2.5, None]})

QUERIES = [
    "SELECT id, sum(v) OVER (PARTITION BY p ORDER BY o, id ROWS BETWEEN (SELECT 2) PRECEDING "
    "AND CURRENT ROW) AS s FROM t",
    "SELECT id, count(*) OVER (PARTITION BY p ORDER BY o, id ROWS BETWEEN (SELECT min(k) "
    "FROM u) PRECEDING AND (SELECT max(k) FROM u) + 1 FOLLOWING) AS s FROM t",
    "SELECT id, sum(v) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN (SELECT max(f) FROM u) "
    "PRECEDING AND (SELECT min(k) FROM u) FOLLOWING) AS s FROM t",
    "SELECT id, min(v) OVER (PARTITION BY p ORDER BY o GROUPS BETWEEN (SELECT max(k) FROM u) "
    "PRECEDING AND CURRENT ROW EXCLUDE TIES) AS s FROM t",
    "SELECT id, avg(v) OVER w AS s FROM t "
    "WINDOW w AS (PARTITION BY p ORDER BY o, id ROWS (SELECT count(*) FROM u) PRECEDING)",
    "WITH n AS (SELECT 1 AS width) SELECT id, max(v) OVER (PARTITION BY p ORDER BY o, id ROWS "
    "BETWEEN (SELECT width FROM n) PRECEDING AND (SELECT width FROM n) FOLLOWING) AS s FROM t",
    # window arguments
    "SELECT id, lag(v, (SELECT max(k) FROM u)) OVER (PARTITION BY p ORDER BY o, id) AS a, "
    "lead(v, (SELECT min(k) FROM u), (SELECT max(f) FROM u)) OVER (PARTITION BY p ORDER BY o, "
    "id) AS b FROM t",
    "SELECT id, nth_value(v, (SELECT max(k) FROM u)) OVER (PARTITION BY p ORDER BY o, id) AS a, "
    "ntile((SELECT max(k) + 1 FROM u)) OVER (PARTITION BY p ORDER BY o, id) AS b FROM t",
    "SELECT id, sum(v * (SELECT max(f) FROM u)) OVER (PARTITION BY p ORDER BY o, id ROWS "
    "BETWEEN (SELECT 1) PRECEDING AND CURRENT ROW) AS s FROM t",
    "SELECT id, sum(v) FILTER (WHERE o > (SELECT max(k) FROM u)) OVER (PARTITION BY p) AS s "
    "FROM t",
]

RUNS = [(1, 8192), (2, 3), (3, 7), (8, 1)]  # (partitions, batch size)


@pytest.mark.parametrize("table", ["mixed", "empty"])
@pytest.mark.parametrize(("partitions", "batch_size"), RUNS)
@pytest.mark.parametrize("sql", QUERIES)
def test_subqueries_in_windows_match_duckdb(sql, partitions, batch_size, table):
    check(sql, {"t": TABLES[table], "u": U}, target_partitions=partitions,
          batch_size=batch_size)


@pytest.mark.parametrize("executor", ["sorted", "partition", "hash"])
@pytest.mark.parametrize("sql", QUERIES[:1] + QUERIES[6:8])
def test_subqueries_in_windows_match_duckdb_in_every_executor(sql, executor):
    check(sql, {"t": TABLES["mixed"], "u": U}, target_partitions=2, batch_size=7,
          window_executor=executor)


@pytest.mark.parametrize(("offset", "error", "message"), [
    ("(SELECT k FROM u)", ExecutionError, "More than one row"),
    ("(SELECT max(k) FROM u WHERE k > 5)", PlanError, "must not be NULL"),
    ("(SELECT -1)", PlanError, "negative"),
    ("(SELECT t.o)", PlanError, "does not exist"),  # no correlation with the query's rows
])
def test_bad_subquery_offsets_are_clear_errors(offset, error, message):
    session = ps.Session(target_partitions=1)
    session.register("t", TABLES["mixed"])
    session.register("u", U)
    with pytest.raises(error, match=message):
        session.sql(f"SELECT sum(v) OVER (ORDER BY o ROWS {offset} PRECEDING) FROM t").to_arrow()
