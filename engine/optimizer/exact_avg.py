"""AVG of integers and decimals from an exact sum, divided once, as DuckDB computes it.

A DOUBLE running sum rounds once the total passes 2**53: the mean of BIGINTs that cancel
(``avg(a.j - b.j)`` over a cross join, exactly 0) came out 85.3 (fuzz seed 1301). And a
DECIMAL's mean depended on the partition count: each partition's sum went to double and was
divided in a different order than a single partition's (``avg`` of seven 3.33 was
3.3300000000000005 at two partitions, 3.33 at one; a UNION then kept both as distinct rows,
fuzz seed 9105). DuckDB sums into a HUGEINT and divides once at the end; so does this::

    avg(x)  ->  average(sum(x), count(x), mode)

with sum(x) typed DECIMAL(38, s) for x INTEGER (s = 0) or DECIMAL(p, s): exact, and summed
on int64 by the aggregate kernels while it fits. ``average`` (kernels/decimal.py) divides
once, rounding as DuckDB does, which depends on DuckDB's plan (``mode``): an ungrouped AVG
without FILTER or DISTINCT is its double sum over the count; others divide ``sum`` by
``count * 10**s`` in long double, or in double for 16-bit arguments. The aggregate's
DISTINCT and FILTER go to both (no rows: the sum is NULL, and so is the mean). Window AVG
is left alone. Runs without the optimizer too, so both plans agree.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from plansight.engine.functions.scalar import resolve_operator
from plansight.engine.functions.scalar import types as T
from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import AggregateCall, Column, Expr, Literal, next_id


def exact_avg(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    return lp.transform_plan(plan, _rewrite)


def _exact_avg(call: AggregateCall) -> bool:
    return call.func in ("avg", "mean") and len(call.args) == 1 and \
        (T.is_integer(call.args[0].type) or T.is_decimal(call.args[0].type))


def _mode(node: lp.Aggregate, call: AggregateCall) -> str:
    """How DuckDB (2.0) rounds this AVG (kernels/decimal.py ``average``), measured against
    it: an ungrouped one without FILTER or DISTINCT (and not the empty set among several
    grouping sets) as CAST(SUM(x) AS DOUBLE) / COUNT(x); any other by its AVG aggregate,
    whose sum is a HUGEINT divided in long double for arguments stored in 32 bits or more
    (INTEGER, BIGINT, DECIMAL(p > 4)), an int64 divided in double for SMALLINT, TINYINT and
    DECIMAL(p <= 4)."""
    if not node.group_exprs and not node.of_grouping_sets and not call.distinct and \
            call.filter is None:
        return "double sum"
    t = call.args[0].type
    wide = t.precision > 4 if T.is_decimal(t) else t.bit_width >= 32 or t == pa.uint16()
    return "long double" if wide else "double"


def _rewrite(node: lp.LogicalPlan) -> lp.LogicalPlan:
    if not (isinstance(node, lp.Aggregate) and any(_exact_avg(a) for a in node.aggregates)):
        return node
    aggregates, outputs = [], []
    means: dict[int, Expr] = {}
    for call, output in zip(node.aggregates, node.aggregate_outputs):
        if not _exact_avg(call):
            aggregates.append(call)
            outputs.append(output)
            continue
        t = call.args[0].type
        exact = pa.decimal128(38, t.scale if T.is_decimal(t) else 0)
        total = Column(next_id(), f"__sum_{output.name}", exact)
        count = Column(next_id(), f"__count_{output.name}", pa.int64())
        # the values themselves, summed exactly: on int64 unless a group's sum could pass
        # it (functions/aggregate.py), never a 128-bit value per row
        aggregates += [replace(call, func="sum", type=exact),
                       replace(call, func="count", type=pa.int64())]
        outputs += [total, count]
        means[output.id] = resolve_operator(
            "average", [total, count, Literal(_mode(node, call), pa.string())], {})
    grouped = replace(node, aggregates=tuple(aggregates), aggregate_outputs=tuple(outputs))
    exprs = tuple(means.get(c.id, c) for c in node.columns)
    return lp.Projection(grouped, exprs, node.columns)
