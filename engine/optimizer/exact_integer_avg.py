"""AVG of integers from an exact sum, as DuckDB computes it (a HUGEINT sum, divided once).

A DOUBLE running sum rounds once the total passes 2**53: the mean of BIGINTs that cancel
(``avg(a.j - b.j)`` over a cross join, exactly 0) came out 85.3 (fuzz seed 1301). The sum is
exact as DECIMAL(38, 0), for any count of BIGINTs below 2**64 rows::

    avg(x)  ->  CAST(sum(x) AS DOUBLE) / count(x)    with sum(x) typed DECIMAL(38, 0)

with the aggregate's DISTINCT and FILTER on both (no rows: the sum is NULL, and so is the
mean). Window AVG is left alone. Runs without the optimizer too, so both plans agree.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from plansight.engine.functions.scalar import resolve_operator
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import cast_expr
from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import AggregateCall, Column, Expr, next_id

_EXACT = pa.decimal128(38, 0)


def exact_integer_avg(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    return lp.transform_plan(plan, _rewrite)


def _integer_avg(call: AggregateCall) -> bool:
    return call.func in ("avg", "mean") and len(call.args) == 1 and \
        T.is_integer(call.args[0].type)


def _rewrite(node: lp.LogicalPlan) -> lp.LogicalPlan:
    if not (isinstance(node, lp.Aggregate) and any(_integer_avg(a) for a in node.aggregates)):
        return node
    aggregates, outputs = [], []
    means: dict[int, Expr] = {}
    for call, output in zip(node.aggregates, node.aggregate_outputs):
        if not _integer_avg(call):
            aggregates.append(call)
            outputs.append(output)
            continue
        total = Column(next_id(), f"__sum_{output.name}", _EXACT)
        count = Column(next_id(), f"__count_{output.name}", pa.int64())
        # the integers themselves, summed exactly: on int64 unless a group's sum could
        # pass it (functions/aggregate.py), never a 128-bit value per row
        aggregates += [replace(call, func="sum", type=_EXACT),
                       replace(call, func="count", type=pa.int64())]
        outputs += [total, count]
        means[output.id] = resolve_operator("divide", [
            cast_expr(total, pa.float64()), cast_expr(count, pa.float64())], {})
    grouped = replace(node, aggregates=tuple(aggregates), aggregate_outputs=tuple(outputs))
    exprs = tuple(means.get(c.id, c) for c in node.columns)
    return lp.Projection(grouped, exprs, node.columns)
