"""An integer SUM is held to BIGINT above HAVING, not in the aggregate: a group that HAVING
removes never shows its total, so a total beyond BIGINT there is no error (DuckDB, whose SUM
is a HUGEINT, returns the other groups; fuzz seeds 9001-9004)::

    Filter(p, Aggregate(sum(x)))
      ->  Projection(bigint_sum_total(s, 'sum(x)'), Filter(p[sum(x) := bigint_sum_total(s, ...)],
                                                  Aggregate(s = sum(x) typed DECIMAL(38, 0))))

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
    Expr,
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
    if not (isinstance(node, lp.Filter) and isinstance(node.input, lp.Aggregate)):
        return node
    aggregate = node.input
    if not any(_integer_sum(a) for a in aggregate.aggregates):
        return node
    aggregates, outputs = [], []
    totals: dict[int, Expr] = {}
    for call, output in zip(aggregate.aggregates, aggregate.aggregate_outputs):
        if not _integer_sum(call):
            aggregates.append(call)
            outputs.append(output)
            continue
        exact = Column(next_id(), f"__sum_{output.name}", _EXACT)
        aggregates.append(replace(call, type=_EXACT))
        outputs.append(exact)
        totals[output.id] = Call("bigint_sum_total", (exact, Literal(output.name, pa.string())),
                                 pa.int64())
    grouped = replace(aggregate, aggregates=tuple(aggregates),
                      aggregate_outputs=tuple(outputs))
    kept = lp.Filter(grouped, replace_columns(node.predicate, totals))
    return lp.Projection(kept, tuple(totals.get(c.id, c) for c in aggregate.columns),
                         aggregate.columns)
