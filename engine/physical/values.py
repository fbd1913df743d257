"""ValuesExec: rows of constants (VALUES lists and the single row of FROM-less SELECT)."""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.physical.plan import ExecutionPlan


class ValuesExec(ExecutionPlan):
    name = "ValuesExec"

    def __init__(self, table: pa.Table):
        super().__init__(table.schema)
        self.table = table

    def with_new_children(self, children):
        return self

    def display(self) -> str:
        if not self.schema.names:
            return "PlaceholderRowExec"
        return f"ValuesExec: rows={self.table.num_rows}"

    def _execute(self, partition, ctx):
        if not self.schema.names:
            # a batch with one row and no columns
            yield pa.RecordBatch.from_pydict({"_": [None]}).select([])
            return
        yield from self.table.to_batches(max_chunksize=ctx.batch_size)
