"""Equivalences over sources declared sorted (``register(..., sorted_by=)``): a constant or
an equal column bridges the declared order and a requirement, so no SortExec is planned."""

from __future__ import annotations

import pyarrow as pa
import pytest

import plansight as ps
from tests.differential.harness import assert_same, has_top_level_order_by, run_duckdb

PARTITIONS = [1, 2, 3, 8]
INT64 = pa.int64()
SORTED_BY = {"t": ["a", "b", "c"], "s": ["x", "v"]}


def _tables(n: int = 180) -> dict[str, pa.Table]:
    t = pa.table({"a": pa.array([None if i % 11 == 0 else i % 4 for i in range(n)], INT64),
                  "b": pa.array([None if i % 13 == 0 else (i * 7) % 10 for i in range(n)],
                                INT64),
                  "c": pa.array(range(n), INT64)})
    x = [None if i % 17 == 0 else i // 6 for i in range(n)]
    s = pa.table({"x": pa.array(x, INT64),
                  "y": pa.array([v if v is None or i % 5 else v + 1 for i, v in enumerate(x)],
                                INT64),
                  "v": pa.array([(i * 5) % 23 for i in range(n)], INT64)})
    # sorted as declared (ASC NULLS LAST): the declaration is trusted
    return {"t": t.sort_by([(k, "ascending", "at_end") for k in SORTED_BY["t"]]),
            "s": s.sort_by([(k, "ascending", "at_end") for k in SORTED_BY["s"]])}


def _session(partitions: int, batch_size: int = 8192) -> ps.Session:
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    for name, table in _tables().items():
        session.register(name, table, sorted_by=SORTED_BY[name])
    return session


QUERIES = [
    # sorted by (a, b, c); a fixed: sorted by (b, c), also once a is projected away
    "SELECT b, c FROM t WHERE a = 2 ORDER BY b, c",
    "SELECT a, b, c FROM t WHERE a IS NULL ORDER BY b, a, c",
    # b fixed: sorted by (a, c)
    "SELECT a, c FROM t WHERE b = 3 ORDER BY a, c",
    "SELECT b, a, count(*) AS n, sum(c) AS sc FROM t WHERE a = 1 GROUP BY b, a",
    ("SELECT b, c, sum(c) OVER (PARTITION BY a ORDER BY b, c ROWS 1 PRECEDING) AS w "
     "FROM t WHERE a = 3"),
    # sorted by (x, v); x = y: partitioned and sorted by y too
    ("SELECT x, y, v, rank() OVER (PARTITION BY y ORDER BY v) AS r FROM s WHERE x = y"),
    "SELECT y, v FROM s WHERE y = x ORDER BY y, v",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_no_sort_is_planned(sql):
    plan = _session(1).sql(sql).explain()
    assert "SortExec" not in plan, plan
    assert "HashWindowAggExec" not in plan, plan
    if "GROUP BY" in sql:
        assert "ordering_mode=Sorted" in plan, plan


@pytest.mark.parametrize("sql", [q for q in QUERIES if "ORDER BY" in q.split("FROM")[-1]])
def test_sorted_partitions_are_only_merged(sql):
    plan = _session(3).sql(sql).explain()
    assert "SortExec" not in plan and "SortPreservingMergeExec" in plan, plan


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", PARTITIONS)
@pytest.mark.parametrize("sql", QUERIES)
def test_results_match_duckdb(sql, partitions, batch_size):
    ours = _session(partitions, batch_size).sql(sql).to_arrow()
    assert_same(ours, run_duckdb(sql, _tables()), ordered=has_top_level_order_by(sql), sql=sql)
