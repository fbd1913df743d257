"""CoalescePartitionsExec: merges all input partitions into one.

Unordered (the default), batches come out as the partitions produce them. With
``preserve_order`` all of partition 0 comes first, then partition 1, ...: over a scan's
contiguous source ranges the rows keep the source's order (set by ``keep_source_order``
where the query's result order depends on it). Partitions still run concurrently; the ones
ahead buffer batches under the memory pool (scheduler.merge_streams_in_order).
"""

from __future__ import annotations

from plansight.engine.exec.scheduler import merge_streams_in_order, run_partitions
from plansight.engine.physical.plan import ExecutionPlan, Partitioning


class CoalescePartitionsExec(ExecutionPlan):
    name = "CoalescePartitionsExec"

    def __init__(self, input: ExecutionPlan, preserve_order: bool = False):
        super().__init__(input.schema)
        self.input = input
        self.preserve_order = preserve_order

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return CoalescePartitionsExec(children[0], self.preserve_order)

    def output_partitioning(self):
        return Partitioning(1)

    def output_ordering(self):
        return self.input.output_ordering() if \
            self.input.output_partitioning().count == 1 else None

    def maintains_input_order(self):
        return [self.preserve_order or self.input.output_partitioning().count == 1]

    def display(self) -> str:
        return f"{self.name}: preserve_order=true" if self.preserve_order else self.name

    def _execute(self, partition, ctx):
        if not self.preserve_order:
            yield from run_partitions(self.input, ctx)
            return
        count = self.input.output_partitioning().count
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]")
        yield from merge_streams_in_order(
            [lambda p=p: self.input.execute(p, ctx) for p in range(count)], ctx, reservation)
