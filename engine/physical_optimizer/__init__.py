"""Physical rules, applied in order by ``optimize_physical``."""

from __future__ import annotations

from plansight.engine.exec.context import SessionConfig
from plansight.engine.physical.plan import ExecutionPlan, fill_row_estimates
from plansight.engine.physical_optimizer.ensure_requirements import (
    ensure_requirements,
    ensure_single_output,
)
from plansight.engine.physical_optimizer.keep_source_order import keep_source_order
from plansight.engine.physical_optimizer.prefilter_scans import prefilter_scans
from plansight.engine.physical_optimizer.prune_by_limit import prune_by_limit
from plansight.engine.physical_optimizer.push_dynamic_filters import push_dynamic_filters
from plansight.engine.physical_optimizer.widen_scan_batches import widen_scan_batches


def optimize_physical(plan: ExecutionPlan, config: SessionConfig) -> ExecutionPlan:
    # first: it may shrink a scan's partition count, which the requirements then see
    plan = prune_by_limit(plan)
    plan = ensure_requirements(plan, config.target_partitions)
    plan = ensure_single_output(plan)
    # after the merges exist: the ones whose order reaches the result read partitions in order
    plan = keep_source_order(plan)
    plan = widen_scan_batches(plan, config)
    plan = prefilter_scans(plan)
    # last: it wires operators of the final tree together
    plan = push_dynamic_filters(plan, config.dynamic_filter_max_keys,
                                config.dynamic_filter_max_bitmap_bits,
                                config.dynamic_filter_through_joins)
    # the operators the rules inserted show their inputs' estimates
    return fill_row_estimates(plan)
