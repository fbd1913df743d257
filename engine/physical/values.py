"""ValuesExec: rows of constants (VALUES lists and the single row of FROM-less SELECT)."""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.physical.plan import ExecutionPlan


class ValuesExec(ExecutionPlan):
    name = "ValuesExec"

    def __init__(self, table: pa.Table, placeholder: bool = True):
        super().__init__(table.schema)
        self.table = table
        # without columns: one row (FROM-less SELECT) or none (a filter folded to FALSE)
        self.placeholder = placeholder

    def with_new_children(self, children):
        return self

    def display(self) -> str:
        if not self.schema.names:
            return "PlaceholderRowExec" if self.placeholder else "EmptyExec"
        return f"ValuesExec: rows={self.table.num_rows}"

    def _execute(self, partition, ctx):
        if not self.schema.names:
            if self.placeholder:  # a batch with one row and no columns
                yield pa.RecordBatch.from_pydict({"_": [None]}).select([])
            return
        yield from self.table.to_batches(max_chunksize=ctx.batch_size)
