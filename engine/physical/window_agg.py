"""WindowAggExec: window functions over input sorted by (partition keys, order keys).

Partition-at-a-time, vectorized across partitions (DESIGN principle 3):

    batches ──▶ buffer ──▶ [ complete partitions | open partition ]
                              │                     └─ carried to the next batch
                              └─ one evaluate_window pass for all of them ──▶ emitted

A partition is complete as soon as a row of the next partition arrives, so it is emitted
before the operator reads past the following batch; memory is bounded by the largest
partition plus a batch, never the whole input (unless one partition is the whole input).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.functions.window import evaluate_window
from plansight.engine.logical.expr import Column, SortKey, WindowCall
from plansight.engine.physical.expressions import evaluate, evaluate_predicate
from plansight.engine.physical.plan import (
    SINGLE_PARTITION,
    ExecutionPlan,
    hash_distribution,
)


def partition_starts(keys: list[pa.Array], num_rows: int) -> np.ndarray:
    """Start row of every run of equal ``keys`` (NULLs equal each other), plus ``num_rows``.

    Example:
        >>> partition_starts([pa.array(["a", "a", None, None, "b"])], 5).tolist()
        [0, 2, 4, 5]
    """
    if num_rows == 0:
        return np.array([0], dtype=np.int64)
    changed = np.zeros(num_rows, dtype=bool)
    changed[0] = True
    for key in keys:
        if num_rows < 2:
            break
        previous, current = key.slice(0, num_rows - 1), key.slice(1)
        differs = pc.not_equal(current, previous)
        if key.null_count:
            # NULL vs value differs; NULL vs NULL does not
            null_change = pc.xor(current.is_null(), previous.is_null())
            differs = pc.or_(pc.fill_null(differs, False), null_change)
        changed[1:] |= np.asarray(differs.to_numpy(zero_copy_only=False), dtype=bool)
    return np.append(np.flatnonzero(changed), num_rows).astype(np.int64)


def describe_window(window: WindowCall) -> str:
    frame = window.frame
    if frame is None:
        text = "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW" if window.order_by else \
            "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
    else:
        text = str(frame)
    args = ", ".join(map(str, window.args))
    return f"{window.func}({args}) {text}"


class WindowAggExec(ExecutionPlan):
    name = "WindowAggExec"

    def __init__(self, windows: list[WindowCall], outputs: list[Column], input: ExecutionPlan):
        fields = list(input.schema) + [pa.field(o.field_name, o.type) for o in outputs]
        super().__init__(pa.schema(fields))
        self.windows, self.outputs, self.input = list(windows), list(outputs), input
        self.partition_by = list(windows[0].partition_by)
        self.order_by = list(windows[0].order_by)

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return WindowAggExec(self.windows, self.outputs, children[0])

    def required_input_distribution(self):
        if not self.partition_by:
            return [SINGLE_PARTITION]
        return [hash_distribution(self.partition_by)]

    def required_input_ordering(self):
        keys = [SortKey(e) for e in self.partition_by] + self.order_by
        return [tuple(keys) or None]

    def maintains_input_order(self):
        return [True]

    def display(self) -> str:
        windows = ", ".join(describe_window(w) for w in self.windows)
        return f"WindowAggExec: mode=partition-at-a-time, wdw=[{windows}]"

    def _execute(self, partition, ctx):
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]")
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        carried: list[pa.RecordBatch] = []
        try:
            for batch in self.input.execute(partition, ctx):
                if batch.num_rows == 0:
                    continue
                reservation.grow(batch.nbytes)
                carried.append(batch)
                if not self.partition_by:
                    continue  # one partition: complete only at the end
                table = pa.Table.from_batches(carried).combine_chunks()
                starts = self._starts(table)
                last = int(starts[-2])  # the open partition starts here
                if last == 0:
                    continue
                metrics.set_max("peak_mem", reservation.size)
                yield from self._evaluate(table.slice(0, last), starts[:-1])
                rest = table.slice(last)
                carried = rest.to_batches()
                reservation.resize(rest.nbytes)
            if carried:
                metrics.set_max("peak_mem", reservation.size)
                table = pa.Table.from_batches(carried).combine_chunks()
                yield from self._evaluate(table, self._starts(table))
        finally:
            reservation.free()

    def _starts(self, table: pa.Table) -> np.ndarray:
        keys = [evaluate(e, table) for e in self.partition_by]
        return partition_starts(keys, table.num_rows)

    def _evaluate(self, table: pa.Table, starts: np.ndarray):
        """Window columns for complete partitions ``table`` (``starts`` ends at num_rows)."""
        if starts[-1] != table.num_rows:
            starts = np.append(starts, table.num_rows)
        order_keys = [evaluate(k.expr, table) for k in self.order_by]
        descending = [k.descending for k in self.order_by]
        nulls_first = [k.nulls_first for k in self.order_by]
        columns = list(table.columns)
        for window, output in zip(self.windows, self.outputs):
            args = [evaluate(a, table) for a in window.args]
            mask = evaluate_predicate(window.filter, table) if window.filter is not None \
                else None
            values = evaluate_window(window.func, args, partition_starts=starts,
                                     order_keys=order_keys, descending=descending,
                                     nulls_first=nulls_first, frame=window.frame,
                                     distinct=window.distinct, ignore_nulls=window.ignore_nulls,
                                     filter_mask=mask)
            if values.type != output.type:
                values = values.cast(output.type)
            columns.append(values)
        result = pa.Table.from_arrays([c.combine_chunks() if isinstance(c, pa.ChunkedArray)
                                       else c for c in columns], schema=self.schema)
        yield from result.to_batches(max_chunksize=None)
