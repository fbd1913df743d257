"""Projection pushdown: every node computes and every scan reads only the columns used above."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import Column, Literal, columns_of, next_id


def push_down_projections(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    return _prune(plan, {c.id for c in plan.columns})


def _used(exprs) -> set[int]:
    out: set[int] = set()
    for e in exprs:
        out |= columns_of(e)
    return out


def _prune(plan: lp.LogicalPlan, required: set[int]) -> lp.LogicalPlan:
    if isinstance(plan, lp.Projection):
        kept = [(e, o) for e, o in zip(plan.exprs, plan.outputs) if o.id in required]
        if not kept:  # only the row count matters: a constant, not an expression that may fail
            kept = [(Literal(1, pa.int8()), Column(next_id(), "__row", pa.int8()))]
        exprs, outputs = zip(*kept)
        return lp.Projection(_prune(plan.input, _used(exprs)), tuple(exprs), tuple(outputs))
    if isinstance(plan, lp.Filter):
        return replace(plan, input=_prune(plan.input, required | columns_of(plan.predicate)))
    if isinstance(plan, lp.Aggregate):
        kept = [(a, o) for a, o in zip(plan.aggregates, plan.aggregate_outputs) if o.id in required]
        if not kept and not plan.group_exprs and not plan.of_grouping_sets:
            # a global aggregate is one row whatever its input: nothing below is needed (an
            # expression there that would fail is not evaluated, as in DuckDB)
            return lp.Values((), ((),))
        aggs = tuple(a for a, _ in kept)
        outs = tuple(o for _, o in kept)
        need = _used(plan.group_exprs) | _used(aggs)
        return replace(plan, input=_prune(plan.input, need), aggregates=aggs,
                       aggregate_outputs=outs)
    if isinstance(plan, lp.Window):
        kept = [(w, o) for w, o in zip(plan.windows, plan.window_outputs) if o.id in required]
        if not kept:
            return _prune(plan.input, required)
        windows = tuple(w for w, _ in kept)
        outs = tuple(o for _, o in kept)
        need = (required - {o.id for o in outs}) | _used(windows)
        return replace(plan, input=_prune(plan.input, need), windows=windows,
                       window_outputs=outs)
    if isinstance(plan, lp.Sort):
        need = required | _used(k.expr for k in plan.keys)
        return replace(plan, input=_prune(plan.input, need))
    if isinstance(plan, lp.Limit):
        return replace(plan, input=_prune(plan.input, required))
    if isinstance(plan, lp.Join):
        need = required | _used(plan.expressions())
        left = _prune(plan.left, need & {c.id for c in plan.left.columns})
        right = _prune(plan.right, need & {c.id for c in plan.right.columns})
        return replace(plan, left=left, right=right)
    if isinstance(plan, lp.Union):
        positions = [i for i, o in enumerate(plan.outputs) if o.id in required] or [0]
        inputs = []
        for child in plan.union_inputs:
            cols = [child.columns[i] for i in positions]
            pruned = _prune(child, {c.id for c in cols})
            if [c.id for c in pruned.columns] != [c.id for c in cols]:
                pruned = lp.Projection(pruned, tuple(cols), tuple(cols))
            inputs.append(pruned)
        return lp.Union(tuple(inputs), tuple(plan.outputs[i] for i in positions))
    if isinstance(plan, lp.TableScan):
        kept = [(c, n) for c, n in zip(plan.scan_columns, plan.projection) if c.id in required]
        if not kept:
            # nothing read by name (e.g. COUNT(*)): read the narrowest column for row counts
            kept = [min(zip(plan.scan_columns, plan.projection),
                        key=lambda cn: _width(cn[0].type))]
        return replace(plan, scan_columns=tuple(c for c, _ in kept),
                       projection=tuple(n for _, n in kept))
    return plan


def _width(t) -> int:
    try:
        return t.bit_width
    except ValueError:
        return 1 << 20
