"""AggregateExec: hash aggregation (GROUP BY) over pre-projected key and argument columns.

The planner projects every group key and aggregate argument into a plain column first, so
this operator only groups columns; the grouping itself runs in Arrow's C++ hash aggregation.
"""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.functions.aggregate import AggregateSpec, aggregate_table
from plansight.engine.logical.expr import Column
from plansight.engine.physical.plan import (
    SINGLE_PARTITION,
    ExecutionPlan,
    Partitioning,
    hash_distribution,
)


class AggregateExec(ExecutionPlan):
    name = "AggregateExec"

    def __init__(self, input: ExecutionPlan, keys: list[Column], specs: list[AggregateSpec],
                 schema: pa.Schema, mode: str = "Single"):
        super().__init__(schema)
        self.input, self.keys, self.specs, self.mode = input, list(keys), list(specs), mode

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return AggregateExec(children[0], self.keys, self.specs, self.schema, self.mode)

    def required_input_distribution(self):
        if not self.keys:
            return [SINGLE_PARTITION]
        return [hash_distribution(self.keys)]

    def output_partitioning(self):
        part = self.input.output_partitioning()
        return Partitioning(part.count, tuple(self.keys) if part.count > 1 else None)

    def display(self) -> str:
        keys = ", ".join(k.name for k in self.keys)
        aggs = ", ".join(
            f"{s.func}({'DISTINCT ' if s.distinct else ''}{s.column.split('#')[0] if s.column else '*'})"
            for s in self.specs)
        return f"AggregateExec: mode={self.mode}, gby=[{keys}], aggr=[{aggs}]"

    def _execute(self, partition, ctx):
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]")
        try:
            batches = []
            for batch in self.input.execute(partition, ctx):
                reservation.grow(batch.nbytes)
                batches.append(batch)
            if not batches and self.keys:
                return
            table = pa.Table.from_batches(batches, schema=self.input.schema)
            result = aggregate_table(table, [k.field_name for k in self.keys], self.specs)
            result = pa.Table.from_arrays(result.columns, schema=self.schema)
            yield from result.to_batches(max_chunksize=ctx.batch_size)
        finally:
            reservation.free()
