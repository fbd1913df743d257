"""Unwrap casts in comparisons: compare the column in its own type, not each row cast.

``CAST(d AS TIMESTAMP) <= TIMESTAMP '1998-09-02 00:00'`` (what ``d <= DATE '...' - INTERVAL``
binds to) becomes ``d <= DATE '1998-09-02'``: no per-row cast, and the scan can prune row
groups with it. Likewise ``CAST(i32 AS BIGINT) = 5`` becomes ``i32 = 5`` when 5 fits.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from plansight.engine.logical.expr import Call, Cast, Column, Expr, Literal, transform
from plansight.engine.logical.plan import LogicalPlan, transform_plan
from plansight.engine.optimizer.rewrite import map_expressions

_MIRROR = {"lt": "gt", "lte": "gte", "gt": "lt", "gte": "lte", "eq": "eq", "neq": "neq"}


def unwrap_cast_in_comparison(plan: LogicalPlan) -> LogicalPlan:
    return transform_plan(plan, lambda node: map_expressions(
        node, lambda e: transform(e, _unwrap)))


def _unwrap(expr: Expr) -> Expr:
    if not (isinstance(expr, Call) and expr.func in _MIRROR and len(expr.args) == 2):
        return expr
    a, b = expr.args
    op = expr.func
    if isinstance(a, Literal) and isinstance(b, Cast):
        a, b, op = b, a, _MIRROR[op]
    if not (isinstance(a, Cast) and isinstance(b, Literal) and not a.safe
            and isinstance(a.expr, Column)) or b.value is None:
        return expr
    source = a.expr.type
    if pa.types.is_date32(source) and pa.types.is_timestamp(a.type):
        return _date_vs_timestamp(a.expr, op, b.value) or expr
    if pa.types.is_integer(source) and pa.types.is_integer(a.type) and \
            isinstance(b.value, int) and _fits(b.value, source):
        return Call(op, (a.expr, Literal(b.value, source)), expr.type)
    return expr


def _date_vs_timestamp(column: Column, op: str, stamp) -> Expr | None:
    if not isinstance(stamp, dt.datetime) or stamp.tzinfo is not None:
        return None
    day = stamp.date()
    midnight = stamp == dt.datetime.combine(day, dt.time())
    if not midnight:
        # a date (at midnight) vs a time inside ``day``
        if op in ("lt", "lte"):
            op = "lte"
        elif op in ("gt", "gte"):
            op = "gt"
        else:
            return None
    return Call(op, (column, Literal(day, pa.date32())), pa.bool_())


def _fits(value: int, t: pa.DataType) -> bool:
    bits = t.bit_width
    if pa.types.is_signed_integer(t):
        return -(1 << (bits - 1)) <= value < (1 << (bits - 1))
    return 0 <= value < (1 << bits)
