"""A window partition larger than memory: streamed, or folded over a spill file.

WindowAggExec holds the open partition until it is complete. When the memory pool refuses to
grow that buffer, the partition is processed in bounded memory if every window allows it::

    open partition + the rest of its rows from the input
        │
        ├─ only streamable windows ─────────────────────────────▶ BoundedWindowAggExec ──▶ out
        │   (frames ending a bounded distance ahead: ROWS n PRECEDING, GROUPS and RANGE
        │    offsets, running SUM, row_number / rank / dense_rank, lag / lead, ... see
        │    ``bounded_supported``)
        │
        └─ some whole-partition aggregates ─▶ pass 1: fold each aggregate batch by batch
            (SUM, COUNT, AVG, MIN, MAX,          while writing the rows to a spill file
             BOOL_AND, BOOL_OR, BIT_*, CORR,   pass 2: read the file back, streamable windows
             COVAR_*, REGR_*; FILTER ok)       through BoundedWindowAggExec, folded values
                                                 broadcast ─────────────────────────────▶ out

Anything else needs the whole partition at once and fails with ResourcesExhausted naming the
consumer and the window: frames reaching an unbounded distance ahead that are not the whole
partition (``ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING``), EXCLUDE, DISTINCT
aggregates, stddev / variance / string_agg,
first_value / last_value / nth_value over frames ``bounded_supported`` does not stream,
ntile / percent_rank / cume_dist (they need the partition's size), lag / lead IGNORE NULLS,
and windows whose ORDER BY is read backwards. BoundedWindowAggExec itself keeps a peer group
(RANGE ... CURRENT ROW, rank) and a frame whole: one larger than memory fails there.

Both passes read one batch at a time; the fold state is one row per aggregate.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from plansight.engine.errors import ResourcesExhausted
from plansight.engine.exec.memory_pool import oversized_piece_bytes
from plansight.engine.exec.spill import spill_manager
from plansight.engine.functions.aggregate import (
    AggregateSpec,
    aggregate_table,
    finish_merged,
    merge_specs,
    partial_specs,
)
from plansight.engine.functions.capabilities import capabilities
from plansight.engine.functions.comoments import BIVARIATE
from plansight.engine.logical.expr import WindowCall
from plansight.engine.physical.expressions import evaluate, evaluate_predicate
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.windows.bounded_window_agg import (
    BoundedWindowAggExec,
    bounded_supported,
)
from plansight.engine.physical.windows.chain import chain, group_windows
from plansight.engine.physical.windows.window_shape import describe_window, partition_starts

#: Fold states kept before they are merged into one (each is a one-row table).
_STATES_BEFORE_MERGE = 64


def foldable(window: WindowCall, whole_partition: bool) -> bool:
    """Whether the window is one aggregate of its whole partition that partial states combine."""
    return whole_partition and capabilities(window.func).decomposable and \
        not window.distinct and \
        not window.ignore_nulls


def streamable(window: WindowCall, direction: str) -> bool:
    return direction == "forward" and bounded_supported(window)


@dataclass
class OpenRows:
    """The rows of one partition still arriving on the input, and what follows them.

    ``rows()`` yields the partition's batches, starting with ``head``, and stops at the first
    row of the next partition, which it leaves in ``leftover`` for the caller.
    """

    head: pa.Table
    stream: Iterator[pa.RecordBatch]
    partition_by: list
    batch_size: int
    leftover: pa.RecordBatch | None = None

    def rows(self) -> Iterator[pa.RecordBatch]:
        keys = [evaluate(e, self.head.slice(0, 1)) for e in self.partition_by]
        head, self.head = self.head, self.head.slice(0, 0)
        batches = head.to_batches(max_chunksize=self.batch_size)
        del head
        batches.reverse()
        while batches:  # each piece of the head is let go of once handed on
            yield batches.pop()
        for batch in self.stream:
            if batch.num_rows == 0:
                continue
            end = self._partition_end(keys, batch)
            if end < batch.num_rows:
                if end:
                    yield batch.slice(0, end)
                self.leftover = batch.slice(end)
                return
            yield batch

    def _partition_end(self, keys: list[pa.Array], batch: pa.RecordBatch) -> int:
        """Rows of ``batch`` before the first one outside the partition of ``keys``."""
        if not self.partition_by:
            return batch.num_rows
        columns = [pa.concat_arrays([key, evaluate(e, batch)])
                   for key, e in zip(keys, self.partition_by)]
        starts = partition_starts(columns, batch.num_rows + 1)
        return int(starts[1]) - 1 if len(starts) > 2 else batch.num_rows


def _pieces(batches: Iterator[pa.RecordBatch], batch_size: int,
            piece_bytes: float) -> Iterator[pa.RecordBatch]:
    """``batches`` cut to at most ``piece_bytes``: the streaming executor's buffer (context
    plus one piece) stays small when the pool is nearly full."""
    for batch in batches:
        row_bytes = max(1, batch.nbytes // max(1, batch.num_rows))
        rows = int(max(256, min(batch_size, piece_bytes // row_bytes)))
        for offset in range(0, batch.num_rows, rows):
            yield batch.slice(offset, rows)


class _Fold:
    """One whole-partition aggregate folded batch by batch into partial states."""

    def __init__(self, window: WindowCall, output_type: pa.DataType):
        self.window = window
        func = window.func
        # corr(y, x) and kin read a second column
        self.columns = 2 if func in BIVARIATE else 1
        options = (("second_column", "b"),) if self.columns == 2 else ()
        self.spec = AggregateSpec(func, None if func == "count_star" else "a", "a", output_type,
                                  options=options)
        self.states: list[pa.Table] = []

    def update(self, batch: pa.RecordBatch) -> None:
        window = self.window
        if window.func == "count_star":
            column = pa.nulls(batch.num_rows, pa.int8())
        else:
            column = evaluate(window.args[0], batch)
            if pa.types.is_dictionary(column.type):
                column = column.dictionary_decode()
        table = pa.table({"a": column})
        if self.columns == 2:
            table = table.append_column("b", evaluate(window.args[1], batch))
        if window.filter is not None:
            table = table.filter(evaluate_predicate(window.filter, batch).fill_null(False))
        self.states.append(aggregate_table(table, [], partial_specs(self.spec)))
        if len(self.states) >= _STATES_BEFORE_MERGE:
            self.states = [self._merged()]

    def _merged(self) -> pa.Table:
        """The states so far combined into one (a state table again)."""
        states = pa.concat_tables(self.states)
        return aggregate_table(states, [], merge_specs(self.spec))

    def result(self) -> pa.Scalar:
        if not self.states:
            empty = pa.table({"a": pa.nulls(0, pa.int8()), "b": pa.nulls(0, pa.int8())})
            self.states = [aggregate_table(empty, [], partial_specs(self.spec))]
        merged = self._merged()
        value = finish_merged(self.spec, list(merged.columns))
        if isinstance(value, pa.ChunkedArray):
            value = value.combine_chunks()
        return value.cast(self.spec.type)[0]


class _RowsExec(ExecutionPlan):
    """An ExecutionPlan over batches that already exist: feeds BoundedWindowAggExec."""

    name = "WindowPartitionRows"

    def __init__(self, schema: pa.Schema, batches: Iterator[pa.RecordBatch]):
        super().__init__(schema)
        self.batches = batches

    def _execute(self, partition, ctx):
        yield from self.batches


def oversized_partition_error(plan, reservation, requested: int, ctx) -> ResourcesExhausted | None:
    """The error for a partition that does not fit, or None when it can run in bounded memory."""
    blocking = [w for w, d, whole in zip(plan.windows, plan.directions, plan.whole_partition)
                if not foldable(w, whole) and not streamable(w, d)]
    if not blocking:
        return None
    base = ctx.memory_pool.exhausted_error(reservation, requested)
    names = ", ".join(describe_window(w) for w in blocking)
    return ResourcesExhausted(
        f"{base} The window partition is larger than memory and {names} needs the whole "
        "partition at once (only whole-partition SUM/COUNT/AVG/MIN/MAX/BOOL_AND/BOOL_OR and "
        "frames ending a bounded distance ahead run in bounded memory).")


def evaluate_oversized(plan, open_rows: OpenRows, partition: int, ctx,
                       metrics) -> Iterator[pa.RecordBatch]:
    """Output batches of one partition too large for memory (see the module docstring).

    ``plan`` is the WindowAggExec; ``oversized_partition_error`` must have returned None.
    """
    folds = {i: _Fold(w, plan.outputs[i].type) for i, (w, whole) in
             enumerate(zip(plan.windows, plan.whole_partition)) if foldable(w, whole)}
    source: Iterator[pa.RecordBatch] = open_rows.rows()
    if folds:
        source = _fold_and_read_back(source, list(folds.values()), plan.input.schema, ctx,
                                     metrics)
    if len(folds) < len(plan.windows):
        source = _pieces(source, ctx.batch_size, oversized_piece_bytes(ctx.memory_pool))
    # windows sharing PARTITION BY and ORDER BY stream through one BoundedWindowAggExec
    groups = list(group_windows(plan.windows, skip=folds).values())
    stages, order = chain(plan.windows, plan.outputs, groups,
                          _RowsExec(plan.input.schema, source), BoundedWindowAggExec)
    width = len(plan.input.schema)
    position = {index: width + k for k, index in enumerate(order)}
    values: dict[int, pa.Scalar] = {}
    for batch in stages.execute(partition, ctx):
        if not values and folds:  # pass 1 is over once the first row is back
            values = {i: fold.result() for i, fold in folds.items()}
        n = batch.num_rows
        columns = list(batch.columns[:width])
        for i in range(len(plan.windows)):
            columns.append(pa.repeat(values[i], n) if i in values else
                           batch.column(position[i]))
        yield pa.RecordBatch.from_arrays(columns, schema=plan.schema)


def _fold_and_read_back(rows: Iterator[pa.RecordBatch], folds: list[_Fold], schema: pa.Schema,
                        ctx, metrics) -> Iterator[pa.RecordBatch]:
    """Pass 1 folds every batch and writes it to a spill file; pass 2 reads the file back."""
    manager = spill_manager(ctx)
    writer = manager.writer(schema, metrics)
    try:
        for batch in rows:
            for fold in folds:
                fold.update(batch)
            writer.write(batch)
    except BaseException:
        writer.abort()
        raise
    file = writer.finish()
    yield from manager.read(file, metrics)

