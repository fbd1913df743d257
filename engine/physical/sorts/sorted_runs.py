"""SortedRuns: sorted runs spilled to disk and their k-way merge, the external sort's machinery.

Used by SortExec (runs of input rows) and AggregateExec (runs of group states sorted by the
group keys); the merge itself is ``merge.merge_sorted``.
"""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.exec.memory_pool import merge_budget
from plansight.engine.exec.spill import SpillFile, spill_manager
from plansight.engine.logical.expr import SortKey
from plansight.engine.physical.sorts.merge import merge_sorted
from plansight.engine.physical.sorts.permutation import contiguous, sort_indices

#: Smallest batch written to a run; with less merge memory the fan-in drops first (down to 2).
MIN_RUN_BATCH_BYTES = 32 * 1024



class SortedRuns:
    """Sorted runs spilled to disk and their k-way merge: the external sort's machinery.

    Shared by SortExec (runs of input rows) and AggregateExec (runs of group states sorted
    by the group keys). ``spill`` sorts batches and writes them as one run; ``merged`` yields
    every run and the in-memory rest as one sorted stream, merging in levels of ``fan_in``
    runs first when there are more. The merge's memory (``merge_budget``: a quarter of the
    limit split among ``siblings`` partitions) is reserved from the first spill on, under
    ``<consumer>(merge)``, and runs are written in batches small enough for ``fan_in`` of
    them to merge inside it. Runs are merged stably, in the order written.
    """

    def __init__(self, ctx, keys: list[SortKey], schema: pa.Schema, metrics, consumer: str,
                 siblings: int = 1):
        self.ctx, self.keys, self.schema, self.metrics = ctx, list(keys), schema, metrics
        self.consumer, self.siblings = consumer, max(1, siblings)
        self.merge_reservation = None
        self.runs: list[SpillFile] = []
        self.spilled: list[SpillFile] = []  # every run written, deleted in close()
        self.fan_in, self.run_batch_bytes = self._merge_shape(self.merge_budget(),
                                                              ctx.config.spill_merge_fan_in)

    def merge_budget(self) -> int:
        return merge_budget(self.ctx.memory_pool, self.siblings)

    @property
    def merge_peak(self) -> int:
        return self.merge_reservation.peak if self.merge_reservation is not None else 0

    @staticmethod
    def _merge_shape(budget: int, most: int) -> tuple[int, int]:
        """(fan-in, bytes per run batch) for a merge budget and the most runs merged at once:
        each merged stream buffers up to two batches, and the round's output is as much
        again."""
        fan_in = max(2, min(most, budget // (4 * MIN_RUN_BATCH_BYTES)))
        return fan_in, max(1024, budget // (4 * fan_in))

    def reserve_merge_budget(self) -> None:
        """Hold the merge's memory from the first spill on, so the merge is not starved later.

        Topped up after every spill (a spill frees memory) while siblings hold the pool.
        """
        if self.merge_reservation is None:
            self.merge_reservation = self.ctx.memory_pool.register(f"{self.consumer}(merge)")
        missing = self.merge_budget() - self.merge_reservation.size
        if missing > 0:
            self.merge_reservation.try_grow(missing)

    def spill(self, batches: list[pa.RecordBatch]) -> None:
        """Sort ``batches`` and write them as one run."""
        manager = spill_manager(self.ctx)
        writer = manager.writer(self.schema, self.metrics)
        try:
            rows = self._run_rows(batches)
            for chunk in self.sorted_chunks(batches, rows * 8):
                writer.write_table(chunk, rows)
        except BaseException:
            writer.abort()
            raise
        file = writer.finish()
        self.runs.append(file)
        self.spilled.append(file)

    def sorted_chunks(self, batches: list[pa.RecordBatch], rows: int):
        """The rows of ``batches`` in sorted order, ``rows`` at a time; empties ``batches``.

        The input is made contiguous first (column by column, each column's chunks released as
        it is copied) because a take from a many-chunk table costs a pass over the whole
        table per call: one per output chunk made the sort quadratic. Each chunk is then taken
        on its own: the sort holds its input and one chunk, not a second sorted copy of
        everything.
        """
        table = pa.Table.from_batches(batches, schema=self.schema)
        batches.clear()  # the caller's list must not keep the chunked input alive
        table = contiguous(table)
        indices = sort_indices(table, self.keys)
        for offset in range(0, table.num_rows, rows):
            yield table.take(indices.slice(offset, rows))

    def _run_rows(self, batches: list[pa.RecordBatch]) -> int:
        """Rows per spilled batch: about ``run_batch_bytes`` each."""
        row_bytes = max(1, sum(b.nbytes for b in batches) // max(1, sum(b.num_rows
                                                                        for b in batches)))
        return max(64, min(self.ctx.batch_size, self.run_batch_bytes // row_bytes))

    def merged(self, batches: list[pa.RecordBatch]):
        """Every run and ``batches`` (the newest rows, unsorted, accounted by the caller) as
        one sorted stream of batches; the runs are deleted as they are read."""
        self.reserve_merge_budget()
        manager = spill_manager(self.ctx)
        while len(self.runs) > self.fan_in:
            self.runs = [self._merge_level(group) if len(group) > 1 else group[0]
                         for group in _groups(self.runs, self.fan_in)]
        min_rows = self._run_rows_estimate()
        streams = [manager.read(run, self.metrics) for run in self.runs]
        reserved = []
        if batches:  # the newest rows: the last run, its memory already reserved
            reserved = [len(streams)]
            rows = self._run_rows(batches)
            streams.append(batch for chunk in self.sorted_chunks(batches, rows * 8)
                           for batch in chunk.to_batches(max_chunksize=rows))
        self.runs = []
        yield from self._merge(streams, self.ctx.batch_size, min_rows, reserved)

    def _merge_level(self, group: list[SpillFile]) -> SpillFile:
        manager = spill_manager(self.ctx)
        rows = self._run_rows_estimate()
        writer = manager.writer(self.schema, self.metrics)
        try:
            streams = [manager.read(run, self.metrics) for run in group]
            for batch in self._merge(streams, rows * 8, rows, []):
                writer.write_table(pa.Table.from_batches([batch]), rows)
        except BaseException:
            writer.abort()
            raise
        file = writer.finish()
        self.spilled.append(file)
        return file

    def _merge(self, streams, batch_size: int, min_rows: int, reserved):
        return merge_sorted(streams, self.keys, self.schema, batch_size=batch_size,
                            min_rows=min_rows, reservation=self.merge_reservation,
                            reserved_streams=reserved)

    def _run_rows_estimate(self) -> int:
        rows = [run.rows / run.batches for run in self.runs if run.batches]
        return max(64, int(min(rows))) if rows else self.ctx.batch_size

    def close(self) -> None:
        """Release the merge's memory and delete every run still on disk."""
        if self.merge_reservation is not None:
            self.merge_reservation.free()
        if self.spilled:
            manager = spill_manager(self.ctx)
            for file in self.spilled:
                manager.delete(file.path)


def _groups(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]
