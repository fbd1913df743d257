"""The window planner reads equivalences: an input sorted or partitioned on a column known
equal to a window key (``x = y`` filters, inner join keys), or with a constant key
(``a = 2``), streams through a sorted executor with no sort or shuffle added."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import plansight as ps
from tests.differential.harness import check
from tests.session_defaults import session_defaults

PARTITIONS = [1, 2, 3, 8]
INT64 = pa.int64()


def _tables(n: int = 150) -> dict[str, pa.Table]:
    x = [None if i % 17 == 0 else i // 6 for i in range(n)]
    # y equals x in most rows; NULL where x is, and different in every fifth row
    y = [v if v is None or i % 5 else v + 1 for i, v in enumerate(x)]
    t = pa.table({"id": pa.array(range(n), INT64), "x": pa.array(x, INT64),
                  "y": pa.array(y, INT64),
                  "a": pa.array([None if i % 11 == 0 else i % 3 for i in range(n)], INT64),
                  "b": pa.array([None if i % 13 == 0 else (i * 7) % 9 for i in range(n)],
                                INT64),
                  "v": pa.array([None if i % 19 == 0 else (i * 5) % 23 for i in range(n)],
                                INT64)})
    u = pa.table({"x": pa.array([None if i % 7 == 0 else i % 30 for i in range(n // 2)], INT64),
                  "w": pa.array([i % 4 for i in range(n // 2)], INT64)})
    return {"t": t, "u": u, "e": t.slice(0, 0)}


def _explain(sql: str, partitions: int = 1) -> str:
    s = ps.Session(target_partitions=partitions)
    for name, table in _tables().items():
        s.register(name, table)
    return s.sql(sql).explain()


def _lines(plan: str, operator: str) -> list[str]:
    """``operator``'s lines, without their row estimates (tests of estimates are elsewhere)."""
    return [re.sub(r"[,:] rows≈[\d,]+", "", x.strip()) for x in plan.splitlines()
            if x.strip().startswith(operator)]


@pytest.fixture
def partitioned_joins(monkeypatch):
    session_defaults(monkeypatch, hash_join_single_partition_threshold_rows=0)


# the sort below each window is the subquery's own ORDER BY; the window must add none
EQUAL_KEY = ("SELECT x, y, id, sum(v) OVER (PARTITION BY y ORDER BY id ROWS 2 PRECEDING) AS w "
             "FROM (SELECT * FROM t ORDER BY x, id) AS s WHERE x = y")
EQUAL_KEY_REVERSED = ("SELECT x, y, id, lag(v) OVER (PARTITION BY y ORDER BY id) AS w "
                      "FROM (SELECT * FROM t ORDER BY x DESC, id DESC NULLS FIRST) AS s "
                      "WHERE y = x")
EQUAL_ORDER_KEY = ("SELECT x, y, id, rank() OVER (ORDER BY y, id) AS w "
                   "FROM (SELECT * FROM t ORDER BY x, id) AS s WHERE x = y")
CONSTANT_PARTITION_KEY = ("SELECT a, b, id, sum(v) OVER (PARTITION BY a, b ORDER BY id) AS w "
                          "FROM (SELECT * FROM t ORDER BY b, id) AS s WHERE a = 2")
CONSTANT_ONLY_PARTITION = ("SELECT a, id, row_number() OVER (PARTITION BY a ORDER BY id) AS w "
                           "FROM (SELECT * FROM t ORDER BY id) AS s WHERE a IS NULL")
CONSTANT_ORDER_KEY = ("SELECT a, b, id, first_value(id) OVER (PARTITION BY b ORDER BY a, id "
                      "ROWS 1 PRECEDING) AS w FROM (SELECT * FROM t ORDER BY b, id) AS s "
                      "WHERE a = 1")
JOIN_KEY = ("SELECT x1, id, sum(v) OVER (PARTITION BY x1 ORDER BY id ROWS 1 PRECEDING) AS w "
            "FROM (SELECT t.x AS x1, u.x AS x2, t.id, t.v FROM t JOIN u ON t.x = u.x "
            "ORDER BY x2, id) AS j")

