"""UnionExec: the partitions of all children side by side (UNION ALL)."""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.physical.plan import ExecutionPlan, Partitioning


class UnionExec(ExecutionPlan):
    name = "UnionExec"

    def __init__(self, inputs: list[ExecutionPlan], schema: pa.Schema):
        super().__init__(schema)
        self.inputs = list(inputs)
        self._offsets = []
        total = 0
        for child in self.inputs:
            self._offsets.append(total)
            total += child.output_partitioning().count
        self._count = total

    def children(self):
        return list(self.inputs)

    def with_new_children(self, children):
        return UnionExec(children, self.schema)

    def output_partitioning(self):
        return Partitioning(self._count)

    def output_ordering(self):
        return None

    def _execute(self, partition, ctx):
        for child, offset in reversed(list(zip(self.inputs, self._offsets))):
            if partition >= offset:
                for batch in child.execute(partition - offset, ctx):
                    # children name their columns differently; the union renames positionally
                    yield pa.RecordBatch.from_arrays(
                        [c.cast(f.type) if c.type != f.type else c
                         for c, f in zip(batch.columns, self.schema)], schema=self.schema)
                return
