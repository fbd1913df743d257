"""Constant columns: after ``a = 5`` / ``a IS NULL`` every row has the same ``a``, so an
ordering or grouping requirement ignores ``a``; a partitioned join never does."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.logical.expr import Call, Column, Literal, SortKey
from plansight.engine.physical.equivalence import Equivalences, constants
from plansight.engine.physical.plan import (
    Partitioning,
    hash_distribution,
    ordering_satisfies,
)
from tests.differential.harness import check
from tests.session_defaults import session_defaults

PARTITIONS = [1, 2, 3, 8]
INT64 = pa.int64()


def _tables(n: int = 240) -> dict[str, pa.Table]:
    a = [None if i % 11 == 0 else i % 4 for i in range(n)]
    b = [None if i % 13 == 0 else (i * 7) % 10 for i in range(n)]
    s = [None if i % 9 == 0 else "xyz"[i % 3] for i in range(n)]
    t = pa.table({"a": pa.array(a, INT64), "b": pa.array(b, INT64),
                  "c": pa.array(range(n), INT64), "s": pa.array(s, pa.string()),
                  "f": pa.array([None if i % 7 == 0 else (i % 3) * 0.5 for i in range(n)])})
    u = pa.table({"a": pa.array([None if i % 5 == 0 else i % 6 for i in range(n // 3)], INT64),
                  "d": pa.array([i % 9 for i in range(n // 3)], INT64)})
    return {"t": t, "u": u, "e": t.slice(0, 0)}


def _session(partitions: int) -> ps.Session:
    s = ps.Session(target_partitions=partitions)
    for name, table in _tables().items():
        s.register(name, table)
    return s


def _explain(sql: str, partitions: int = 1) -> str:
    return _session(partitions).sql(sql).explain()


def _lines(plan: str, operator: str) -> list[str]:
    """``operator``'s lines, without their row estimates (tests of estimates are elsewhere)."""
    return [re.sub(r"[,:] rows≈[\d,]+", "", x.strip()) for x in plan.splitlines()
            if x.strip().startswith(operator)]


@pytest.fixture
def partitioned_joins(monkeypatch):
    session_defaults(monkeypatch, hash_join_single_partition_threshold_rows=0)


def _col(i: int, name: str, t: pa.DataType = INT64) -> Column:
    return Column(i, name, t)


# ----------------------------------------------------------------------------- the rules

def test_which_predicates_make_constants():
    a, f = _col(1, "a"), _col(2, "f", pa.float64())
    five = Literal(5, INT64)
    eq = Call("eq", (a, five), pa.bool_())
    assert constants(eq) == [a]
    assert constants(Call("eq", (five, a), pa.bool_())) == [a]
    assert constants(Call("is_null", (a,), pa.bool_())) == [a]
    # 0.0 = -0.0 holds, yet they hash apart: a float column is never made constant
    assert constants(Call("eq", (f, Literal(0.0, pa.float64())), pa.bool_())) == []
    assert constants(Call("eq", (a, Literal(None, INT64)), pa.bool_())) == []
    assert constants(Call("or", (eq, eq), pa.bool_())) == []
    assert constants(Call("gt", (a, five), pa.bool_())) == []


def test_a_constant_spreads_through_its_class_and_survives_restrict_and_project():
    a, b, c = _col(1, "a"), _col(2, "b"), _col(3, "c")
    eq = Equivalences().with_equal([(a, b)]).with_constants([a])
    assert eq.is_constant(b) and not eq.is_constant(c)
    # b stays constant when a leaves the output
    assert eq.restrict([b.field_name, c.field_name]).is_constant(b)
    out = eq.project([(b, _col(10, "x")), (c, _col(11, "y"))], constants=[_col(12, "lit")])
    assert out.is_constant(_col(10, "x")) and out.is_constant(_col(12, "lit"))
    assert not out.is_constant(_col(11, "y"))
    assert not eq.without_constants().is_constant(a) and eq.without_constants().same(a, b)
    # constants are not equal to each other: 5 and 6 are both constant
    assert not Equivalences().with_constants([a, c]).same(a, c)


