"""Errors of the scalar layer: type mismatches and unknown functions while binding, data errors
while evaluating, unimplemented SQL as NotSupportedError; plus the modules' doctests."""

from __future__ import annotations

import doctest
import importlib
import re

import pyarrow as pa
import pytest

from plansight.engine.functions.scalar import (
    cast_expr,
    common_supertype,
    evaluate_call,
    evaluate_cast,
    resolve_operator,
)
from plansight.engine.logical.expr import Call, Column, Literal
from plansight.errors import ExecutionError, NotSupportedError, PlanError
from tests.functions.scalar.scalar_table import bind_sql, evaluate_column


@pytest.mark.parametrize("sql, message", [
    ("s + i", "cannot apply '+' to VARCHAR and INTEGER"),
    ("b + 1", "cannot apply '+' to BOOLEAN and INTEGER"),
    ("s = i", "cannot apply '=' to VARCHAR and INTEGER"),
    ("dt * 2", "cannot apply '*' to DATE and INTEGER"),
    ("lower(i)", "lower(INTEGER)"),
    ("length(dt)", "length(DATE)"),
    ("s LIKE i", "LIKE"),
    ("CASE WHEN i > 0 THEN s ELSE dt END", "CASE"),
    ("COALESCE(s, i)", "COALESCE"),
    ("i IN ('a', s)", "IN"),
    ("dt AND b", "AND"),
    ("CAST(dt AS INTEGER)", "cannot cast DATE to INTEGER"),
    ("CAST(i AS DATE)", "cannot cast INTEGER to DATE"),
    ("'abc' + 1", "Could not convert string 'abc' to INTEGER"),
    ("date_part('fortnight', dt)", "unknown date part 'fortnight'"),
    ("substring(s)", "takes 2 to 3 arguments"),
])
def test_type_errors(sql, message):
    with pytest.raises(PlanError, match=re.escape(message)):
        bind_sql(sql)


def test_unknown_function_suggests():
    with pytest.raises(PlanError, match=r"unknown function 'lowr'.*Did you mean 'lower'"):
        bind_sql("lowr(s)")
    with pytest.raises(PlanError, match=r"unknown function 'substrng'.*'substring'"):
        bind_sql("substrng(s, 1, 2)")


@pytest.mark.parametrize("sql", ["uuid()", "levenshtein(s, t)", "md5(s)"])
def test_not_supported_function(sql):
    with pytest.raises(NotSupportedError, match="is not supported yet"):
        bind_sql(sql)


def test_not_supported_syntax():
    with pytest.raises(NotSupportedError):
        bind_sql("s[1]")  # subscripts


@pytest.mark.parametrize("sql, message", [
    ("i // 0", "division by zero in '//'"),
    ("i % 0", "division by zero in '%'"),
    ("i // (j - j)", "division by zero"),
    ("d % 0", "division by zero in '%'"),
    ("i + 1", "Overflow in addition"),
    ("k * k", "Overflow in multiplication"),
    ("CAST(s AS INTEGER)", "Could not convert string 'hello' to INTEGER"),
    ("CAST(s AS DATE)", "Could not convert string 'hello' to DATE"),
    ("CAST(i AS TINYINT)", "out of range for TINYINT"),
    ("CAST(d AS DECIMAL(4,2))", "out of range"),
    ("CAST(f * 1e300 * 1e300 AS INTEGER)", "can't be cast"),
    ("make_date(2001, 2, i)", "Date out of range: 2001-2--7"),
    # a written CAST of a constant fails where a row evaluates it, not while binding: a CASE
    # branch no row takes must not fail the query (as in DuckDB)
    ("DATE '1995-02-30'", "Could not convert string '1995-02-30' to DATE"),
])
def test_execution_errors(sql, message):
    expr = bind_sql(sql)
    with pytest.raises(ExecutionError, match=message):
        evaluate_column(expr)


def test_integer_division_by_zero_ignores_null_divisors():
    expr = bind_sql("i // NULLIF(j, j)")
    assert evaluate_column(expr).null_count == 8


def test_try_cast_gives_null_instead_of_error():
    assert evaluate_column(bind_sql("TRY_CAST(s AS INTEGER)")).to_pylist() == [None] * 8


def test_common_supertype():
    assert common_supertype([pa.int32(), pa.int64()], "x") == pa.int64()
    assert common_supertype([pa.int32(), pa.decimal128(2, 1)], "x") == pa.decimal128(11, 1)
    assert common_supertype([pa.decimal128(15, 2), pa.float64()], "x") == pa.float64()
    assert common_supertype([pa.date32(), pa.timestamp("us")], "x") == pa.timestamp("us")
    assert common_supertype([pa.null(), pa.string()], "x") == pa.string()
    with pytest.raises(PlanError, match="UNION column 'a'.*VARCHAR, INTEGER"):
        common_supertype([pa.string(), pa.int32()], "UNION column 'a'")


def test_cast_expr_validates_and_folds_literals():
    column = Column(1, "c", pa.int32())
    assert cast_expr(column, pa.int32()) is column
    assert cast_expr(Literal("42", pa.string()), pa.int64()) == Literal(42, pa.int64())
    with pytest.raises(PlanError, match="cannot cast BOOLEAN to DATE"):
        cast_expr(Column(2, "b", pa.bool_()), pa.date32())
    assert cast_expr(Literal("x", pa.string()), pa.int32(), safe=True).value is None


def test_all_scalar_arguments_give_a_scalar():
    call = resolve_operator("add", [Literal(1, pa.int32()), Literal(2, pa.int32())], {})
    result = evaluate_call(call, [pa.scalar(1, pa.int32()), pa.scalar(2, pa.int32())])
    assert isinstance(result, pa.Scalar) and result.as_py() == 3
    case = bind_sql("CASE WHEN 1 > 2 THEN 'a' ELSE 'b' END")
    assert isinstance(case, Call)
    assert evaluate_call(case, [pa.scalar(False), pa.scalar("a"), pa.scalar("b")]).as_py() == "b"


def test_evaluate_cast_on_chunked_and_scalar():
    chunked = pa.chunked_array([["1", "2"], ["3"]])
    assert evaluate_cast(chunked, pa.int32(), False).to_pylist() == [1, 2, 3]
    assert evaluate_cast(pa.scalar("2.5"), pa.int32(), False).as_py() == 3


def test_random_per_row_with_num_rows():
    call = bind_sql("random()")
    values = evaluate_call(call, [], num_rows=5)
    assert len(values) == 5 and len(set(values.to_pylist())) == 5


@pytest.mark.parametrize("module", [
    "types", "cast", "registry", "comparison", "utf8", "temporal", "arithmetic", "math",
    "strings", "conditional", "calendar", "misc", "__init__",
])
def test_doctests(module):
    name = "plansight.engine.functions.scalar" + ("" if module == "__init__" else "." + module)
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0


def test_sql_functions_doctests():
    result = doctest.testmod(importlib.import_module("plansight.engine.sql.functions"))
    assert result.failed == 0
