"""NestedLoopJoinExec: joins on an arbitrary predicate (or none: CROSS JOIN).

Every probe batch is paired with the whole build side in chunks of bounded size (vectorized
cross product with np.repeat / np.tile), then the shared JoinAssembler filters and emits.
"""

from __future__ import annotations

import numpy as np

from plansight.engine.logical.expr import Expr
from plansight.engine.physical.joins.build import SharedBuild
from plansight.engine.physical.joins.output import JoinAssembler, join_schema
from plansight.engine.physical.plan import (
    SINGLE_PARTITION,
    UNSPECIFIED,
    ExecutionPlan,
    Partitioning,
)


class NestedLoopJoinExec(ExecutionPlan):
    name = "NestedLoopJoinExec"

    def __init__(self, left: ExecutionPlan, right: ExecutionPlan, join_type: str,
                 filter: Expr | None = None):
        super().__init__(join_schema(left.schema, right.schema, join_type))
        self.left, self.right, self.join_type, self.filter = left, right, join_type, filter
        self.shared_build = SharedBuild(left, f"{self.name}[build]")

    def children(self):
        return [self.left, self.right]

    def with_new_children(self, children):
        return NestedLoopJoinExec(children[0], children[1], self.join_type, self.filter)

    def required_input_distribution(self):
        needs_all_probe = self.join_type in ("left", "full", "left_semi", "left_anti")
        return [SINGLE_PARTITION, SINGLE_PARTITION if needs_all_probe else UNSPECIFIED]

    def output_partitioning(self):
        return Partitioning(self.right.output_partitioning().count)

    def display(self) -> str:
        flt = f", filter={self.filter}" if self.filter is not None else ""
        return f"NestedLoopJoinExec: join_type={self.join_type}{flt}"

    def _execute(self, partition, ctx):
        try:
            build, _ = self.shared_build.acquire(ctx)
            assembler = JoinAssembler(build, self.join_type, self.schema, self.filter)
            n_build = build.num_rows
            for batch in self.right.execute(partition, ctx):
                if n_build == 0:
                    yield from assembler.probe(batch, np.empty(0, np.int64),
                                               np.empty(0, np.int64))
                    continue
                # probe rows per chunk so that a chunk has about batch_size * 4 pairs
                step = max(1, (ctx.batch_size * 4) // n_build)
                for lo in range(0, batch.num_rows, step):
                    probe = batch.slice(lo, step)
                    probe_idx = np.repeat(np.arange(probe.num_rows), n_build)
                    build_idx = np.tile(np.arange(n_build), probe.num_rows)
                    yield from assembler.probe(probe, probe_idx, build_idx)
            yield from assembler.finish(self.right.schema, ctx.batch_size)
        finally:
            self.shared_build.release(ctx, self.output_partitioning().count)
