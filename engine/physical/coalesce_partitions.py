"""CoalescePartitionsExec: merges all input partitions into one (order not kept)."""

from __future__ import annotations

from plansight.engine.exec.scheduler import run_partitions
from plansight.engine.physical.plan import ExecutionPlan, Partitioning


class CoalescePartitionsExec(ExecutionPlan):
    name = "CoalescePartitionsExec"

    def __init__(self, input: ExecutionPlan):
        super().__init__(input.schema)
        self.input = input

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return CoalescePartitionsExec(children[0])

    def output_partitioning(self):
        return Partitioning(1)

    def output_ordering(self):
        return self.input.output_ordering() if \
            self.input.output_partitioning().count == 1 else None

    def _execute(self, partition, ctx):
        yield from run_partitions(self.input, ctx)
