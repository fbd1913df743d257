"""WindowAggExec: window functions over input sorted by (partition keys, order keys).

Partition-at-a-time, vectorized across partitions (DESIGN principle 3):

    batches ──▶ buffer ──▶ [ complete partitions | open partition ]
                              │                     └─ carried to the next batch
                              └─ one evaluate_window pass for all of them ──▶ emitted

A partition is complete as soon as a row of the next partition arrives, so it is emitted
before the operator reads past the following batch; memory is bounded by the largest
partition plus a batch, never the whole input. A partition larger than the memory pool allows
is streamed or folded over a spill file instead (``window_spill``), or fails with
ResourcesExhausted when a window needs all of it at once.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plansight.engine.errors import PlanError
from plansight.engine.functions.window import evaluate_window
from plansight.engine.logical.expr import Column, SortKey, WindowCall
from plansight.engine.physical.expressions import evaluate, evaluate_predicate
from plansight.engine.physical.plan import (
    SINGLE_PARTITION,
    ExecutionPlan,
    hash_distribution,
)
from plansight.engine.physical.windows.spill import (
    OpenRows,
    evaluate_oversized,
    oversized_partition_error,
)
from plansight.engine.physical.windows.window_shape import (
    describe_window,
    is_whole_partition,
    partition_starts,
    sees_tie_order,
    window_direction,
)


class WindowAggExec(ExecutionPlan):
    """Partition-at-a-time windows over input sorted by (partition keys, ``order_keys``).

    ``order_keys`` (default: the first window's ORDER BY) is the order the operator requires
    within each partition; every window's ORDER BY must be a prefix of it or of its reverse.
    A reversed window is evaluated on the partition's rows read backwards (a permutation of
    the argument columns only), so one sort serves ``ORDER BY x`` and ``ORDER BY x DESC``.
    ``partition_ordering`` (default: the partition keys ascending) lets an input sorted by
    a permutation of the partition keys, in any direction, serve without a new sort.
    """

    name = "WindowAggExec"

    def __init__(self, windows: list[WindowCall], outputs: list[Column], input: ExecutionPlan,
                 order_keys=None, partition_ordering=None):
        fields = list(input.schema) + [pa.field(o.field_name, o.type) for o in outputs]
        super().__init__(pa.schema(fields))
        self.windows, self.outputs, self.input = list(windows), list(outputs), input
        self.partition_by = list(windows[0].partition_by)
        self.order_by = list(windows[0].order_by if order_keys is None else order_keys)
        self.partition_ordering = [SortKey(e) for e in self.partition_by] \
            if partition_ordering is None else list(partition_ordering)
        if {k.expr for k in self.partition_ordering} != set(self.partition_by) or \
                len(self.partition_ordering) != len(self.partition_by):
            raise PlanError("WindowAggExec: partition ordering must sort by the partition keys")
        self.directions = []
        for window in self.windows:
            if set(window.partition_by) != set(self.partition_by):
                raise PlanError("WindowAggExec: all windows must have the same PARTITION BY")
            direction = window_direction(window, self.order_by)
            if direction is None:
                raise PlanError(f"WindowAggExec: ORDER BY of {window} is not served by the "
                                f"input order [{', '.join(map(str, self.order_by))}]")
            self.directions.append(direction)
        self.whole_partition = [is_whole_partition(w) for w in self.windows]

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return WindowAggExec(self.windows, self.outputs, children[0], self.order_by,
                             self.partition_ordering)

    def required_input_distribution(self):
        if not self.partition_by:
            return [SINGLE_PARTITION]
        return [hash_distribution(self.partition_by)]

    def required_input_ordering(self):
        keys = self.partition_ordering + self.order_by
        return [tuple(keys) or None]

    def maintains_input_order(self):
        return [True]

    def display(self) -> str:
        windows = ", ".join(describe_window(w) + _DIRECTION_NOTE[d]
                            for w, d in zip(self.windows, self.directions))
        return f"WindowAggExec: mode=partition-at-a-time, wdw=[{windows}]"

    def _execute(self, partition, ctx):
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]", metrics=metrics)
        siblings = self.input.output_partitioning().count
        floor = reservation.reserve_floor(siblings)
        carried: list[pa.RecordBatch] = []
        held = 0  # bytes of carried
        pending: list[pa.RecordBatch] = []  # rows read past an oversized partition
        stream = self.input.execute(partition, ctx)
        try:
            while True:
                batch = pending.pop() if pending else next(stream, None)
                if batch is None:
                    break
                if batch.num_rows == 0:
                    continue
                if reservation.try_resize(max(floor, held + batch.nbytes)):
                    carried.append(batch)
                    held += batch.nbytes
                    if not self.partition_by:
                        continue  # one partition: complete only at the end
                    table = pa.Table.from_batches(carried).combine_chunks()
                    starts = self._starts(table)
                    last = int(starts[-2])  # the open partition starts here
                    if last == 0:
                        continue
                    yield from self._evaluate(table.slice(0, last), starts[:-1])
                    rest = table.slice(last)
                    carried, held = rest.to_batches(), rest.nbytes
                    reservation.resize(max(floor, held))
                    continue
                # the pool said no: emit the complete partitions, then see whether the open
                # one fits on its own; if not, it streams or spills (window_spill)
                table = pa.Table.from_batches(carried + [batch]).combine_chunks()
                carried, held = [], 0
                if self.partition_by:
                    starts = self._starts(table)
                    last = int(starts[-2])
                    if last:
                        yield from self._evaluate(table.slice(0, last), starts[:-1])
                        table = table.slice(last)
                if reservation.try_resize(max(floor, table.nbytes)):
                    carried, held = table.to_batches(), table.nbytes
                    continue
                error = oversized_partition_error(self, reservation, table.nbytes, ctx)
                if error is not None:
                    raise error
                reservation.resize(0)  # the streaming executor takes over the memory
                rows = OpenRows(table, stream, self.partition_by, ctx.batch_size)
                yield from evaluate_oversized(self, rows, partition, ctx, metrics)
                floor = reservation.reserve_floor(siblings)
                if rows.leftover is not None:
                    pending.append(rows.leftover)
            if carried:
                table = pa.Table.from_batches(carried).combine_chunks()
                yield from self._evaluate(table, self._starts(table))
        finally:
            stream.close()
            reservation.free()

    def _starts(self, table: pa.Table) -> np.ndarray:
        keys = [evaluate(e, table) for e in self.partition_by]
        return partition_starts(keys, table.num_rows)

    def _evaluate(self, table: pa.Table, starts: np.ndarray):
        """Window columns for complete partitions ``table`` (``starts`` ends at num_rows)."""
        if starts[-1] != table.num_rows:
            starts = np.append(starts, table.num_rows)
        readers: dict = {"forward": None}  # direction -> (rows to read, their inverse)
        columns = list(table.columns)
        for window, output, direction in zip(self.windows, self.outputs, self.directions):
            # a window that sees tie order reads its ties forwards (in source order) even
            # when it reads the partition backwards
            key = (direction, tuple(window.order_by)) if direction != "forward" and \
                sees_tie_order(window) else direction
            if key not in readers:
                runs = starts
                if direction == "backwards-nulls":
                    runs = _split_at_null_boundaries(
                        starts, evaluate(window.order_by[0].expr, table))
                if key == direction:
                    rows = pa.array(_reversed_rows(runs))
                    readers[key] = (rows, rows)
                else:
                    peers = partition_starts([evaluate(k.expr, table) for k in window.order_by],
                                             table.num_rows)
                    readers[key] = _reversed_peer_groups(runs, peers)
            values = _evaluate_window(window, table, starts, readers[key])
            if values.type != output.type:
                values = values.cast(output.type)
            columns.append(values)
        result = pa.Table.from_arrays([c.combine_chunks() if isinstance(c, pa.ChunkedArray)
                                       else c for c in columns], schema=self.schema)
        yield from result.to_batches(max_chunksize=None)


_DIRECTION_NOTE = {"forward": "", "backwards": " (backwards)",
                   "backwards-nulls": " (backwards, NULLs stay in place)"}


def _split_at_null_boundaries(starts: np.ndarray, key: pa.Array | pa.ChunkedArray
                              ) -> np.ndarray:
    """``starts`` plus every row where ``key`` turns from NULL to non-NULL or back: each
    partition's NULL run and non-NULL run of its first order key become separate runs."""
    if key.null_count == 0:
        return starts
    nulls = np.asarray(key.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    boundaries = np.flatnonzero(nulls[1:] != nulls[:-1]) + 1
    return np.union1d(starts, boundaries).astype(np.int64)


def _reversed_rows(starts: np.ndarray) -> np.ndarray:
    """Row index that reads every partition ``[starts[k], starts[k+1])`` backwards."""
    sizes = np.diff(starts)
    first = np.repeat(starts[:-1], sizes)
    last = np.repeat(starts[1:] - 1, sizes)
    return first + last - np.arange(int(starts[-1]), dtype=np.int64)


def _reversed_peer_groups(runs: np.ndarray, peers: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """(rows, inverse): every run ``[runs[k], runs[k+1])`` read with its groups of equal keys
    (starting at ``peers``) in reverse order and the rows of each group in their order.

    Example:
        >>> rows, _ = _reversed_peer_groups(np.array([0, 5]), np.array([0, 2, 3, 5]))
        >>> rows.to_pylist()
        [3, 4, 2, 0, 1]
    """
    n = int(runs[-1])
    bounds = np.union1d(runs, peers).astype(np.int64)  # a group never spans two runs
    group = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    run = np.repeat(np.arange(len(runs) - 1), np.diff(runs))
    row = np.arange(n, dtype=np.int64)
    # a row's new place: its run's start + the rows of later groups + its place in its group
    destination = runs[:-1][run] + (runs[1:][run] - bounds[1:][group]) + (row - bounds[group])
    rows = np.empty(n, dtype=np.int64)
    rows[destination] = row
    return pa.array(rows), pa.array(destination)


def _evaluate_window(window: WindowCall, table: pa.Table | pa.RecordBatch, starts: np.ndarray,
                     reader: tuple[pa.Array, pa.Array] | None = None) -> pa.Array:
    """One window column of sorted ``table``; with ``reader`` (rows, inverse), e.g. reversed
    partitions, the window is evaluated on the rows in that order and mapped back."""
    rows, inverse = reader if reader is not None else (None, None)

    def column(expr):
        values = evaluate(expr, table)
        return values if rows is None else values.take(rows)

    args = [column(a) for a in window.args]
    mask = None
    if window.filter is not None:
        mask = evaluate_predicate(window.filter, table)
        if rows is not None:
            mask = mask.take(rows)
    values = evaluate_window(window.func, args, partition_starts=starts,
                             order_keys=[column(k.expr) for k in window.order_by],
                             descending=[k.descending for k in window.order_by],
                             nulls_first=[k.nulls_first for k in window.order_by],
                             frame=window.frame, distinct=window.distinct,
                             ignore_nulls=window.ignore_nulls, filter_mask=mask)
    return values if rows is None else values.take(inverse)
