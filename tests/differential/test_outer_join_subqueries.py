"""Subqueries in the ON condition of outer joins (LEFT, RIGHT, FULL), against DuckDB: a
subquery reading one side (or none) is computed as a column of that side; one reading both
sides is evaluated over the distinct values the condition reads. NULL keys and values,
empty subqueries, ties, partitions 1/2/3/8 and batch sizes 1/3/7/8192."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.differential.harness import check
from tests.differential.test_regressions import CONFIGS as ALL_CONFIGS

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


BOTH_SIDES = [
    # a subquery reading both sides: evaluated per pair of distinct values of the columns
    # the condition reads, the preserved side(s) joined back on those values
    "SELECT * FROM a LEFT JOIN b ON a.k = (SELECT max(w) FROM c WHERE c.w < b.v + a.x)",
    "SELECT * FROM a RIGHT JOIN b ON a.k = (SELECT max(w) FROM c WHERE c.w < b.v + a.x)",
    "SELECT * FROM a FULL JOIN b ON a.k = (SELECT max(w) FROM c WHERE c.w < b.v + a.x)",
    "SELECT a.k, b.v FROM a LEFT JOIN b ON a.k = b.k AND "
    "EXISTS (SELECT 1 FROM c WHERE c.w = a.k OR c.w = b.v)",
    "SELECT a.k, b.v FROM a FULL JOIN b ON a.k = b.k AND "
    "EXISTS (SELECT 1 FROM c WHERE c.w = a.k AND c.w = b.v)",
    "SELECT a.x, b.v FROM a RIGHT JOIN b ON "
    "(SELECT count(*) FROM c WHERE c.w > a.k AND c.w < b.v) = 0",
    "SELECT a.x, b.v FROM a LEFT JOIN b ON b.k IN (SELECT w FROM c WHERE w = a.k) AND "
    "b.v > (SELECT min(w) FROM c)",
    "SELECT a.x, b.v FROM a FULL JOIN b ON a.k = b.k AND "
    "(SELECT count(*) FROM e WHERE e.w = a.x + b.v) = 0",
    "SELECT a.x, b.v FROM a LEFT JOIN e ON e.w = (SELECT max(w) FROM c WHERE c.w < a.x + e.w) "
    "LEFT JOIN b ON a.k = b.k",
    "SELECT e.w, b.v FROM e FULL JOIN b ON e.w = (SELECT max(w) FROM c WHERE c.w < b.v + e.w)",
    # NaN, -0.0 / 0.0 and NULL among the distinct values
    "SELECT f1.x, f2.x FROM f f1 FULL JOIN f f2 ON f1.k = f2.k AND "
    "EXISTS (SELECT 1 FROM c WHERE c.w <> f1.x + f2.x)",
    "SELECT f1.x, b.v FROM f f1 LEFT JOIN b ON "
    "EXISTS (SELECT 1 FROM c WHERE c.w = b.v AND f1.k IS NOT NULL)",
    "SELECT count(*), sum(a.x), count(b.v) FROM a FULL JOIN b ON a.k = b.k AND "
    "b.v < (SELECT max(c.w) FROM c WHERE c.w <> a.k)",
]
WITH_FLOATS = {**TABLES, "f": pa.table({
    "k": pa.array([1.0, -0.0, 0.0, float("nan"), None, float("nan")]),
    "x": pa.array([1, 2, 3, 4, 5, 6], pa.int64())})}


@pytest.mark.parametrize("partitions,batch_size", ALL_CONFIGS)
@pytest.mark.parametrize("sql", BOTH_SIDES)
def test_subquery_reading_both_sides_of_an_outer_join(sql: str, partitions: int,
                                                       batch_size: int) -> None:
    check(sql, WITH_FLOATS, target_partitions=partitions, batch_size=batch_size)
