"""An integer SUM is held to BIGINT above HAVING, not in the aggregate: a group that HAVING
removes never shows its total, so a total beyond BIGINT there is no error (DuckDB, whose SUM
is a HUGEINT, returns the other groups; fuzz seeds 9001-9004)::

    Filter(p, Aggregate(sum(x)))
      ->  Projection(bigint_sum_total(s, 'sum(x)'), Filter(p[sum(x) := bigint_sum_total(s, ...)],
                                                  Aggregate(s = sum(x) typed DECIMAL(38, 0))))

and alike for ROLLUP / CUBE / GROUPING SETS, whose aggregates are the parts of a union.

The aggregate sums exactly (on int64 unless a group's sum could pass it, as for an exact
AVG); ``bigint_sum_total`` raises the BIGINT overflow error on the rows it is evaluated on:
the predicate's, when HAVING reads the sum, and then the kept groups'. Runs without the
optimizer too, so both plans agree.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from plansight.engine.functions.scalar import types as T
from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import (
    AggregateCall,
    Call,
    Column,
    Literal,
    next_id,
    replace_columns,
)

_EXACT = pa.decimal128(38, 0)


def bigint_sum_after_having(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    return lp.transform_plan(plan, _rewrite)


def _integer_sum(call: AggregateCall) -> bool:
    return call.func == "sum" and call.type == pa.int64() and len(call.args) == 1 and \
        T.is_integer(call.args[0].type)


def _rewrite(node: lp.LogicalPlan) -> lp.LogicalPlan:
    if not isinstance(node, lp.Filter):
        return node
    below = node.input
    if isinstance(below, lp.Aggregate):
        exact, columns = _exact_sums(below)
        if exact is None:
            return node
        positions = [i for i, c in enumerate(below.columns) if c.id in columns]
        grouped = exact
    elif isinstance(below, lp.Union) and below.union_inputs and \
            all(_aggregate_of(part) is not None for part in below.union_inputs):
        # GROUP BY ROLLUP / CUBE / GROUPING SETS: a union of aggregates (binder)
        positions = [i for i in range(len(below.outputs))
                     if all(_integer_sum_at(part, i) for part in below.union_inputs)]
        if not positions:
            return node
        parts = tuple(_exact_part(part, positions) for part in below.union_inputs)
        outputs = tuple(Column(next_id(), c.name, _EXACT) if i in positions else c
                        for i, c in enumerate(below.outputs))
        grouped = replace(below, union_inputs=parts, outputs=outputs)
    else:
        return node
    totals = {below.columns[i].id: Call("bigint_sum_total", (
        grouped.columns[i], Literal(below.columns[i].name, pa.string())), pa.int64())
        for i in positions}
    kept = lp.Filter(grouped, replace_columns(node.predicate, totals))
    return lp.Projection(kept, tuple(totals.get(c.id, c) for c in below.columns),
                         below.columns)


def _exact_sums(aggregate: lp.Aggregate, only: set[int] | None = None):
    """``aggregate`` with its integer SUMs (those whose outputs are in ``only``, if given)
    typed DECIMAL(38, 0), and the ids of the replaced outputs (None, {} when none)."""
    aggregates, outputs, replaced = [], [], set()
    for call, output in zip(aggregate.aggregates, aggregate.aggregate_outputs):
        if _integer_sum(call) and (only is None or output.id in only):
            aggregates.append(replace(call, type=_EXACT))
            outputs.append(Column(next_id(), f"__sum_{output.name}", _EXACT))
            replaced.add(output.id)
        else:
            aggregates.append(call)
            outputs.append(output)
    if not replaced:
        return None, {}
    return replace(aggregate, aggregates=tuple(aggregates),
                   aggregate_outputs=tuple(outputs)), replaced


def _aggregate_of(part: lp.LogicalPlan) -> lp.Aggregate | None:
    """The aggregate of a grouping set's part: the aggregate, or a projection over it."""
    if isinstance(part, lp.Projection):
        part = part.input
    return part if isinstance(part, lp.Aggregate) else None


def _sum_outputs(aggregate: lp.Aggregate) -> set[int]:
    return {o.id for a, o in zip(aggregate.aggregates, aggregate.aggregate_outputs)
            if _integer_sum(a)}


def _integer_sum_at(part: lp.LogicalPlan, position: int) -> bool:
    """Whether the part's output at ``position`` is one of its aggregate's integer SUMs."""
    sums = _sum_outputs(_aggregate_of(part))
    if isinstance(part, lp.Projection):
        expr = part.exprs[position]
        return isinstance(expr, Column) and expr.id in sums
    return part.columns[position].id in sums


def _exact_part(part: lp.LogicalPlan, positions: list[int]) -> lp.LogicalPlan:
    """The part with the SUMs at ``positions`` exact, output in the same places."""
    if isinstance(part, lp.Aggregate):
        exact, _ = _exact_sums(part, {part.columns[i].id for i in positions})
        return exact
    aggregate = part.input
    ids = {part.exprs[i].id for i in positions}
    exact, _ = _exact_sums(aggregate, ids)
    moved = {old.id: new for old, new in zip(aggregate.columns, exact.columns)
             if old.id != new.id}
    exprs = tuple(moved.get(e.id, e) if isinstance(e, Column) else e for e in part.exprs)
    outputs = tuple(Column(next_id(), o.name, _EXACT) if i in positions else o
                    for i, o in enumerate(part.outputs))
    return lp.Projection(exact, exprs, outputs)
