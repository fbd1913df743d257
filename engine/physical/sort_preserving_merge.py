"""SortPreservingMergeExec: merges N sorted input partitions into one sorted stream.

The merge moves batches, never rows. Each input stream keeps a buffer of its next rows (at
least ``min_rows`` while it has more). One round:

    stream 0: [ 1  3  5  8 ]         the owner is the stream whose buffer ends lowest
    stream 1: [ 2  4 | 9 11 ]        (its last key is the bound B = 8; ties: lowest stream);
    stream 2: [ 6  7  8 | 8 12 ]     every row that sorts before B, or equal to B in a stream
                                     at or before the owner, can be emitted now: nothing
              safe ─┘   └─ kept      still unread can sort before it

    emit sort_indices(concat(safe prefixes in stream order))      (stable: ties keep stream
                                                                   order, then input order)

The owner's whole buffer is safe, so every round empties at least one buffer of ``min_rows``
rows. Each stream's safe prefix is found by comparing the bound with a strided sample of the
buffer and then with one block of it (vectorized compare kernels, O(sqrt n) rows per round);
the rows emitted are sorted once. ``merge_sorted`` is reused by SortExec to merge spilled runs.
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from plansight.engine.exec.context import TaskContext
from plansight.engine.exec.memory_pool import MemoryReservation
from plansight.engine.logical.expr import SortKey
from plansight.engine.physical.plan import UNSPECIFIED, ExecutionPlan, Partitioning
from plansight.engine.physical.sort import sort_columns, sort_indices

from plansight.errors import PlanError


class SortPreservingMergeExec(ExecutionPlan):
    """One sorted partition from an input whose partitions are each sorted by ``keys``."""

    name = "SortPreservingMergeExec"

    def __init__(self, keys: list[SortKey], input: ExecutionPlan, fetch: int | None = None):
        super().__init__(input.schema)
        if not keys:
            raise PlanError("SortPreservingMergeExec needs at least one sort key")
        if fetch is not None and fetch < 0:
            raise PlanError(f"SortPreservingMergeExec: fetch must be >= 0, got {fetch}")
        self.keys, self.input, self.fetch = list(keys), input, fetch

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return SortPreservingMergeExec(self.keys, children[0], self.fetch)

    def required_input_distribution(self):
        return [UNSPECIFIED]

    def required_input_ordering(self):
        return [tuple(self.keys)]

    def maintains_input_order(self):
        return [True]

    def output_partitioning(self):
        return Partitioning(1)

    def output_ordering(self):
        return tuple(self.keys)

    def display(self) -> str:
        text = f"{self.name}: [{', '.join(map(str, self.keys))}]"
        return text + (f", fetch={self.fetch}" if self.fetch is not None else "")

    def _execute(self, partition, ctx):
        count = self.input.output_partitioning().count
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]")
        if count == 1:
            streams = [self.input.execute(0, ctx)]
        else:
            # every input runs on its own thread from the start: an input may only finish once
            # its siblings are read too (they can share a RepartitionExec upstream)
            streams = [_Prefetched(lambda p=p: self.input.execute(p, ctx), ctx)
                       for p in range(count)]
        try:
            for stream in streams:
                if isinstance(stream, _Prefetched):
                    stream.start()
            yield from merge_sorted(streams, self.keys, self.schema, batch_size=ctx.batch_size,
                                    fetch=self.fetch, reservation=reservation)
        finally:
            for stream in streams:
                stream.close()
            reservation.free()


# ----------------------------------------------------------------------------- the merge

def merge_sorted(streams: Sequence[Iterator[pa.RecordBatch]], keys: list[SortKey],
                 schema: pa.Schema, *, batch_size: int, min_rows: int | None = None,
                 fetch: int | None = None, reservation: MemoryReservation | None = None,
                 reserved_streams: Sequence[int] = ()) -> Iterator[pa.RecordBatch]:
    """Merge streams each sorted by ``keys`` into one sorted stream (stable across streams).

    ``reservation`` is kept at ``max(its size on entry, bytes buffered)``: a caller may reserve
    the merge's memory ahead. Streams listed in ``reserved_streams`` are already accounted by
    the caller and are not counted again. Every stream is closed when the merge ends.
    """
    min_rows = max(1, min_rows or batch_size)
    reserved = set(reserved_streams)
    cursors = [_Cursor(i, stream, schema, i not in reserved) for i, stream in enumerate(streams)]
    floor = reservation.size if reservation is not None else 0
    remaining = fetch
    try:
        while remaining is None or remaining > 0:
            for cursor in cursors:
                cursor.fill(min_rows)
            active = [c for c in cursors if c.rows]
            if not active:
                return
            _account(reservation, floor, cursors)
            merged = _merge_round(active, keys, schema)
            if remaining is not None:
                merged = merged.slice(0, remaining)
                remaining -= merged.num_rows
            _account(reservation, floor, cursors, merged.nbytes)
            yield from merged.to_batches(max_chunksize=batch_size)
    finally:
        for cursor in cursors:
            close = getattr(cursor.stream, "close", None)
            if close is not None:
                close()
        if reservation is not None and reservation.size > floor:
            reservation.shrink(reservation.size - floor)


def _merge_round(active: list[_Cursor], keys: list[SortKey], schema: pa.Schema) -> pa.Table:
    """Take every row that is safe to emit from the buffers and return them sorted."""
    if len(active) == 1:
        return pa.Table.from_batches(active[0].take(active[0].rows), schema=schema)
    lasts = pa.Table.from_batches([c.last_row() for c in active], schema=schema)
    owner = active[sort_indices(lasts, keys)[0].as_py()]
    bound, _ = sort_columns(lasts.slice(active.index(owner), 1), keys)
    pieces = []
    for cursor in active:
        if cursor is owner:
            count = cursor.rows
        else:  # ties with the bound are safe only in streams before the owner
            count = cursor.count_preceding(keys, bound, inclusive=cursor.index < owner.index)
        if count:
            pieces.append(cursor.take(count))
    batches = [batch for piece in pieces for batch in piece]
    table = pa.Table.from_batches(batches, schema=schema)
    if len(pieces) == 1:
        return table  # one sorted piece: nothing to interleave
    return table.take(sort_indices(table, keys))


def _account(reservation: MemoryReservation | None, floor: int, cursors: list[_Cursor],
             extra: int = 0) -> None:
    if reservation is None:
        return
    target = max(floor, sum(c.held for c in cursors) + extra)
    if target > reservation.size:
        reservation.grow(target - reservation.size)  # a merge cannot spill: raise if refused
    elif target < reservation.size:
        reservation.shrink(reservation.size - target)


class _Cursor:
    """The buffered, not yet emitted rows of one sorted stream."""

    def __init__(self, index: int, stream: Iterator[pa.RecordBatch], schema: pa.Schema,
                 counted: bool):
        self.index, self.stream, self.schema, self.counted = index, stream, schema, counted
        self.batches: list[pa.RecordBatch] = []
        self.sizes: list[int] = []  # bytes of each buffered batch as pulled (held until used up)
        self.rows = 0
        self.done = False

    @property
    def held(self) -> int:
        return sum(self.sizes) if self.counted else 0

    def fill(self, min_rows: int) -> None:
        while not self.done and self.rows < min_rows:
            try:
                batch = next(self.stream)
            except StopIteration:
                self.done = True
                break
            if batch.num_rows:
                self.batches.append(batch)
                self.sizes.append(batch.nbytes)
                self.rows += batch.num_rows

    def last_row(self) -> pa.RecordBatch:
        last = self.batches[-1]
        return last.slice(last.num_rows - 1, 1)

    def take(self, count: int) -> list[pa.RecordBatch]:
        """Remove and return the first ``count`` rows (zero-copy slices)."""
        out = []
        while count:
            head = self.batches[0]
            if head.num_rows <= count:
                out.append(head)
                self.batches.pop(0)
                self.sizes.pop(0)
                count -= head.num_rows
                self.rows -= head.num_rows
            else:
                out.append(head.slice(0, count))
                self.batches[0] = head.slice(count)
                self.rows -= count
                count = 0
        return out

    def count_preceding(self, keys: list[SortKey], bound: list[pa.Array],
                        inclusive: bool) -> int:
        """How many leading rows sort before the bound (or equal to it, when ``inclusive``).

        Those rows are a prefix (the buffer is sorted): find the block holding the boundary
        from a strided sample of block ends, then count inside that block.
        """
        table = pa.Table.from_batches(self.batches, schema=self.schema)
        n = table.num_rows
        stride = max(1, math.isqrt(n))
        ends = np.arange(stride - 1, n, stride)
        if len(ends) <= 1:
            return int(_precedes(table, keys, bound, inclusive).sum())
        whole_blocks = int(_precedes(table.take(pa.array(ends)), keys, bound, inclusive).sum())
        start = whole_blocks * stride
        block = table.slice(start, min(stride, n - start))
        if block.num_rows == 0:
            return start
        return start + int(_precedes(block, keys, bound, inclusive).sum())


def _precedes(table: pa.Table, keys: list[SortKey], bound: list[pa.Array],
              inclusive: bool) -> np.ndarray:
    """Per row: sorts strictly before ``bound`` (or equal to it, when ``inclusive``).

    Same order as ``sort_indices``: lexicographic over ``sort_columns``, each ascending or
    descending with its NULL placement; a NaN's order is decided by the NaN-ness column before
    its value column, so values compare with NaN read as 0.
    """
    columns, sort_keys = sort_columns(table, keys)
    n = table.num_rows
    result = np.full(n, inclusive)
    for column, (_, order, placement), bound_column in reversed(
            list(zip(columns, sort_keys, bound))):
        column, bound_column = _comparable(column), _comparable(bound_column)
        value = bound_column[0]
        valid = _mask(column.is_valid())
        nulls_first = placement == "at_start"
        if not value.is_valid:
            before = valid if not nulls_first else np.zeros(n, dtype=bool)
            equal = ~valid
        else:
            compare = pc.greater if order == "descending" else pc.less
            before = _mask(compare(column, value))
            if nulls_first:
                before |= ~valid
            equal = _mask(pc.equal(column, value))
        result = before | (equal & result)
    return result


def _comparable(column: pa.Array) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_floating(column.type):
        column = pc.if_else(pc.is_nan(column), pa.scalar(0, column.type), column)
    return column


def _mask(array: pa.Array) -> np.ndarray:
    return np.asarray(array.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


# ----------------------------------------------------------------------------- input threads

_DONE = object()


class _Prefetched:
    """Runs one input stream on its own thread into a small bounded queue."""

    def __init__(self, make: Callable[[], Iterator[pa.RecordBatch]], ctx: TaskContext,
                 capacity: int = 2):
        self.make, self.ctx = make, ctx
        self.items: queue.Queue = queue.Queue(maxsize=capacity)
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.finished = False

    def start(self) -> None:
        self.thread = threading.Thread(target=self._produce, daemon=True,
                                       name="plansight-merge-input")
        self.thread.start()

    def _put(self, item) -> bool:
        while not self.stop.is_set():
            try:
                self.items.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        stream = None
        try:
            stream = self.make()
            for batch in stream:
                if self.stop.is_set() or not self._put(batch):
                    break
            self._put(_DONE)
        except BaseException as error:  # noqa: BLE001 (re-raised by the consumer)
            self._put(_Failure(error))
        finally:
            if stream is not None:
                stream.close()

    def __iter__(self):
        return self

    def __next__(self) -> pa.RecordBatch:
        if self.finished:
            raise StopIteration
        while True:
            try:
                item = self.items.get(timeout=0.1)
            except queue.Empty:
                self.ctx.check_cancelled()
                continue
            if item is _DONE:
                self.finished = True
                raise StopIteration
            if isinstance(item, _Failure):
                self.finished = True
                raise item.error
            return item

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
            self.thread = None


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error
