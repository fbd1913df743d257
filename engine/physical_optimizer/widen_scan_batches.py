"""Scans that feed a hash aggregate read batches ``AGGREGATE_BATCH_FACTOR`` times larger.

Every batch costs each operator on its way a Python round trip that holds the GIL (~35 us
per 8K-row batch in all, bench/results/profile_cpu.md), while a hash aggregate only gathers
its input into ~1M-row tables before grouping: batch boundaries do not matter to it. So the
scan under it, and the streaming operators in between (projections, filters, the probe side
of a hash join), see fewer, larger batches; with two partitions, less of the CPU is Python
that the threads have to take turns on. Operators elsewhere keep ``batch_size``.

A factor rather than a fixed size keeps ``batch_size`` meaningful: at 1, 3 or 7 (the tests'
batch boundaries) the aggregate still receives many small batches.
"""

from __future__ import annotations

from plansight.engine.exec.context import SessionConfig
from plansight.engine.physical.aggregates.aggregate import AggregateExec
from plansight.engine.physical.filter import FilterExec
from plansight.engine.physical.joins.hash_join import HashJoinExec
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.projection import ProjectionExec
from plansight.engine.physical.scan import DataSourceExec

AGGREGATE_BATCH_FACTOR = 8


def widen_scan_batches(plan: ExecutionPlan, config: SessionConfig) -> ExecutionPlan:
    """Set ``batch_rows`` on the scans whose rows stream into a hash aggregate (in place:
    the scans are this plan's own)."""
    rows = config.batch_size * AGGREGATE_BATCH_FACTOR
    for _, node in plan.walk():
        if isinstance(node, AggregateExec) and not node.sorted_prefix:
            scan = _feeding_scan(node.input)
            if scan is not None:
                scan.batch_rows = max(rows, scan.batch_rows or 0)
    return plan


def _feeding_scan(plan: ExecutionPlan) -> DataSourceExec | None:
    """The scan whose batches reach ``plan``'s output one for one (row-wise operators only)."""
    while True:
        if isinstance(plan, DataSourceExec):
            return plan
        if isinstance(plan, (ProjectionExec, FilterExec)):
            plan = plan.input
        elif isinstance(plan, HashJoinExec):
            plan = plan.right  # the probe side streams; the build side is collected anyway
        else:
            return None


