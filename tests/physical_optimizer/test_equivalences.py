"""Column equivalences: a requirement on ``b`` is met by partitioning or ordering on ``a``
after ``a = b`` (inner join keys, filters) and nowhere an outer join NULL-extends a key."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.logical.expr import Column, SortKey
from plansight.engine.physical.equivalence import Equivalences
from plansight.engine.physical.plan import Partitioning, hash_distribution, ordering_satisfies
from tests.differential.harness import check
from tests.session_defaults import session_defaults

PARTITIONS = [1, 2, 3, 8]


def _tables() -> dict[str, pa.Table]:
    n = 600
    a_keys = [None if i % 17 == 0 else i % 40 for i in range(n)]
    b_keys = [None if i % 13 == 0 else i % 55 for i in range(n // 2)]
    return {
        "a": pa.table({"k": pa.array(a_keys, pa.int64()), "v": pa.array(range(n), pa.int64())}),
        "b": pa.table({"k": pa.array(b_keys, pa.int64()),
                       "w": pa.array([i % 7 for i in range(n // 2)], pa.int64())}),
        "t": pa.table({"x": pa.array([i // 3 for i in range(n)], pa.int64()),
                       "y": pa.array([i // 3 if i % 4 else None for i in range(n)], pa.int64()),
                       "v": pa.array([(i * 7) % 11 for i in range(n)], pa.int64())}),
    }


def _session(partitions: int) -> ps.Session:
    s = ps.Session(target_partitions=partitions)
    for name, table in _tables().items():
        s.register(name, table)
    return s


@pytest.fixture
def partitioned_joins(monkeypatch):
    session_defaults(monkeypatch, hash_join_single_partition_threshold_rows=0)


INT64 = pa.int64()


def _col(i: int, name: str, t: pa.DataType = INT64) -> Column:
    return Column(i, name, t)


# ----------------------------------------------------------------------------- the classes

def test_classes_merge_restrict_and_project():
    a, b, c, d = _col(1, "a"), _col(2, "b"), _col(3, "c"), _col(4, "d")
    eq = Equivalences().with_equal([(a, b)]).with_equal([(c, d)]).with_equal([(b, c)])
    assert [x.id for x in eq.members(d)] == [4, 1, 2, 3]
    assert eq.same(a, d) and not eq.same(a, _col(5, "e"))
    kept = eq.restrict([a.field_name, c.field_name])
    assert kept.same(a, c) and not kept.same(a, b)
    # a and c leave the projection under new ids 10 and 11: still equal
    out = eq.project([(a, _col(10, "x")), (c, _col(11, "y")), (_col(5, "e"), _col(12, "z"))])
    assert out.same(_col(10, "x"), _col(11, "y")) and not out.same(_col(10, "x"), _col(12, "z"))


def test_columns_of_different_types_are_never_equivalent():
    eq = Equivalences().with_equal([(_col(1, "a"), _col(2, "b", pa.int32()))])
    assert not eq


def test_requirements_are_matched_through_a_class():
    a, b, c = _col(1, "a"), _col(2, "b"), _col(3, "c")
    eq = Equivalences().with_equal([(a, b)])
    assert hash_distribution([b]).satisfied_by(Partitioning(4, (a,)), eq)
    assert not hash_distribution([b]).satisfied_by(Partitioning(4, (a,)))
    assert not hash_distribution([c]).satisfied_by(Partitioning(4, (a,)), eq)
    # sorted by (a, c) is sorted by (b, c) and by (a, b, c): b repeats a's class
    have = (SortKey(a), SortKey(c))
    assert ordering_satisfies(have, (SortKey(b), SortKey(c)), eq)
    assert ordering_satisfies(have, (SortKey(a), SortKey(b), SortKey(c)), eq)
    assert not ordering_satisfies(have, (SortKey(b, descending=True),), eq)
    assert not ordering_satisfies(have, (SortKey(c),), eq)


# ----------------------------------------------------------------------------- plan shapes

def _aggregate_and_repartitions(plan: str) -> tuple[list[str], list[str]]:
    # without row estimates: the shapes are the point here
    lines = [re.sub(r"[,:] rows≈[\d,]+", "", line.strip()) for line in plan.splitlines()]
    return ([x for x in lines if x.startswith("AggregateExec")],
            [x for x in lines if x.startswith("RepartitionExec")])


@pytest.mark.parametrize("key", ["a.k", "b.k"])
def test_group_by_either_join_key_after_a_partitioned_join_needs_no_second_shuffle(
        partitioned_joins, key):
    sql = f"SELECT {key}, count(*) AS c FROM a JOIN b ON a.k = b.k GROUP BY {key}"
    plan = _session(4).sql(sql).explain()
    assert "HashJoinExec: mode=Partitioned" in plan
    aggregates, repartitions = _aggregate_and_repartitions(plan)
    assert aggregates == ["AggregateExec: mode=Single, gby=[k], aggr=[count_star(*)]"]
    assert len(repartitions) == 2  # the join's two inputs, nothing above the join


@pytest.mark.parametrize("kind, key", [("LEFT", "b.k"), ("RIGHT", "a.k"), ("FULL", "a.k"),
                                       ("FULL", "b.k")])
def test_an_outer_join_null_extended_key_is_not_equivalent(partitioned_joins, kind, key):
    sql = f"SELECT {key}, count(*) AS c FROM a {kind} JOIN b ON a.k = b.k GROUP BY {key}"
    plan = _session(4).sql(sql).explain()
    aggregates, repartitions = _aggregate_and_repartitions(plan)
    assert len(repartitions) == 3, plan  # the aggregate shuffles its keys again
    assert any("mode=Final" in x for x in aggregates)


def test_order_by_a_column_equal_to_the_sort_key_needs_no_second_sort():
    sql = "SELECT x, y, v FROM (SELECT * FROM t ORDER BY x) AS s WHERE x = y ORDER BY y"
    for partitions in (1, 3):
        plan = _session(partitions).sql(sql).explain()
        assert plan.count("SortExec") == 1, plan
        assert "SortExec: expr=[x ASC" in plan


def test_a_filter_on_other_columns_still_sorts():
    sql = "SELECT x, y, v FROM (SELECT * FROM t ORDER BY x) AS s WHERE x > y ORDER BY y"
    assert _session(1).sql(sql).explain().count("SortExec") == 2


# ----------------------------------------------------------------------------- results

JOIN_QUERIES = [
    "SELECT b.k, count(*) AS c, sum(v) AS s FROM a JOIN b ON a.k = b.k GROUP BY b.k",
    "SELECT a.k, count(*) AS c, sum(w) AS s FROM a JOIN b ON a.k = b.k GROUP BY a.k",
    "SELECT b.k, count(*) AS c, count(v) AS cv FROM a LEFT JOIN b ON a.k = b.k GROUP BY b.k",
    "SELECT a.k, count(*) AS c, count(w) AS cw FROM a LEFT JOIN b ON a.k = b.k GROUP BY a.k",
    "SELECT a.k, count(*) AS c FROM a RIGHT JOIN b ON a.k = b.k GROUP BY a.k",
    "SELECT b.k, count(*) AS c FROM a RIGHT JOIN b ON a.k = b.k GROUP BY b.k",
    "SELECT a.k, b.k, count(*) AS c FROM a FULL JOIN b ON a.k = b.k GROUP BY a.k, b.k",
    ("SELECT b.k, count(*) AS c FROM a JOIN b ON a.k = b.k WHERE b.w < 3 GROUP BY b.k "
    "ORDER BY b.k"),
    # semi and anti joins output one side, partitioned by that side's key
    "SELECT k, count(*) AS c FROM a WHERE k IN (SELECT k FROM b) GROUP BY k",
    "SELECT k, sum(w) AS s FROM b WHERE EXISTS (SELECT 1 FROM a WHERE a.k = b.k) GROUP BY k",
    ("SELECT k, count(*) AS c FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.k = a.k) "
     "GROUP BY k"),
    ("SELECT k, count(*) AS c FROM b WHERE NOT EXISTS (SELECT 1 FROM a WHERE a.k = b.k) "
     "GROUP BY k"),
]


@pytest.mark.parametrize("partitions", PARTITIONS)
@pytest.mark.parametrize("sql", JOIN_QUERIES)
def test_results_after_joins_match_duckdb(partitioned_joins, sql, partitions):
    check(sql, _tables(), target_partitions=partitions, batch_size=64)


FILTER_QUERIES = [
    "SELECT x, y, v FROM (SELECT * FROM t ORDER BY x) AS s WHERE x = y ORDER BY y, v",
    "SELECT y, count(*) AS c FROM (SELECT * FROM t ORDER BY x) AS s WHERE x = y GROUP BY y",
    ("SELECT x, y, v FROM (SELECT * FROM t ORDER BY x DESC) AS s WHERE y = x "
    "ORDER BY y DESC, v"),
]


@pytest.mark.parametrize("batch_size", [1, 7, 8192])
@pytest.mark.parametrize("partitions", PARTITIONS)
@pytest.mark.parametrize("sql", FILTER_QUERIES)
def test_results_after_equality_filters_match_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)