NO_SORT_ADDED = [EQUAL_KEY, EQUAL_KEY_REVERSED, EQUAL_ORDER_KEY, CONSTANT_PARTITION_KEY,
                 CONSTANT_ONLY_PARTITION, CONSTANT_ORDER_KEY, JOIN_KEY]


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("sql", NO_SORT_ADDED)
def test_a_window_over_an_equivalent_ordering_adds_no_sort(sql, partitions):
    plan = _explain(sql, partitions)
    assert len(_lines(plan, "SortExec")) == 1, plan  # the subquery's ORDER BY
    assert not _lines(plan, "RepartitionExec"), plan
    assert "HashWindowAggExec" not in plan, plan
    window = [x for x in plan.splitlines() if "WindowAggExec" in x]
    # the window runs above the sort: nothing between them reorders rows
    assert plan.index(window[0]) < plan.index("SortExec"), plan


def test_a_reversed_equivalent_ordering_is_read_backwards():
    plan = _explain(EQUAL_KEY_REVERSED)
    assert "(backwards" in plan and len(_lines(plan, "SortExec")) == 1, plan


def test_a_filter_on_other_columns_still_hashes():
    sql = EQUAL_KEY.replace("WHERE x = y", "WHERE x > y")
    plan = _explain(sql)
    assert "HashWindowAggExec" in plan, plan


def test_an_outer_join_null_extended_key_is_not_equivalent():
    sql = JOIN_KEY.replace("JOIN u", "LEFT JOIN u").replace("PARTITION BY x1",
                                                            "PARTITION BY x2")
    sql = sql.replace("ORDER BY x2, id", "ORDER BY x1, id")
    plan = _explain(sql)
    assert "HashWindowAggExec" in plan, plan


def test_a_constant_key_does_not_stand_for_a_missing_order_key():
    # rows sorted by b alone do not serve ORDER BY a, id even with a constant
    sql = CONSTANT_ORDER_KEY.replace("ORDER BY b, id", "ORDER BY b")
    assert "HashWindowAggExec" in _explain(sql)


def test_forced_sorted_executor_over_a_partitioned_join_only_sorts(partitioned_joins,
                                                                   monkeypatch):
    """Rows hashed on u.x by a partitioned join are partitioned on t.x: the sorted executor
    needs a per-partition sort, no shuffle; the sort skips keys known equal."""
    session_defaults(monkeypatch, window_executor="sorted")
    sql = ("SELECT t.x, u.x, t.id, sum(t.v) OVER (PARTITION BY t.x ORDER BY u.x, t.id) AS w "
           "FROM t JOIN u ON t.x = u.x")
    plan = _explain(sql, 3)
    assert "HashJoinExec: mode=Partitioned" in plan
    assert len(_lines(plan, "RepartitionExec")) == 2, plan  # the join's inputs only
    assert _lines(plan, "SortExec") == [
        "SortExec: expr=[x ASC NULLS LAST, id ASC NULLS LAST], preserve_partitioning=[true]"]
    assert "BoundedWindowAggExec" in plan


QUERIES = NO_SORT_ADDED + [
    EQUAL_KEY.replace("FROM (SELECT * FROM t", "FROM (SELECT * FROM e"),
    CONSTANT_PARTITION_KEY.replace("FROM (SELECT * FROM t", "FROM (SELECT * FROM e"),
    CONSTANT_ORDER_KEY.replace("ORDER BY b, id", "ORDER BY b"),
    JOIN_KEY.replace("JOIN u", "LEFT JOIN u").replace("PARTITION BY x1", "PARTITION BY x2"),
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", PARTITIONS)
@pytest.mark.parametrize("sql", QUERIES)
def test_results_match_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)


@pytest.mark.parametrize("partitions", PARTITIONS)
def test_forced_sorted_executor_over_a_partitioned_join_matches_duckdb(
        partitioned_joins, monkeypatch, partitions):
    session_defaults(monkeypatch, window_executor="sorted")
    sql = ("SELECT t.x, u.x, t.id, sum(t.v) OVER (PARTITION BY t.x ORDER BY u.x, t.id) AS w "
           "FROM t JOIN u ON t.x = u.x")
    check(sql, _tables(), target_partitions=partitions, batch_size=7)
