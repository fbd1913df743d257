"""EXPLAIN prints the expression that runs: SQL with precedence-correct parentheses, SQL
literals (never Python reprs), no identity projections, and ids on the operators that other
lines refer to."""

from __future__ import annotations

import datetime
import re
from decimal import Decimal

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.logical.expr import Column, transform

TABLE = pa.table({
    "a": [1, 2], "b": [3, 4], "c": [1.5, 2.5], "s": ["x", "y"],
    "d": [datetime.date(1994, 1, 1), datetime.date(1995, 6, 30)],
    "ts": pa.array([datetime.datetime(2020, 1, 1, 10, 0)] * 2, pa.timestamp("us")),
    "m": pa.array([Decimal("1.25"), Decimal("2.50")], pa.decimal128(12, 2)),
})

EXPRESSIONS = [
    "a * (1 - b)", "(a - b) * c", "a - (b - 1)", "a - b - 1", "a / (b / 2)", "(a + b) % 3",
    "-(a + b)", "-a * b", "a - -b", "NOT (a > 1 AND b < 2)", "NOT a = 1",
    "(a = 1 OR b = 2) AND c > 0", "a = 1 OR b = 2 AND c > 0", "a = 1 OR (b = 2 OR c > 0)",
    "a IS NULL OR s IS NOT NULL", "(a + 1) IS NULL", "s LIKE 'x%' AND NOT s LIKE '%''%'",
    "a IN (1, 2 + 3)", "(a + 1) IN (2, 3)", "a BETWEEN b - 1 AND b + 1",
    "CASE WHEN a > 1 THEN 'big' WHEN b < 0 THEN s ELSE NULL END",
    "CAST(a AS VARCHAR) || s", "s || (s || 'z')", "CAST(c AS DECIMAL(10, 2)) * 2",
    "TRY_CAST(s AS INTEGER) + 1", "d < DATE '1994-01-01'", "ts >= TIMESTAMP '2020-01-01 10:00:00'",
    "m * (1 - m)", "abs(a - b) * 2", "coalesce(a, b) - 1", "a / 2", "c * 0.05", "TRUE AND a > 0",
    "a % 2 = 0 = (b % 2 = 0)",
]


def session() -> ps.Session:
    s = ps.Session(target_partitions=1)
    s.register("t", TABLE)
    return s


def bound(s: ps.Session, text: str):
    """The bound expression of ``SELECT text AS r FROM t``, its columns' ids erased."""
    expr = s.sql(f"SELECT {text} AS r FROM t").logical.exprs[0]
    return transform(expr, lambda e: Column(0, e.name, e.type, e.nullable)
                     if isinstance(e, Column) else e)


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_printed_expression_parses_back_to_the_same_expression(text):
    s = session()
    expr = bound(s, text)
    printed = str(expr)
    assert bound(s, printed) == expr, printed


def test_parentheses_the_issue_names():
    s = session()
    assert str(bound(s, "a * (1 - b)")) == "a * (1 - b)"
    assert str(bound(s, "(a - b) * b")) == "(a - b) * b"


def test_no_python_reprs_in_plans():
    s = session()
    text = s.sql("SELECT a FROM t WHERE d >= DATE '1994-01-01' AND ts < TIMESTAMP "
                 "'2021-01-01 00:00:00' AND m > 1.5 AND s <> 'q'").explain()
    assert "DATE '1994-01-01'" in text and "TIMESTAMP '2021-01-01 00:00:00'" in text
    assert "datetime" not in text and "Decimal(" not in text and "timestamp[us]" not in text


def test_parquet_pruning_predicate_is_sql(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(TABLE, tmp_path / "t.parquet")
    s = ps.Session(target_partitions=1)
    s.register_parquet("t", str(tmp_path / "t.parquet"))
    text = s.sql("SELECT a FROM t WHERE d >= DATE '1995-01-01'").explain()
    assert "pruning_predicate=[d >= DATE '1995-01-01']" in text and "datetime" not in text


def test_identity_projections_are_not_displayed():
    s = session()
    text = s.sql("SELECT * FROM t").explain()
    assert "ProjectionExec" not in text
    text = s.sql("SELECT a, b AS bee, a + 1 AS a1 FROM t").explain()
    assert "ProjectionExec: expr=[a, b AS bee, a + 1 AS a1]" in text
    analyze = s.sql("SELECT * FROM t").explain(analyze=True)
    assert "ProjectionExec" not in analyze and "output_rows=2" in analyze


def test_referenced_operators_show_their_ids():
    s = ps.Session(target_partitions=2)
    s.register("t", pa.table({"k": list(range(100)), "v": list(range(100))}))
    s.register("u", pa.table({"k": list(range(10)), "w": list(range(10))}))
    for sql in ("SELECT t.k, w FROM t JOIN u ON t.k = u.k",
                "SELECT k FROM t ORDER BY v DESC LIMIT 3"):
        text = s.sql(sql).explain()
        references = re.findall(r"from \w+\[(\d+)\]", text)
        assert references, text
        for operator_id in references:
            assert re.search(rf"^\s*\w+Exec: .*, id={operator_id}$", text, re.MULTILINE), text
