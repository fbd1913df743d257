"""Scans whose rows are collected, not streamed out, read ``AGGREGATE_BATCH_FACTOR`` times
larger batches.

Every batch costs each operator on its way a Python round trip that holds the GIL (~35 us
per 8K-row batch in all, bench/results/profile_cpu.md). Two operators gather their input
before they use it, so batch boundaries below them do not matter:

    AggregateExec (hash)          gathers ~1M-row tables before grouping
    HashJoinExec build side       collects every row before the first probe
    left semi / anti probe side   only marks build rows: it emits them after the last probe
    SharedExec                    keeps a partition's batches before its readers replay them

The scan under such a collector, and the streaming operators in between (projections,
filters, the probe side of a hash join, repartitions, partition coalescing), see fewer,
larger batches; with two partitions, less of the CPU is Python that the threads take turns
on. A scan under a selective filter gains most: TPC-H Q21's lineitem scans keep 4% of
their rows, so 8K-row batches reached the joins above as ~300-row batches. TPC-H Q22's
NOT EXISTS probes the customers with all 1.5M orders: 183 batches of 8K rows, each a
dynamic filter pass, a probe and their Python round trips, where 23 do. Scans streaming
to the result, a sort, a window or a limit keep ``batch_size``.

The factor is 16 (131,072 rows at the default ``batch_size``): a Parquet row group as
commonly written (tpchgen's ~114K rows, DuckDB's 122,880) is then read as one batch, where a
factor of 8 cut each into a 64K batch and a ~48K remainder, twice the Python per row group.
On lineitem that took CPU time at one partition from 0.446 to 0.413 s for TPC-H Q1, 0.152
to 0.137 s for Q6, 0.162 to 0.139 s for Q12 and 0.253 to 0.236 s for Q3.

A factor rather than a fixed size keeps ``batch_size`` meaningful: at 1, 3 or 7 (the tests'
batch boundaries) the collectors still receive many small batches.
"""

from __future__ import annotations

from plansight.engine.exec.context import SessionConfig
from plansight.engine.physical.aggregates.aggregate import AggregateExec
from plansight.engine.physical.coalesce_partitions import CoalescePartitionsExec
from plansight.engine.physical.filter import FilterExec
from plansight.engine.physical.joins.hash_join import HashJoinExec
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.projection import ProjectionExec
from plansight.engine.physical.repartition import RepartitionExec
from plansight.engine.physical.scan import DataSourceExec
from plansight.engine.physical.shared import SharedExec

AGGREGATE_BATCH_FACTOR = 16


def widen_scan_batches(plan: ExecutionPlan, config: SessionConfig) -> ExecutionPlan:
    """Set ``batch_rows`` on the scans whose rows stream into a hash aggregate, a hash
    join's build side, the probe side of a left semi or anti hash join or a SharedExec (in
    place: the scans are this plan's own)."""
    rows = config.batch_size * AGGREGATE_BATCH_FACTOR
    for _, node in plan.walk():
        if isinstance(node, AggregateExec) and not node.sorted_prefix or \
                isinstance(node, SharedExec):
            collected = [node.input]
        elif isinstance(node, HashJoinExec):
            collected = [node.left]
            if node.join_type in ("left_semi", "left_anti"):
                collected.append(node.right)  # no probe row reaches the output
        else:
            continue
        for child in collected:
            scan = _feeding_scan(child)
            if scan is not None and scan.fetch is None:
                scan.batch_rows = max(rows, scan.batch_rows or 0)
    return plan


def _feeding_scan(plan: ExecutionPlan) -> DataSourceExec | None:
    """The scan whose rows reach ``plan``'s output batch by batch, through operators that
    work row by row or only move rows between partitions."""
    while True:
        if isinstance(plan, DataSourceExec):
            return plan
        if isinstance(plan, (ProjectionExec, FilterExec, RepartitionExec,
                             CoalescePartitionsExec)):
            plan = plan.input
        elif isinstance(plan, HashJoinExec):
            plan = plan.right  # the probe side streams; the build side is collected anyway
        else:
            return None
