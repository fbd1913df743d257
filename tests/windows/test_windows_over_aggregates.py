"""Windows over aggregates in one SELECT (``SUM(SUM(v)) OVER (...)``), checked against DuckDB.

SQL's order: GROUP BY + aggregates, HAVING, then windows over the grouped rows, QUALIFY, the
SELECT list, ORDER BY and LIMIT. The tables (tests/windows/window_cases.py) have NULL group
keys and values and many ties; ``empty`` has no rows at all.
"""

from __future__ import annotations

import pytest

import plansight as ps
from plansight.errors import PlanError
from tests.differential.harness import check
from tests.windows.window_cases import TABLES

QUERIES = [
    # a window aggregate over an aggregate, partitioned by a group key
    "SELECT p, o % 3 AS k, sum(sum(v)) OVER (PARTITION BY p) AS w FROM t GROUP BY p, o % 3",
    # ranking by an aggregate (ties: many groups share a count)
    "SELECT p, count(*) AS c, rank() OVER (ORDER BY count(*) DESC) AS r FROM t GROUP BY p",
    "SELECT p, dense_rank() OVER (ORDER BY count(*), sum(v) NULLS FIRST) AS r FROM t "
    "GROUP BY p",
    # a share of the total
    "SELECT p, sum(v) / sum(sum(v)) OVER () AS share FROM t GROUP BY p",
    "SELECT p, count(*) * 1.0 / sum(count(*)) OVER () AS share FROM t GROUP BY p",
    # group keys and aggregates mixed, running totals over the grouped rows
    "SELECT p, o % 3 AS k, sum(v) AS s, sum(sum(v)) OVER (PARTITION BY p ORDER BY o % 3) AS run "
    "FROM t GROUP BY p, o % 3",
    "SELECT p, avg(count(*)) OVER (ORDER BY p ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS a "
    "FROM t GROUP BY p",
    "SELECT p, max(v) - min(min(v)) OVER (PARTITION BY p % 2) AS d FROM t GROUP BY p",
    "SELECT p, lag(sum(v)) OVER (ORDER BY p) AS prev, lead(count(*), 2, 0) OVER (ORDER BY p) "
    "AS next2 FROM t GROUP BY p",
    "SELECT p, first_value(sum(v)) OVER (ORDER BY count(*), p) AS f FROM t GROUP BY p",
    "SELECT p, count(DISTINCT count(*)) OVER () AS n FROM t GROUP BY p",
    # HAVING filters before the window sees the groups; QUALIFY after
    "SELECT p, sum(v) AS s, sum(sum(v)) OVER () AS total FROM t GROUP BY p HAVING count(*) > 5",
    "SELECT p, o % 3 AS k, sum(v) AS s FROM t GROUP BY p, o % 3 HAVING sum(v) IS NOT NULL "
    "QUALIFY rank() OVER (PARTITION BY p ORDER BY sum(v) DESC) = 1",
    "SELECT p, sum(sum(v)) OVER (ORDER BY p) AS run FROM t GROUP BY p QUALIFY run > 0 "
    "ORDER BY run DESC, p LIMIT 5",
    # aggregate FILTER inside and outside the window aggregate
    "SELECT p, sum(sum(v) FILTER (WHERE o > 3)) OVER (ORDER BY p) AS w FROM t GROUP BY p",
    "SELECT p, sum(count(*)) FILTER (WHERE p > 1) OVER () AS w FROM t GROUP BY p",
    "SELECT p, count(*) FILTER (WHERE sum(v) > 0) OVER (ORDER BY p) AS w FROM t GROUP BY p",
    # no GROUP BY: one group
    "SELECT sum(sum(v)) OVER () AS w, rank() OVER (ORDER BY count(*)) AS r FROM t",
    # ROLLUP / GROUPING SETS under windows
    "SELECT p, o % 2 AS k, sum(v) AS s, sum(sum(v)) OVER (PARTITION BY grouping(p, o % 2)) "
    "AS w FROM t GROUP BY ROLLUP (p, o % 2)",
    "SELECT p, count(*) AS c, rank() OVER (PARTITION BY p ORDER BY count(*)) AS r FROM t "
    "GROUP BY GROUPING SETS ((p), (p, o % 2), ())",
    # ORDER BY an expression over a window over an aggregate
    "SELECT p, sum(v) AS s FROM t GROUP BY p "
    "ORDER BY sum(sum(v)) OVER (ORDER BY p) NULLS FIRST, p",
]

RUNS = [(1, 8192), (2, 3), (3, 7), (8, 1)]  # (partitions, batch size)


@pytest.mark.parametrize("table", ["mixed", "tiny_partitions", "empty"])
@pytest.mark.parametrize(("partitions", "batch_size"), RUNS)
@pytest.mark.parametrize("sql", QUERIES)
def test_windows_over_aggregates_match_duckdb(sql, partitions, batch_size, table):
    check(sql, {"t": TABLES[table]}, target_partitions=partitions, batch_size=batch_size)


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT p, sum(v) OVER () FROM t GROUP BY p", "must appear in the GROUP BY"),
    ("SELECT p, sum(sum(v)) OVER (ORDER BY o) FROM t GROUP BY p", "must appear in the GROUP BY"),
    ("SELECT p, sum(sum(v)) FILTER (WHERE o > 1) OVER () FROM t GROUP BY p",
     "must appear in the GROUP BY"),
    ("SELECT p, sum(sum(sum(v))) OVER () FROM t GROUP BY p", "not allowed here"),
    ("SELECT p, sum(sum(v) OVER ()) OVER () FROM t GROUP BY p", "cannot be nested"),
])
def test_invalid_windows_over_aggregates_are_plan_errors(sql, message):
    session = ps.Session(target_partitions=1)
    session.register("t", TABLES["mixed"])
    with pytest.raises(PlanError, match=message):
        session.sql(sql).to_arrow()