def test_orderings_ignore_constant_keys():
    a, b, c = _col(1, "a"), _col(2, "b"), _col(3, "c")
    eq = Equivalences().with_constants([a])
    assert ordering_satisfies((SortKey(b),), (SortKey(a), SortKey(b)), eq)
    assert ordering_satisfies((SortKey(b),), (SortKey(b), SortKey(a, descending=True)), eq)
    assert ordering_satisfies((SortKey(a), SortKey(b)), (SortKey(b),), eq)
    assert ordering_satisfies(None, (SortKey(a),), eq)  # one value: any order is sorted
    assert not ordering_satisfies((SortKey(b),), (SortKey(a), SortKey(b)))
    assert not ordering_satisfies((SortKey(b),), (SortKey(a), SortKey(c)), eq)
    assert not ordering_satisfies(None, (SortKey(a), SortKey(b)), eq)


def test_grouping_ignores_constant_keys_but_a_partitioned_join_does_not():
    a, b = _col(1, "a"), _col(2, "b")
    eq = Equivalences().with_constants([a])
    assert hash_distribution([a, b]).satisfied_by(Partitioning(4, (b,)), eq)
    assert hash_distribution([b]).satisfied_by(Partitioning(4, (a, b)), eq)
    # without constants too: rows equal on (a, b) are equal on b, a subset of the keys
    assert hash_distribution([a, b]).satisfied_by(Partitioning(4, (b,)))
    assert not hash_distribution([b]).satisfied_by(Partitioning(4, (a, b)))
    # a join's other input is hashed on (a, b): Hash(b) would put matches apart
    assert not hash_distribution([a, b], 4).satisfied_by(Partitioning(4, (b,)), eq)
    assert hash_distribution([a, b], 4).satisfied_by(Partitioning(4, (a, b)), eq)
    # all rows share the one constant key: they must all be in one partition
    assert not hash_distribution([a]).satisfied_by(Partitioning(4, (b,)), eq)
    assert hash_distribution([a]).satisfied_by(Partitioning(1), eq)


# ----------------------------------------------------------------------------- plan shapes

SORTED_ON_B = "(SELECT * FROM t ORDER BY b) AS s"


@pytest.mark.parametrize("predicate", ["a = 2", "2 = a", "a IS NULL", "s = 'x'"])
@pytest.mark.parametrize("partitions", [1, 3])
def test_order_by_constant_then_sorted_key_sorts_once(predicate, partitions):
    column = "s" if "s =" in predicate else "a"
    sql = f"SELECT a, b, c, s FROM {SORTED_ON_B} WHERE {predicate} ORDER BY {column}, b"
    plan = _explain(sql, partitions)
    assert _lines(plan, "SortExec") == [
        f"SortExec: expr=[b ASC NULLS LAST], preserve_partitioning=[{str(partitions > 1).lower()}]"
    ], plan


def test_a_float_equality_is_not_a_constant():
    plan = _explain(f"SELECT f, b FROM {SORTED_ON_B} WHERE f = 0.5 ORDER BY f, b")
    assert len(_lines(plan, "SortExec")) == 2, plan


def test_a_range_predicate_is_not_a_constant():
    plan = _explain(f"SELECT a, b FROM {SORTED_ON_B} WHERE a >= 2 AND a <= 2 ORDER BY a, b")
    assert len(_lines(plan, "SortExec")) == 2, plan


@pytest.mark.parametrize("partitions", [1, 3])
def test_order_by_only_constants_sorts_nothing(partitions):
    plan = _explain("SELECT a, b FROM t WHERE a = 2 ORDER BY a", partitions)
    assert not _lines(plan, "SortExec") and not _lines(plan, "SortPreservingMergeExec"), plan
    if partitions > 1:
        assert plan.splitlines()[0].startswith("CoalescePartitionsExec")


def test_a_sort_drops_constant_keys():
    plan = _explain("SELECT a, b, c FROM t WHERE a = 2 ORDER BY a DESC, b, a, c DESC")
    assert _lines(plan, "SortExec") == [
        "SortExec: expr=[b ASC NULLS LAST, c DESC NULLS LAST], preserve_partitioning=[false]"]


