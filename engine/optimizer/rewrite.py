"""Rewriting the expressions of a logical node (shared by rules)."""

from __future__ import annotations

from dataclasses import replace

from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import Column, SortKey, next_id, replace_columns


def map_expressions(node: lp.LogicalPlan, fn) -> lp.LogicalPlan:
    """``node`` with ``fn`` applied to each of its expressions (same node if none change)."""
    if isinstance(node, lp.Filter):
        new = fn(node.predicate)
        return node if new is node.predicate else replace(node, predicate=new)
    if isinstance(node, lp.Projection):
        exprs = tuple(fn(e) for e in node.exprs)
        return node if _same(exprs, node.exprs) else replace(node, exprs=exprs)
    if isinstance(node, lp.Aggregate):
        groups = tuple(fn(e) for e in node.group_exprs)
        aggs = tuple(fn(a) for a in node.aggregates)
        if _same(groups, node.group_exprs) and _same(aggs, node.aggregates):
            return node
        return replace(node, group_exprs=groups, aggregates=aggs)
    if isinstance(node, lp.Window):
        windows = tuple(fn(w) for w in node.windows)
        return node if _same(windows, node.windows) else replace(node, windows=windows)
    if isinstance(node, lp.Sort):
        keys = tuple(SortKey(fn(k.expr), k.descending, k.nulls_first) for k in node.keys)
        return node if _same([k.expr for k in keys], [k.expr for k in node.keys]) else \
            replace(node, keys=keys)
    if isinstance(node, lp.Join):
        on = tuple((fn(a), fn(b)) for a, b in node.on)
        flt = fn(node.filter) if node.filter is not None else None
        if flt is node.filter and all(x is y for p, q in zip(on, node.on) for x, y in zip(p, q)):
            return node
        return replace(node, on=on, filter=flt)
    if isinstance(node, lp.Values):
        rows = tuple(tuple(fn(v) for v in row) for row in node.rows)
        return replace(node, rows=rows)
    return node


def _same(a, b) -> bool:
    return all(x is y for x, y in zip(a, b))


def produced_ids(plan: lp.LogicalPlan) -> set[int]:
    """Ids of every column any node of ``plan`` outputs."""
    ids = {c.id for c in plan.columns}
    for child in plan.inputs():
        ids |= produced_ids(child)
    return ids



_DEFINING = {lp.TableScan: ("scan_columns",), lp.Values: ("value_columns",),
             lp.Projection: ("outputs",), lp.Union: ("outputs",),
             lp.Aggregate: ("group_outputs", "aggregate_outputs"),
             lp.Window: ("window_outputs",)}


def fresh_copy(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    """``plan`` with a new id for every column it defines (references to columns it does not
    define, correlation, stay): a subquery used twice must not join the same ids twice.
    The plan must hold no SubqueryExpr (their plans are not renumbered)."""
    mapping: dict[int, Column] = {}

    def renumber(column: Column) -> Column:
        if column.id not in mapping:
            mapping[column.id] = Column(next_id(), column.name, column.type)
        return mapping[column.id]

    def copy(node: lp.LogicalPlan) -> lp.LogicalPlan:
        inputs = node.inputs()
        if inputs:
            node = node.with_inputs(tuple(copy(i) for i in inputs))
        if isinstance(node, lp.TableScan):
            node = replace(node, scan_columns=tuple(renumber(c) for c in node.scan_columns))
            return replace(node, filters=tuple(replace_columns(f, mapping)
                                               for f in node.filters))
        node = map_expressions(node, lambda e: replace_columns(e, mapping))
        for name in _DEFINING.get(type(node), ()):
            node = replace(node, **{name: tuple(renumber(c) for c in getattr(node, name))})
        return node

    return copy(plan)
