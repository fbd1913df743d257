"""A WHERE that no NULL-extended row passes turns an outer join into a narrower one (LEFT ->
inner, FULL -> LEFT / RIGHT / inner), as DuckDB and DataFusion simplify it; a WHERE that
some NULL-extended row may pass (IS NULL, COALESCE, an OR with the other side, CASE) keeps
it. Against DuckDB with NULL keys and values, rows matching nothing on either side and an
empty side, at partitions 1/2/3/8 and batch sizes 1/3/7/8192."""

from __future__ import annotations

import pyarrow as pa
import pytest

import plansight as ps
from tests.differential.harness import check
from tests.differential.test_regressions import CONFIGS

TABLES = {
    "l": pa.table({"k": pa.array([1, 2, 2, 3, None, 6], pa.int64()),
                   "a": pa.array([10, None, 20, 30, 40, -5], pa.int64()),
                   "s": pa.array(["x", "y", None, "z", "w", "v"])}),
    "r": pa.table({"k": pa.array([2, 3, 3, 4, None, 5], pa.int64()),
                   "b": pa.array([1, None, 3, 4, 5, -1], pa.int64()),
                   "f": pa.array([True, False, None, True, True, False])}),
    "e": pa.table({"k": pa.array([], pa.int64()), "b": pa.array([], pa.int64())}),
}

QUERIES = [
    # rejecting the NULL right side: an inner join
    "SELECT l.k, l.a, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE r.b > 1",
    "SELECT l.k, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE r.b + l.a > 12",
    "SELECT l.k, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE r.b IS NOT NULL",
    "SELECT l.k, r.f FROM l LEFT JOIN r ON l.k = r.k WHERE r.f",
    "SELECT l.k, r.f FROM l LEFT JOIN r ON l.k = r.k WHERE NOT r.f",
    "SELECT l.k, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE CAST(r.b AS VARCHAR) = '3'",
    "SELECT l.k, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE -r.b < 0 AND l.a > 0",
    "SELECT l.k, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE r.b > 3 OR r.b < 2",
    "SELECT l.k, d.one FROM l LEFT JOIN (SELECT k, 1 AS one FROM r) AS d ON l.k = d.k "
    "WHERE d.one = 1",
    "SELECT l.k, r.b FROM l RIGHT JOIN r ON l.k = r.k WHERE l.a >= 20",
    "SELECT l.k, e.b FROM l LEFT JOIN e ON l.k = e.k WHERE e.b > 0",
    "SELECT l.k, e.b FROM l LEFT JOIN e ON l.a > e.b WHERE e.b IS NOT NULL",
    # FULL: the side whose NULLs are rejected decides
    "SELECT l.k, l.a, r.k, r.b FROM l FULL JOIN r ON l.k = r.k WHERE l.a > 0",
    "SELECT l.k, l.a, r.k, r.b FROM l FULL JOIN r ON l.k = r.k WHERE r.b > 0",
    "SELECT l.k, r.k FROM l FULL JOIN r ON l.k = r.k WHERE l.a > 0 AND r.b > 0",
    "SELECT l.k, r.k FROM l FULL JOIN r ON l.k = r.k WHERE l.k = r.k",
    # some NULL-extended row may pass: the outer join stays
    "SELECT l.k, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE r.b IS NULL",
    "SELECT l.k, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE COALESCE(r.b, 0) = 0",
    "SELECT l.k, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE r.b > 1 OR l.a > 25",
    "SELECT l.k, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE "
    "CASE WHEN r.b IS NULL THEN TRUE ELSE r.b > 3 END",
    "SELECT l.k, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE r.b IS DISTINCT FROM 1",
    "SELECT l.k, r.k FROM l FULL JOIN r ON l.k = r.k WHERE l.a > 0 OR r.b > 0",
    "SELECT l.k, r.k FROM l FULL JOIN r ON l.k = r.k WHERE l.k IS NULL OR r.k IS NULL",
    "SELECT l.k, r.b FROM l LEFT JOIN r ON l.k = r.k WHERE NOT (r.b IS NULL)",
]


@pytest.mark.parametrize("partitions,batch_size", CONFIGS)
@pytest.mark.parametrize("sql", QUERIES)
def test_outer_joins_under_a_where_match_duckdb(sql: str, partitions: int,
                                                batch_size: int) -> None:
    check(sql, TABLES, target_partitions=partitions, batch_size=batch_size)


@pytest.mark.parametrize("sql,kind", [
    ("SELECT l.k FROM l LEFT JOIN r ON l.k = r.k WHERE r.b > 1", "inner"),
    ("SELECT l.k FROM l LEFT JOIN r ON l.k = r.k WHERE r.b IS NULL", "left"),
    ("SELECT l.k FROM l FULL JOIN r ON l.k = r.k WHERE l.a > 0", "left"),
    ("SELECT l.k FROM l FULL JOIN r ON l.k = r.k WHERE r.b > 0", "right"),
    ("SELECT l.k FROM l FULL JOIN r ON l.k = r.k WHERE l.a > 0 OR r.b > 0", "full"),
])
def test_the_join_kind_in_the_plan(sql: str, kind: str) -> None:
    from plansight.engine.logical import plan as lp

    session = ps.Session(target_partitions=1)
    for name, table in TABLES.items():
        session.register(name, table)

    def kinds(node: lp.LogicalPlan) -> list[str]:
        own = [node.kind] if isinstance(node, lp.Join) else []
        return own + [k for child in node.inputs() for k in kinds(child)]

    assert kinds(session.sql(sql).optimized) == [kind]
