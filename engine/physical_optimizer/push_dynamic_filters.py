"""Attach dynamic filters from top-k sorts and hash joins to the scans that feed them.

A filter may only travel down through operators that pass rows through unchanged (projection
renames, filters, partition exchanges): below a limit, an aggregate or a window, dropping rows
early would change the answer.

A top-k whose input is not already sorted on its first key also has its scan read the units
most likely to hold the top rows first (``DataSourceExec.read_first_by``), so the threshold
tightens at once and the filter prunes the other units by their statistics.
"""

from __future__ import annotations

from plansight.engine.logical.expr import Column, Expr
from plansight.engine.physical.coalesce_partitions import CoalescePartitionsExec
from plansight.engine.physical.dynamic_filter import DynamicFilter
from plansight.engine.physical.filter import FilterExec
from plansight.engine.physical.joins.hash_join import HashJoinExec
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.projection import ProjectionExec
from plansight.engine.physical.repartition import RepartitionExec
from plansight.engine.physical.scan import DataSourceExec
from plansight.engine.physical.sorts.sort import SortExec

# probe rows without a match never reach the output of these join types
_PROBE_DROPPING = ("inner", "left", "left_semi", "left_anti", "right_semi")


def push_dynamic_filters(plan: ExecutionPlan, max_keys: int = 1024) -> ExecutionPlan:
    for _, node in plan.walk():
        if isinstance(node, SortExec) and node.fetch is not None and node.keys:
            key = node.keys[0]
            if key.nulls_first or not isinstance(key.expr, Column):
                continue
            found = find_scan_column(node.input, key.expr)
            if found is not None:
                dynamic_filter = DynamicFilter(f"TopK[{node.operator_id}]", keep_nulls=True)
                found[0].dynamic_filters.append((found[1], dynamic_filter))
                node.dynamic_filter = (dynamic_filter, key.descending)
                # reading in another order is only free when nothing relies on the order
                if not node.sorted_prefix() and not _keeps_order_on_path(node.input):
                    found[0].read_first_by(found[1], key.descending)
        elif isinstance(node, HashJoinExec) and node.join_type in _PROBE_DROPPING:
            filters = []
            for build_key, probe_key in node.on:
                found = find_scan_column(node.right, probe_key)
                if found is None:
                    continue
                dynamic_filter = DynamicFilter(f"HashJoin[{node.operator_id}]",
                                               keep_nulls=node.null_equal, max_keys=max_keys)
                found[0].dynamic_filters.append((found[1], dynamic_filter))
                filters.append((build_key, dynamic_filter))
            node.dynamic_filters = filters
    return plan


def find_scan_column(plan: ExecutionPlan, column: Expr):
    """(scan, source column name) that produces ``column`` unchanged, or None."""
    while True:
        if not isinstance(column, Column):
            return None
        if isinstance(plan, DataSourceExec):
            if plan.fetch is not None:
                return None  # a LIMIT inside the scan: filtering first changes which rows
            names = plan.schema.names
            if column.field_name in names:
                return plan, plan.columns[names.index(column.field_name)]
            return None
        if isinstance(plan, ProjectionExec):
            source = next((e for e, o in zip(plan.exprs, plan.outputs) if o.id == column.id),
                          None)
            if source is None:
                return None
            column, plan = source, plan.input
            continue
        if isinstance(plan, (FilterExec, CoalescePartitionsExec, RepartitionExec)):
            plan = plan.children()[0]
            continue
        return None


def _keeps_order_on_path(plan: ExecutionPlan) -> bool:
    """Whether an operator between ``plan`` and its scan (a chain ``find_scan_column``
    accepted) relies on the scan's row order: an order-preserving repartition."""
    while not isinstance(plan, DataSourceExec):
        if isinstance(plan, RepartitionExec) and plan.preserve_order:
            return True
        plan = plan.children()[0]
    return False


