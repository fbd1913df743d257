"""merge_sorted: merges N sorted streams of batches into one sorted stream.

The merge moves batches, never rows. Each input stream keeps a buffer of its next rows (at
least ``min_rows`` while it has more). One round:

    stream 0: [ 1  3  5  8 ]         the owner is the stream whose buffer ends lowest
    stream 1: [ 2  4 | 9 11 ]        (its last key is the bound B = 8; ties: lowest stream);
    stream 2: [ 6  7 | 8  8 12 ]     every row that sorts before B, or equal to B in a stream
                                     before the owner, can be emitted now: nothing still
            safe ─┘    └─ kept       unread can sort before it

    emit sort_indices(concat(safe prefixes in stream order))      (stable: ties keep stream
                                                                   order, then input order)

The owner's whole buffer is safe, so every round empties at least one buffer of ``min_rows``
rows. The safe prefixes of all streams are found together with two small stable sorts: of the
last row of every sqrt(n)-row block of each buffer plus the bound, then of the one block per
buffer that holds the boundary plus the bound. The rows emitted are sorted once.
Used by SortPreservingMergeExec, by SortedRuns to merge spilled runs, and by an
order-preserving repartition.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from plansight.engine.exec.memory_pool import MemoryReservation
from plansight.engine.logical.expr import SortKey
from plansight.engine.physical.sorts.permutation import sort_columns, sort_permutation


def merge_sorted(streams: Sequence[Iterator[pa.RecordBatch]], keys: list[SortKey],
                 schema: pa.Schema, *, batch_size: int, min_rows: int = 1,
                 fetch: int | None = None, reservation: MemoryReservation | None = None,
                 reserved_streams: Iterable[int] = ()) -> Iterator[pa.RecordBatch]:
    """Merge streams each sorted by ``keys`` into one sorted stream (stable across streams).

    Each stream's buffer is refilled to ``min_rows`` rows whenever it runs below. The
    reservation covers the buffered batches and each round's output until it is handed on,
    and never drops below its size on entry (a caller may reserve the merge's memory ahead).
    Batches of the streams in ``reserved_streams`` are accounted by their producers and not
    counted again. Every stream is closed when the merge ends.
    """
    min_rows = max(1, min_rows)
    reserved = set(reserved_streams)
    order = _Order(keys)
    cursors = [_Cursor(stream, schema, order, i not in reserved)
               for i, stream in enumerate(streams)]
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
            pieces, permutation, held = _merge_round(active, order, schema)
            count = pieces.num_rows if remaining is None else min(pieces.num_rows, remaining)
            if remaining is not None:
                remaining -= count
            for offset in range(0, count, batch_size):
                size = min(batch_size, count - offset)
                if permutation is None:  # one sorted piece: zero-copy slices
                    chunk = pieces.slice(offset, size)
                    _account(reservation, floor, cursors, held)
                else:  # one sorted copy of a batch at a time, reserved until handed on
                    chunk = pieces.take(pa.array(permutation[offset:offset + size]))
                    _account(reservation, floor, cursors, held + chunk.nbytes)
                yield from chunk.to_batches()
    finally:
        for cursor in cursors:
            close = getattr(cursor.stream, "close", None)
            if close is not None:
                close()
        if reservation is not None and reservation.size > floor:
            reservation.shrink(reservation.size - floor)


class _Order:
    """The sort order on key tables: the ``sort_columns`` of each batch, computed once."""

    def __init__(self, keys: list[SortKey]):
        self.keys = keys
        self.sort_keys: list[tuple[str, str, str]] | None = None

    def key_table(self, batch: pa.RecordBatch) -> pa.Table:
        columns, sort_keys = sort_columns(batch, self.keys)
        self.sort_keys = sort_keys
        columns = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c
                   for c in columns]
        return pa.table(columns, names=[name for name, _, _ in sort_keys])

    def indices(self, key_table: pa.Table, sorted_runs: bool = False) -> np.ndarray:
        """Stable sort permutation of a key table (``sorted_runs``: of sorted pieces)."""
        return sort_permutation(key_table.columns, self.sort_keys, sorted_runs).to_numpy()


def _merge_round(active: list[_Cursor], order: _Order,
                 schema: pa.Schema) -> tuple[pa.Table, np.ndarray | None, int]:
    """Take every row that is safe to emit: the rows, the permutation that sorts them (None
    when they come from one stream, already sorted) and the bytes of those taken from
    counted buffers (held until emitted).
    """
    if len(active) == 1:
        counts = [active[0].rows]
    else:
        lasts = pa.concat_tables([c.last_key() for c in active])
        owner = int(order.indices(lasts)[0])
        counts = _safe_counts(active, owner, lasts.slice(owner, 1), order)
    pieces = [(cursor.counted, cursor.take(count))
              for cursor, count in zip(active, counts) if count]
    batches = [batch for _, (piece, _) in pieces for batch in piece]
    held = sum(batch.nbytes for counted, (piece, _) in pieces if counted for batch in piece)
    table = pa.Table.from_batches(batches, schema=schema)
    if len(pieces) == 1:
        return table, None, held
    key_table = pa.concat_tables([key for _, (_, piece_keys) in pieces for key in piece_keys])
    return table, order.indices(key_table, sorted_runs=True), held


def _safe_counts(active: list[_Cursor], owner: int, bound: pa.Table,
                 order: _Order) -> list[int]:
    """Per cursor, the length of its prefix that is safe to emit (the owner's: everything).

    Rows safe in a cursor before the owner sort before or equal to the bound; after it,
    strictly before. Both at once: stable-sort the candidates of all cursors with the bound
    placed between the cursors before and after the owner, and count what lands before it.
    First the last row of every sqrt(n)-row block, then the one block holding the boundary.
    """
    others = [i for i in range(len(active)) if i != owner]
    tables = {i: active[i].key_table() for i in others}
    strides = {i: max(1, math.isqrt(tables[i].num_rows)) for i in others}
    ends = {i: np.arange(strides[i] - 1, tables[i].num_rows, strides[i]) for i in others}
    blocks = _count_before(owner, bound, order, {i: tables[i].take(ends[i]) for i in others})
    starts = {i: blocks[i] * strides[i] for i in others}
    rows = _count_before(owner, bound, order,
                         {i: tables[i].slice(starts[i], strides[i]) for i in others})
    return [active[owner].rows if i == owner else starts[i] + rows[i]
            for i in range(len(active))]


def _count_before(owner: int, bound: pa.Table, order: _Order,
                  candidates: dict[int, pa.Table]) -> dict[int, int]:
    """How many rows of each candidate key table sort before the bound (ties: see above)."""
    parts, labels, placed = [], [], False
    for i in sorted(candidates):
        if i > owner and not placed:
            parts.append(bound)
            labels.append(owner)
            placed = True
        parts.append(candidates[i])
        labels.append(i)
    if not placed:
        parts.append(bound)
        labels.append(owner)
    sizes = [part.num_rows for part in parts]
    label_per_row = np.repeat(np.array(labels), sizes)
    bound_row = sum(sizes[:labels.index(owner)])
    permutation = order.indices(pa.concat_tables(parts))
    before = permutation[:int(np.flatnonzero(permutation == bound_row)[0])]
    counts = np.bincount(label_per_row[before], minlength=max(labels) + 1)
    return {i: int(counts[i]) for i in candidates}


def _account(reservation: MemoryReservation | None, floor: int, cursors: list[_Cursor],
             extra: int = 0) -> None:
    if reservation is None:
        return
    target = max(floor, sum(c.held for c in cursors) + extra)
    if target > reservation.size:
        # a merge cannot spill: it waits while siblings (merging too) hold the pool, and
        # raises if refused for good
        reservation.grow(target - reservation.size, wait=True)
    elif target < reservation.size:
        reservation.shrink(reservation.size - target)


class _Cursor:
    """The buffered, not yet emitted rows of one sorted stream, with their sort keys."""

    def __init__(self, stream: Iterator[pa.RecordBatch], schema: pa.Schema, order: _Order,
                 counted: bool):
        self.stream, self.schema, self.order, self.counted = stream, schema, order, counted
        self.batches: list[pa.RecordBatch] = []
        self.keys: list[pa.Table] = []  # the key table of each buffered batch
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
                self.keys.append(self.order.key_table(batch))
                self.sizes.append(batch.nbytes)
                self.rows += batch.num_rows

    def last_key(self) -> pa.Table:
        last = self.keys[-1]
        return last.slice(last.num_rows - 1, 1)

    def take(self, count: int) -> tuple[list[pa.RecordBatch], list[pa.Table]]:
        """Remove and return the first ``count`` rows and their keys (zero-copy slices)."""
        rows, keys = [], []
        while count:
            head, head_keys = self.batches[0], self.keys[0]
            if head.num_rows <= count:
                rows.append(head)
                keys.append(head_keys)
                del self.batches[0], self.keys[0], self.sizes[0]
                count -= head.num_rows
                self.rows -= head.num_rows
            else:
                rows.append(head.slice(0, count))
                keys.append(head_keys.slice(0, count))
                self.batches[0], self.keys[0] = head.slice(count), head_keys.slice(count)
                self.rows -= count
                count = 0
        return rows, keys

    def key_table(self) -> pa.Table:
        return pa.concat_tables(self.keys)


# ----------------------------------------------------------------------------- input threads
