"""Attach dynamic filters from top-k sorts and hash joins to the scans that feed them.

A filter may only travel down through operators that pass rows through unchanged (projection
renames, filters, partition exchanges): below a limit or a window, dropping rows early would
change the answer. A join's key filter also travels

- below a hash aggregate, when its column is a group key: the rows it drops make up whole
  groups whose key the join would drop anyway (Q17's average per part, Q20's sum per part
  and supplier: only the parts of the outer query are aggregated, DuckDB's "delim join"
  by another road);
- through another hash join, into the side whose rows the column comes from, when that
  side is preserved (both sides of an inner join; the left of a left, semi or anti join):
  an output row with key k comes from a row of that side with key k, and dropping that row
  drops only output rows with the same key. Always with ``through_joins`` True; with
  "auto" (the session's default) only when the build is estimated to hold a small share of
  the scan column's distinct keys (``_selective``): on TPC-H Q9 the filters from builds
  holding every key cost more than they saved.

A top-k's threshold never goes below an aggregate: it may read units in another order,
which a streaming (sorted) aggregate relies on.

A top-k whose input is not already sorted on its first key also has its scan read the units
most likely to hold the top rows first (``DataSourceExec.read_first_by``), so the threshold
tightens at once and the filter prunes the other units by their statistics.
"""

from __future__ import annotations

from plansight.engine.logical.expr import Column, Expr
from plansight.engine.physical.aggregates.aggregate import AggregateExec
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
# the sides of a join whose every output row is one of their rows, unchanged
_PRESERVED_LEFT = ("inner", "left", "left_semi", "left_anti")
_PRESERVED_RIGHT = ("inner", "right", "right_semi", "right_anti")
#: with ``through_joins`` "auto", a join key filter goes through other joins when the build is
#: estimated to hold at most this share of the probe column's distinct keys
SELECTIVE_SHARE = 0.25


def push_dynamic_filters(plan: ExecutionPlan, max_keys: int = 1024,
                         max_bitmap_bits: int = 0, through_joins: bool | str = False
                         ) -> ExecutionPlan:
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
                found = find_scan_column(node.right, probe_key, through_aggregates=True,
                                         through_joins=through_joins is True)
                if found is None and through_joins == "auto":
                    found = find_scan_column(node.right, probe_key, through_aggregates=True,
                                             through_joins=True)
                    if found is not None and not _selective(node.left, *found):
                        found = None
                if found is None:
                    continue
                dynamic_filter = DynamicFilter(f"HashJoin[{node.operator_id}]",
                                               keep_nulls=node.null_equal, max_keys=max_keys,
                                               max_bitmap_bits=max_bitmap_bits)
                found[0].dynamic_filters.append((found[1], dynamic_filter))
                filters.append((build_key, dynamic_filter))
            node.dynamic_filters = filters
    return plan


def find_scan_column(plan: ExecutionPlan, column: Expr, through_aggregates: bool = False,
                     through_joins: bool = False):
    """(scan, source column name) that produces ``column`` unchanged, or None.

    ``through_aggregates``: also below aggregates grouped by ``column``; ``through_joins``:
    into the preserved side of joins (a join key filter may drop every row of a key; a
    threshold may not).
    """
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
        if through_aggregates and isinstance(plan, AggregateExec) and \
                any(k.id == column.id for k in plan.keys):
            plan = plan.input
            continue
        if through_joins and isinstance(plan, HashJoinExec):
            side = _preserved_side_of(plan, column)
            if side is None:
                return None
            plan = side
            continue
        return None


def _selective(build: ExecutionPlan, scan: DataSourceExec, column: str) -> bool:
    """Whether a build side is estimated to hold at most ``SELECTIVE_SHARE`` of the distinct
    keys of the scan column its filter would reach through other joins: then the filter
    drops most of that scan's rows before they are joined at all (TPC-H Q7's 800 suppliers
    of France and Germany filter lineitem below its join with orders). A build holding
    about every key (Q9's) would cost a test per row and drop nothing: not pushed."""
    while build.row_estimate is None and len(build.children()) == 1:
        build = build.children()[0]
    statistics = scan.source.column_statistics(column)
    if build.row_estimate is None or statistics is None or not statistics.distinct_count:
        return False
    return build.row_estimate <= SELECTIVE_SHARE * statistics.distinct_count


def _preserved_side_of(join: HashJoinExec, column: Column) -> ExecutionPlan | None:
    """The child of ``join`` that produces ``column``, when each output row is one of its
    rows (None for the NULL-padded side of an outer join)."""
    if column.field_name in join.left.schema.names and join.join_type in _PRESERVED_LEFT:
        return join.left
    if column.field_name in join.right.schema.names and join.join_type in _PRESERVED_RIGHT:
        return join.right
    return None


def _keeps_order_on_path(plan: ExecutionPlan) -> bool:
    """Whether an operator between ``plan`` and its scan (a chain ``find_scan_column``
    accepted) relies on the scan's row order: an order-preserving repartition."""
    while not isinstance(plan, DataSourceExec):
        if isinstance(plan, RepartitionExec) and plan.preserve_order:
            return True
        plan = plan.children()[0]
    return False