@pytest.mark.parametrize("keys", ["a, b", "b, a", "s, b"])
def test_group_by_constant_and_sorted_key_streams_sorted(keys):
    where = "s = 'y'" if "s" in keys else "a = 1"
    plan = _explain(f"SELECT {keys}, count(*) AS n FROM {SORTED_ON_B} WHERE {where} "
                    f"GROUP BY {keys}")
    aggregates = _lines(plan, "AggregateExec")
    assert len(aggregates) == 1 and "ordering_mode=Sorted" in aggregates[0], plan


def test_group_by_a_constant_and_an_unsorted_key_hashes():
    plan = _explain(f"SELECT a, c, count(*) AS n FROM {SORTED_ON_B} WHERE a = 1 GROUP BY a, c")
    assert "ordering_mode" not in _lines(plan, "AggregateExec")[0], plan


def test_a_join_key_equal_to_a_constant_is_constant():
    sql = "SELECT t.a, b, d FROM t JOIN u ON t.a = u.a WHERE u.a = 3 ORDER BY t.a, b"
    assert _lines(_explain(sql), "SortExec") == [
        "SortExec: expr=[b ASC NULLS LAST], preserve_partitioning=[false]"]


def test_a_constant_on_an_outer_joins_null_extended_side_is_dropped():
    # u.a = 3 in the matched rows, NULL in the others: the sort must keep it
    sql = ("SELECT t.a, ua, b FROM t LEFT JOIN (SELECT a AS ua, d FROM u WHERE a = 3) AS v "
           "ON t.a = v.ua ORDER BY ua, b")
    assert _lines(_explain(sql), "SortExec") == [
        "SortExec: expr=[ua ASC NULLS LAST, b ASC NULLS LAST], preserve_partitioning=[false]"]
    # the preserved side's constant stays
    sql = ("SELECT v.a, b, d FROM (SELECT * FROM t WHERE a = 3) AS v LEFT JOIN u "
           "ON v.a = u.a ORDER BY v.a, b")
    assert _lines(_explain(sql), "SortExec") == [
        "SortExec: expr=[b ASC NULLS LAST], preserve_partitioning=[false]"]


# a partitioned join on b leaves rows hashed on b; the filter makes a constant
GROUPED_AFTER_JOIN = ("SELECT t.a AS a, t.b AS b, count(*) AS n FROM t JOIN u ON t.b = u.d "
                      "WHERE t.a = 1 GROUP BY t.a, t.b")


def test_group_by_constant_and_hash_key_needs_no_second_shuffle(partitioned_joins):
    plan = _explain(GROUPED_AFTER_JOIN, 3)
    assert "HashJoinExec: mode=Partitioned" in plan
    assert _lines(plan, "AggregateExec") == [
        "AggregateExec: mode=Single, gby=[a, b], aggr=[count_star(*)]"], plan
    assert len(_lines(plan, "RepartitionExec")) == 2  # the join's inputs only


def test_a_partitioned_join_over_fewer_hash_keys_is_shuffled_again(partitioned_joins):
    # the aggregate's rows are hashed on b alone; joined on (a, b) with the other side
    # hashed on both, it must be hashed on both too
    sql = (f"SELECT g.a, g.b, g.n, w.c FROM ({GROUPED_AFTER_JOIN}) AS g "
           "JOIN t AS w ON g.a = w.a AND g.b = w.b")
    plan = _explain(sql, 3)
    joins = _lines(plan, "HashJoinExec")
    assert len(joins) == 2 and all("mode=Partitioned" in j for j in joins), plan
    hashed = [x for x in _lines(plan, "RepartitionExec") if "Hash([a, b], 3)" in x]
    assert len(hashed) == 2, plan


# ----------------------------------------------------------------------------- propagation

