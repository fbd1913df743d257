"""Nested and interval keys by their canonical bytes: GROUP BY, DISTINCT, set operations,
joins, window partitions and ``=`` on structs, lists, maps and intervals.

An interval's canonical bytes are its normalized value (a day is 24 hours, a month 30 days, as
DuckDB compares them), so 1 month, 30 days and 720 hours are one group and join each other;
the group shows one of its values, as in DuckDB.

Arrow's hash kernels take no nested keys, so each nested key becomes ``nested_key(x)``, one
byte string per value that is equal exactly when DuckDB's nested comparison says equal (a
NULL field or element equals NULL, -0.0 equals 0.0, NaN equals NaN; kernels/nested_keys.py).
A NULL struct or list stays NULL: it joins nothing and groups with NULL::

    Aggregate[s; aggs]          ->  Projection(any_value(s) AS s, aggs) over
                                    Aggregate[nested_key(s); aggs, any_value(s)]
    Join on (a.l, b.l)          ->  Join on (nested_key(a.l), nested_key(b.l))
    a.s = b.s, IS [NOT] DISTINCT FROM, IN (list)  ->  the same over nested_key
    count(DISTINCT s)           ->  count(DISTINCT nested_key(s))
    OVER (PARTITION BY l)       ->  OVER (PARTITION BY nested_key(l))

ORDER BY (of a query or a window) and ``<``, ``<=``, ``>``, ``>=`` on nested values go
through their order-preserving bytes instead, ``nested_order_key(x)`` (kernels/order_keys.py),
which sort as DuckDB orders the values (a NULL field or element after every value).

Runs after decorrelation (its joins), before filter pushdown (whose equi keys then come out
already encoded), and without the optimizer too: the plan cannot run otherwise.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import (
    AggregateCall,
    Call,
    Column,
    Expr,
    SortKey,
    WindowCall,
    next_id,
    transform,
)
from plansight.engine.optimizer.rewrite import map_expressions

_EQUALITIES = ("eq", "neq", "is_distinct_from", "is_not_distinct_from", "in_list")
_ORDERINGS = ("lt", "lte", "gt", "gte")
_DISTINCT_BY_KEY = ("count",)


def encode_nested_keys(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    return lp.transform_plan(plan, _rewrite)


def is_nested(t: pa.DataType) -> bool:
    """Whether keys of type ``t`` are compared by their canonical bytes: nested values, and
    intervals, whose equal values differ in their fields (1 month, 30 days, 720 hours)."""
    return pa.types.is_nested(t) or pa.types.is_interval(t)


def key_of(expr: Expr) -> Expr:
    return Call("nested_key", (expr,), pa.binary()) if is_nested(expr.type) else expr


def order_key_of(expr: Expr) -> Expr:
    """``expr``'s order-preserving bytes if it is a struct, list or map (kernels/order_keys)."""
    return Call("nested_order_key", (expr,), pa.binary()) \
        if pa.types.is_nested(expr.type) else expr


def _order_keys(keys: tuple[SortKey, ...]) -> tuple[SortKey, ...]:
    return tuple(replace(k, expr=order_key_of(k.expr)) for k in keys)


def _expression(expr: Expr) -> Expr:
    def fn(e: Expr) -> Expr:
        if isinstance(e, Call) and e.func in _EQUALITIES and any(
                is_nested(a.type) for a in e.args):
            return replace(e, args=tuple(key_of(a) for a in e.args))
        if isinstance(e, Call) and e.func in _ORDERINGS and any(
                pa.types.is_nested(a.type) for a in e.args):
            return replace(e, args=tuple(order_key_of(a) for a in e.args))
        if isinstance(e, AggregateCall) and e.distinct and e.func in _DISTINCT_BY_KEY and \
                any(is_nested(a.type) for a in e.args):
            return replace(e, args=tuple(key_of(a) for a in e.args))
        if isinstance(e, WindowCall) and (
                any(is_nested(p.type) for p in e.partition_by) or
                any(pa.types.is_nested(k.expr.type) for k in e.order_by)):
            return replace(e, partition_by=tuple(key_of(p) for p in e.partition_by),
                           order_by=_order_keys(e.order_by))
        return e
    return transform(expr, fn)


def _rewrite(node: lp.LogicalPlan) -> lp.LogicalPlan:
    node = map_expressions(node, _expression)
    if isinstance(node, lp.Sort) and any(pa.types.is_nested(k.expr.type) for k in node.keys):
        return replace(node, keys=_order_keys(node.keys))
    if isinstance(node, lp.Join) and any(is_nested(a.type) for pair in node.on for a in pair):
        return replace(node, on=tuple((key_of(a), key_of(b)) for a, b in node.on))
    if isinstance(node, lp.Aggregate) and any(is_nested(g.type) for g in node.group_exprs):
        return _aggregate(node)
    return node


def _aggregate(node: lp.Aggregate) -> lp.LogicalPlan:
    """Group by the keys' bytes; each nested key's value is any row's of its group."""
    groups, outputs, values, value_outputs = [], [], [], []
    for expr, output in zip(node.group_exprs, node.group_outputs):
        if not is_nested(expr.type):
            groups.append(expr)
            outputs.append(output)
            continue
        groups.append(key_of(expr))
        outputs.append(Column(next_id(), f"__key_{output.name}", pa.binary()))
        values.append(AggregateCall("any_value", (expr,), expr.type))
        value_outputs.append(output)
    grouped = lp.Aggregate(node.input, tuple(groups), tuple(outputs),
                           node.aggregates + tuple(values),
                           node.aggregate_outputs + tuple(value_outputs))
    return lp.Projection(grouped, node.columns, node.columns)
