"""keep_source_order: rows the query does not reorder come out in the source's order.

DuckDB (``preserve_insertion_order``) and Polars return ``SELECT * FROM t``, a filter, a
projection or a LIMIT without ORDER BY in the order the rows were stored; a user reading
the first rows expects the first rows. A scan's partitions are contiguous source ranges
and projections, filters and limits keep the order within a partition, so the only place
the order is lost is a CoalescePartitionsExec that interleaves partitions. This rule makes
such a merge read the partitions in range order — only where the order reaches something
that shows it:

    the query's result          the rows' order is what the user sees
    a LIMIT (global)            which rows it keeps depends on the order of its input

    a window over unsorted input   row_number() OVER (), lag, a ROWS frame, ... see the
      (HashWindowAggExec)          order of the rows its ORDER BY leaves tied (the window
                                   keeps its input's order, so the result then shows it too)
    the sorted window executors'   the same windows, sorted by a last key numbered in the
      SourcePositionExec           order its input arrives

and passes that down through operators that keep their input's row order (projection,
filter, limit, coalesce, UNION ALL). Every other operator (aggregate, join, sort, the sorted
window executors) makes its own order, so an order-insensitive consumer pays nothing, and
neither does a merge of partitions that hold no source order (an aggregate's hash
partitions).
"""

from __future__ import annotations

from plansight.engine.physical.coalesce_partitions import CoalescePartitionsExec
from plansight.engine.physical.filter import FilterExec
from plansight.engine.physical.limit import GlobalLimitExec
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.projection import ProjectionExec
from plansight.engine.physical.scan import DataSourceExec
from plansight.engine.physical.source_position import SourcePositionExec
from plansight.engine.physical.union import UnionExec
from plansight.engine.physical.windows.window_hash_agg import HashWindowAggExec

# operators whose output rows are their input's rows in the input's order (per partition)
_ORDER_KEEPING = (ProjectionExec, FilterExec, GlobalLimitExec, CoalescePartitionsExec, UnionExec)


def keep_source_order(plan: ExecutionPlan, order_matters: bool = True) -> ExecutionPlan:
    """``plan`` with order-preserving coalesces where the row order is visible above them."""
    if isinstance(plan, GlobalLimitExec) and not plan.local:
        order_matters = True  # LIMIT n keeps the first n rows of its input
    children_matter = order_matters and isinstance(plan, _ORDER_KEEPING)
    if isinstance(plan, HashWindowAggExec):
        children_matter = plan.sees_input_order()
    elif isinstance(plan, SourcePositionExec):
        children_matter = True  # the positions it numbers are the source's order
    children = [keep_source_order(child, children_matter) for child in plan.children()]
    if isinstance(plan, CoalescePartitionsExec) and order_matters and \
            not plan.preserve_order and children[0].output_partitioning().count > 1 and \
            _in_source_order(children[0]):
        return CoalescePartitionsExec(children[0], preserve_order=True)
    if all(a is b for a, b in zip(children, plan.children())):
        return plan
    return plan.with_children(children)


def _in_source_order(plan: ExecutionPlan) -> bool:
    """Whether ``plan``'s partitions are contiguous source ranges, in range order, each in
    source order: scans reached through order-keeping operators only."""
    if isinstance(plan, DataSourceExec):
        return plan.read_order is None  # a top-k's read order deals units out of order
    return isinstance(plan, _ORDER_KEEPING) and all(map(_in_source_order, plan.children()))
