"""SourcePositionExec: numbers the rows in the order they arrive (0, 1, 2, ...).

The sorted window executors sort their input, and a sort leaves the order of tied rows to
how the rows reached it (which partition, which batch first). A window that sees that order
(``row_number() OVER (PARTITION BY g)``, lag, a ROWS frame over ties) would then answer
differently at 1 and 2 partitions. Numbered here, on a single stream merged in source order
(keep_source_order marks the merge below, as it does for the hash executor), the position
is a last sort key that puts tied rows back in the source's order wherever they travel
(hash shuffles included); a projection drops it after the windows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plansight.engine.logical.expr import Column
from plansight.engine.physical.plan import SINGLE_PARTITION, ExecutionPlan


class SourcePositionExec(ExecutionPlan):
    """Its input's rows with ``column`` (int64, never NULL) appended: the row's position in
    the single input stream."""

    name = "SourcePositionExec"

    def __init__(self, input: ExecutionPlan, column: Column):
        super().__init__(input.schema.append(pa.field(column.field_name, pa.int64(), False)))
        self.input, self.column = input, column

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return SourcePositionExec(children[0], self.column)

    def required_input_distribution(self):
        return [SINGLE_PARTITION]

    def maintains_input_order(self):
        return [True]

    def display(self) -> str:
        return f"{self.name}: column={self.column.name}"

    def _execute(self, partition, ctx):
        start = 0
        for batch in self.input.execute(partition, ctx):
            end = start + batch.num_rows
            positions = pa.array(np.arange(start, end, dtype=np.int64))
            yield pa.RecordBatch.from_arrays(list(batch.columns) + [positions],
                                             schema=self.schema)
            start = end
