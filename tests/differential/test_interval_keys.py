"""Intervals as keys compare by value, as ``=`` does: 1 month, 30 days and 720 hours are one
GROUP BY group, one DISTINCT row, and join each other (they were three groups, and the join
found no match, while ``=`` said TRUE)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.differential.harness import check

DAY = 86_400 * 10**9
HOUR = 3_600 * 10**9


def _intervals(values):
    return pa.array([None if v is None else pa.MonthDayNano(v) for v in values],
                    pa.month_day_nano_interval())


# equal values written differently, negative parts, NULLs and a value that differs by an hour
A = pa.table({
    "k": pa.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], pa.int64()),
    "x": _intervals([(1, 0, 0), (0, 30, 0), (0, 0, 720 * HOUR), (0, 1, 0), None,
                     (0, 0, 24 * HOUR), (0, 1, -HOUR), (0, 0, 23 * HOUR), None, (0, 31, HOUR)]),
})
B = pa.table({
    "y": _intervals([(0, 30, 0), (0, 0, DAY), None, (1, 1, HOUR), (2, -30, 0)]),
    "v": pa.array([10, 20, 30, 40, 50], pa.int64()),
})
TABLES = {"a": A, "b": B, "e": A.slice(0, 0)}

QUERIES = [
    "SELECT x, count(*) AS n, sum(k) AS s FROM a GROUP BY x",
    "SELECT count(*) AS n FROM (SELECT DISTINCT x FROM a) d",
    "SELECT count(DISTINCT x) AS d, count(x) AS c FROM a",
    "SELECT a.k, b.v FROM a JOIN b ON a.x = b.y",
    "SELECT a.k, b.v FROM a LEFT JOIN b ON a.x = b.y",
    "SELECT a.k, b.v FROM a FULL JOIN b ON a.x = b.y",
    "SELECT k FROM a WHERE x IN (SELECT y FROM b)",
    "SELECT k FROM a WHERE x NOT IN (SELECT y FROM b WHERE y IS NOT NULL)",
    "SELECT k FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.y = a.x)",
    "SELECT count(*) AS n FROM (SELECT x FROM a INTERSECT SELECT y FROM b) i",
    "SELECT count(*) AS n FROM (SELECT x FROM a EXCEPT SELECT y FROM b) i",
    "SELECT count(*) AS n FROM (SELECT x FROM a UNION SELECT y FROM b) u",
    "SELECT k, count(*) OVER (PARTITION BY x) AS n FROM a",
    "SELECT x, k, count(*) AS n FROM a GROUP BY ROLLUP (x, k)",
    "SELECT x, count(*) AS n FROM e GROUP BY x",
]

CONFIGS = [
    pytest.param({"batch_size": 1, "target_partitions": 1}, id="b1p1"),
    pytest.param({"batch_size": 3, "target_partitions": 2}, id="b3p2"),
    pytest.param({"batch_size": 7, "target_partitions": 3}, id="b7p3"),
    pytest.param({"batch_size": 8192, "target_partitions": 8}, id="b8192p8"),
]


@pytest.mark.parametrize("options", CONFIGS)
@pytest.mark.parametrize("sql", QUERIES)
def test_interval_keys_compare_by_value(sql, options):
    check(sql, TABLES, **options)