# operators that keep row order keep what is known about equal and constant columns
PROPAGATION = [
    # a limit (top-k) keeps the constant: ORDER BY a, b above it is already met
    ("SELECT * FROM (SELECT a, b, c FROM t WHERE a = 2 ORDER BY b, c LIMIT 30) AS l "
     "ORDER BY a, b, c"),
    # a projection renaming the sort key, dropping the constant
    ("SELECT bb, c FROM (SELECT b AS bb, c FROM (SELECT * FROM t WHERE a = 2 ORDER BY a, b, c) "
     "AS s) AS p ORDER BY bb, c"),
    # a projection adding a literal column: constant in every row
    ("SELECT k, b, c FROM (SELECT 1 AS k, b, c FROM (SELECT * FROM t ORDER BY b, c) AS s) AS p "
     "ORDER BY k, b, k, c"),
    # a filter above the sort keeps the input's ordering and adds its constant
    ("SELECT a, b, c FROM (SELECT * FROM t ORDER BY b, c LIMIT 100) AS l WHERE a = 1 "
     "ORDER BY a, b, c"),
]


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("sql", PROPAGATION)
def test_order_preserving_operators_keep_constants(sql, partitions):
    plan = _explain(sql, partitions)
    assert len(_lines(plan, "SortExec")) == 1, plan


# ----------------------------------------------------------------------------- results

QUERIES = [
    f"SELECT a, b, c FROM {SORTED_ON_B} WHERE a = 2 ORDER BY a, b, c",
    f"SELECT a, b, c FROM {SORTED_ON_B} WHERE a IS NULL ORDER BY a DESC, b DESC, c",
    f"SELECT s, b, c FROM {SORTED_ON_B} WHERE s = 'x' ORDER BY s, b NULLS FIRST, c",
    f"SELECT a, b, count(*) AS n, sum(c) AS sc FROM {SORTED_ON_B} WHERE a = 1 GROUP BY a, b",
    f"SELECT b, a, count(*) AS n FROM {SORTED_ON_B} WHERE a IS NULL GROUP BY b, a ORDER BY b",
    f"SELECT s, b, min(c) AS m FROM {SORTED_ON_B} WHERE s = 'z' GROUP BY s, b ORDER BY s, b",
    "SELECT a, count(*) AS n, sum(b) AS sb FROM t WHERE a = 3 GROUP BY a",
    "SELECT a, b FROM t WHERE a = 2 ORDER BY a, b DESC",
    "SELECT a, b, c FROM t WHERE a = 2 ORDER BY a, b, c LIMIT 5",
    "SELECT a, b FROM e WHERE a = 2 ORDER BY a, b",
    "SELECT a, b, count(*) AS n FROM e WHERE a = 2 GROUP BY a, b",
    "SELECT t.a, b, d FROM t JOIN u ON t.a = u.a WHERE u.a = 3 ORDER BY t.a, b, d",
    ("SELECT t.a, ua, b FROM t LEFT JOIN (SELECT a AS ua, d FROM u WHERE a = 3) AS v "
     "ON t.a = v.ua ORDER BY ua, b, t.a"),
    ("SELECT v.a, b, d FROM (SELECT * FROM t WHERE a = 3) AS v LEFT JOIN u "
     "ON v.a = u.a ORDER BY v.a, b, d"),
    ("SELECT x, b, sum(c) AS sc FROM (SELECT 7 AS x, b, c FROM t) AS p GROUP BY x, b "
     "ORDER BY x, b"),
    f"SELECT f, b FROM {SORTED_ON_B} WHERE f = 0.5 ORDER BY f, b",
] + PROPAGATION


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", PARTITIONS)
@pytest.mark.parametrize("sql", QUERIES)
def test_results_with_constants_match_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)


JOIN_QUERIES = [
    GROUPED_AFTER_JOIN,
    (f"SELECT g.a, g.b, g.n, w.c FROM ({GROUPED_AFTER_JOIN}) AS g "
     "JOIN t AS w ON g.a = w.a AND g.b = w.b"),
]


@pytest.mark.parametrize("batch_size", [3, 8192])
@pytest.mark.parametrize("partitions", PARTITIONS)
@pytest.mark.parametrize("sql", JOIN_QUERIES)
def test_partitioned_join_results_with_constants_match_duckdb(partitioned_joins, sql,
                                                              partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)
