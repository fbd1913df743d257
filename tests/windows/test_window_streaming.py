"""WindowAggExec emits each partition as soon as the next one starts."""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.logical.expr import Column, SortKey, WindowCall
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.windows.window_agg import WindowAggExec

P = Column(1, "p", pa.int64())
V = Column(2, "v", pa.int64())
OUT = Column(3, "s", pa.int64())


class RecordingSource(ExecutionPlan):
    """Yields one batch per partition key, counting how many batches were pulled."""

    name = "RecordingSource"

    def __init__(self, partitions: int, rows_per_partition: int):
        super().__init__(pa.schema([(P.field_name, pa.int64()), (V.field_name, pa.int64())]))
        self.partitions, self.rows = partitions, rows_per_partition
        self.pulled = 0

    def output_ordering(self):
        return (SortKey(P),)

    def _execute(self, partition, ctx):
        for k in range(self.partitions):
            self.pulled += 1
            yield pa.RecordBatch.from_arrays(
                [pa.array([k] * self.rows), pa.array(range(self.rows))], schema=self.schema)


def test_partition_k_is_emitted_before_reading_past_partition_k_plus_1():
    source = RecordingSource(partitions=50, rows_per_partition=10)
    window = WindowCall("sum", (V,), pa.int64(), partition_by=(P,))
    op = WindowAggExec([window], [OUT], source)
    pool = MemoryPool(None)
    ctx = TaskContext(SessionConfig(), pool)
    seen = []
    for batch in op.execute(0, ctx):
        keys = set(batch.column(0).to_pylist())
        # every emitted partition k was complete after reading batch k + 1 at most
        assert source.pulled <= max(keys) + 2
        assert batch.column(2).to_pylist() == [45] * batch.num_rows
        seen.extend(keys)
    assert sorted(set(seen)) == list(range(50))
    assert pool.reserved == 0


def test_memory_is_bounded_by_the_open_partition():
    source = RecordingSource(partitions=200, rows_per_partition=100)
    window = WindowCall("count_star", (), pa.int64(), partition_by=(P,))
    op = WindowAggExec([window], [OUT], source)
    pool = MemoryPool(None)
    ctx = TaskContext(SessionConfig(), pool)
    rows = sum(b.num_rows for b in op.execute(0, ctx))
    assert rows == 20_000
    one_batch = 100 * 16
    assert pool.peak <= 3 * one_batch  # never the whole input (320 KB)
