"""Subqueries in the ON condition of outer joins (LEFT, RIGHT, FULL), against DuckDB: each
subquery reads one side (or none) and is computed as a column of that side; one reading
both sides is a clear NotSupportedError. NULL keys and values, empty subqueries, ties,
partitions 1/2/3/8 and batch sizes 1/3/7/8192."""

from __future__ import annotations

import pyarrow as pa
import pytest

import plansight as ps
from tests.differential.harness import check

TABLES = {
    "a": pa.table({"k": pa.array([1, 2, 3, None, 5, 2], pa.int64()),
                   "x": pa.array([10, 20, 30, 40, None, 20], pa.int64())}),
    "b": pa.table({"k": pa.array([1, 2, 2, None, 7], pa.int64()),
                   "v": pa.array([1, 2, 3, 4, None], pa.int64())}),
    "c": pa.table({"w": pa.array([1, 3, None], pa.int64())}),
    "e": pa.table({"w": pa.array([], pa.int64())}),
}

QUERIES = [
    # uncorrelated, on the null-supplying side
    "SELECT a.k, a.x, b.v FROM a LEFT JOIN b ON a.k = b.k AND b.v IN (SELECT w FROM c)",
    "SELECT a.k, a.x, b.v FROM a LEFT JOIN b ON a.k = b.k AND b.v NOT IN (SELECT w FROM c)",
    "SELECT a.k, a.x, b.v FROM a LEFT JOIN b ON a.k = b.k AND b.v NOT IN (SELECT w FROM e)",
    # uncorrelated, on the preserved side: rows stay, matches change
    "SELECT a.k, a.x, b.v FROM a LEFT JOIN b ON a.k = b.k AND a.x > (SELECT min(w) FROM c)",
    "SELECT a.k, a.x, b.v FROM a LEFT JOIN b ON a.k = b.k AND a.x > (SELECT min(w) FROM e)",
    # correlated to one side
    "SELECT a.k, a.x, b.v FROM a FULL JOIN b ON a.k = b.k AND "
    "EXISTS (SELECT 1 FROM c WHERE c.w = b.v)",
    "SELECT a.k, a.x, b.v FROM a RIGHT JOIN b ON a.k = b.k AND "
    "NOT EXISTS (SELECT 1 FROM c WHERE c.w = b.v)",
    "SELECT a.k, b.v FROM a LEFT JOIN b ON a.k = b.k AND "
    "(SELECT count(*) FROM c WHERE c.w = a.k) > 0",
    "SELECT * FROM a LEFT JOIN b ON a.k = b.k AND "
    "b.v = (SELECT max(w) FROM c WHERE c.w <= b.v)",
    "SELECT a.k, a.x, b.k, b.v FROM a FULL JOIN b ON a.k = b.k AND "
    "a.x IN (SELECT w * 10 FROM c WHERE w IS NOT NULL)",
    # the subquery is the whole condition, and the same subquery twice
    "SELECT a.k, b.k FROM a LEFT JOIN b ON b.v IN (SELECT w FROM c)",
    "SELECT a.k, b.v FROM a LEFT JOIN b ON a.k = b.k AND "
    "b.v BETWEEN (SELECT min(w) FROM c) AND (SELECT min(w) FROM c) + 1",
    # in a larger query: aggregate over the outer join
    "SELECT a.k, count(b.v) AS n FROM a LEFT JOIN b ON a.k = b.k AND "
    "b.v IN (SELECT w FROM c) GROUP BY a.k ORDER BY a.k NULLS LAST",
]
CONFIGS = [(1, 8192), (2, 3), (3, 7), (8, 1)]


@pytest.mark.parametrize("partitions,batch_size", CONFIGS)
@pytest.mark.parametrize("sql", QUERIES)
def test_subquery_in_outer_join_on(sql: str, partitions: int, batch_size: int) -> None:
    check(sql, TABLES, target_partitions=partitions, batch_size=batch_size)


def test_a_subquery_reading_both_sides_is_a_clear_error():
    session = ps.Session(target_partitions=1)
    for name, table in TABLES.items():
        session.register(name, table)
    with pytest.raises(ps.NotSupportedError, match="reads columns of both sides"):
        session.sql("SELECT * FROM a LEFT JOIN b ON a.k = (SELECT max(w) FROM c "
                    "WHERE c.w < b.v + a.x)").to_arrow()
