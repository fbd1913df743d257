"""The scalar-layer tests' table and helpers: a small table with NULLs, negatives, empty
strings, unicode, month-end dates and decimals, a test-only binder callback and evaluator, and
value comparison against DuckDB. A named module (not conftest) so that test files import it by
its package path, which stays unambiguous when several test directories run together."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import sqlglot
import sqlglot.expressions as exp

from plansight.engine.functions.scalar import evaluate_call, evaluate_cast
from plansight.engine.logical.expr import Call, Cast, Column, Expr, Literal
from plansight.engine.sql.functions import bind_scalar_node

TABLE = pa.table({
    "i": pa.array([1, -7, 0, None, 42, 2147483647, -3, 10], pa.int32()),
    "j": pa.array([2, 2, -5, 3, None, 1, 4, -10], pa.int64()),
    "k": pa.array([1, -2, 3, 4, 5, None, 7, 127], pa.int8()),
    "f": pa.array([1.5, -2.25, 0.0, None, 1e10, 3.75, -0.5, 2.5], pa.float64()),
    "g": pa.array([float("nan"), 1.0, float("inf"), float("-inf"), float("nan"), None, -0.0,
                   2.5], pa.float64()),
    "d": pa.array([Decimal("12.34"), Decimal("-0.05"), None, Decimal("100.00"),
                   Decimal("2.50"), Decimal("-7.25"), Decimal("0.00"), Decimal("99999.99")],
                  pa.decimal128(10, 2)),
    "e": pa.array([Decimal("0.10"), Decimal("3.00"), Decimal("-1.00"), None,
                   Decimal("0.06"), Decimal("1.00"), Decimal("2.00"), Decimal("0.50")],
                  pa.decimal128(15, 2)),
    "s": pa.array(["hello", "", None, "Ünïcödé straße", "  padded  ", "a_b%c", "HeLLo World",
                   "x,y,,z"]),
    "t": pa.array(["lo", "x", "a", None, "pad", "_", "World", ","]),
    "p": pa.array(["h%", "%", "a%", "%e%", "%pad%", "a\\_b%", "_eLLo%", None]),
    "n": pa.array(["12", " 7 ", "-3", None, "0", "2.5", "1e2", "+4"]),
    "dt": pa.array([dt.date(1995, 1, 31), dt.date(2000, 2, 29), dt.date(1999, 12, 31), None,
                    dt.date(1970, 1, 1), dt.date(1969, 12, 31), dt.date(1995, 3, 15),
                    dt.date(2024, 11, 30)], pa.date32()),
    "dt2": pa.array([dt.date(1995, 3, 1), dt.date(1999, 2, 28), None, dt.date(2001, 1, 1),
                     dt.date(1970, 1, 1), dt.date(1970, 1, 2), dt.date(1994, 3, 15),
                     dt.date(2024, 12, 1)], pa.date32()),
    "ts": pa.array([dt.datetime(1995, 1, 31, 10, 11, 12, 500000),
                    dt.datetime(2000, 2, 29, 23, 59, 59), None,
                    dt.datetime(1969, 12, 31, 23, 0, 0), dt.datetime(1970, 1, 1),
                    dt.datetime(2024, 11, 30, 12, 0, 0, 1), dt.datetime(1999, 12, 31, 0, 0, 1),
                    dt.datetime(2001, 7, 4, 6, 30)], pa.timestamp("us")),
    "b": pa.array([True, False, None, True, False, None, True, False]),
})


def _columns(table: pa.Table) -> dict[str, Column]:
    return {name: Column(100 + i, name, table.schema.field(name).type)
            for i, name in enumerate(table.column_names)}


COLUMNS = _columns(TABLE)
BATCH = pa.RecordBatch.from_arrays(
    [TABLE.column(name).combine_chunks() for name in TABLE.column_names],
    names=[COLUMNS[name].field_name for name in TABLE.column_names])


def bind_sql(expr_sql: str, options: dict | None = None) -> Expr:
    """Bind the select expression of ``SELECT <expr_sql> FROM t`` with bind_scalar_node."""
    options = {"integer_division": False, **(options or {})}
    node = sqlglot.parse_one(f"SELECT {expr_sql} FROM t", read="duckdb").expressions[0]

    def bind(child: exp.Expression) -> Expr:
        if isinstance(child, exp.Column):
            return COLUMNS[child.name]
        return bind_scalar_node(child, bind, options)

    return bind(node)


def evaluate(expr: Expr, batch: pa.RecordBatch = BATCH):
    if isinstance(expr, Column):
        return batch.column(batch.schema.get_field_index(expr.field_name))
    if isinstance(expr, Literal):
        return pa.scalar(expr.value, expr.type)
    if isinstance(expr, Cast):
        return evaluate_cast(evaluate(expr.expr, batch), expr.type, expr.safe)
    if isinstance(expr, Call):
        return evaluate_call(expr, [evaluate(a, batch) for a in expr.args])
    raise TypeError(type(expr))


def evaluate_column(expr: Expr) -> pa.Array:
    value = evaluate(expr)
    if isinstance(value, pa.Scalar):
        return pa.array([value.as_py()] * BATCH.num_rows, value.type)
    return value


# ----------------------------------------------------------------------------- comparison

def family(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_interval(t) or pa.types.is_duration(t):
        return "interval"
    if pa.types.is_null(t):
        return "null"
    return str(t)


def normalize(value):
    if isinstance(value, pa.MonthDayNano):
        if value.months == 0:
            return dt.timedelta(days=value.days, microseconds=value.nanoseconds // 1000)
        return (value.months, value.days, value.nanoseconds)
    return value


def same_value(mine, theirs) -> bool:
    mine, theirs = normalize(mine), normalize(theirs)
    if mine is None or theirs is None:
        return mine is None and theirs is None
    if isinstance(mine, bool) or isinstance(theirs, bool):
        return mine == theirs
    if isinstance(mine, (int, float, Decimal)) and isinstance(theirs, (int, float, Decimal)):
        a, b = float(mine), float(theirs)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return mine == theirs
