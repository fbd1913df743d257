"""SharedExec: one subplan that several places of a plan read, run once per partition.

    Aggregate (revenue0) ──▶ SharedExec ──▶ join with supplier        (reader 1)
         (runs once)         │  batches kept per partition
                             └─▶ SharedExec ──▶ max(total_revenue)    (reader 2: replays)

A CTE named twice is bound twice; the physical planner finds the copies by their
fingerprint (logical/fingerprint.py) and plans them as SharedExecs over one result. The
first reader of a partition runs the subplan's partition and keeps its batches (reserved in
the memory pool: they cannot spill); every reader replays them, under its own column names.
The batches are released when the last reader has them, or when the query ends (a reader
that never runs, such as the probe side of a join whose build is empty).

Aggregates are shared: their output is usually small next to what they read, and it is
complete before the first row comes out anyway, so keeping it costs little and waits for
nothing. So are joins of scans (filters and column selections between) when the planner
estimates their output small next to the largest table they read and in bytes (planner.py,
SHARED_JOIN_MAX_*): TPC-H Q11's partsupp ⋈ supplier ⋈ GERMANY, once under its GROUP BY and
once in its HAVING's subquery. Copies that read different columns (projection pushdown
prunes each for its own use) run one join reading the union; each selects its own columns
above its SharedExec. The first reader of a partition waits for the whole partition before
its first row, which a join would otherwise stream: hence only small outputs, and the scans
below read wide batches (widen_scan_batches). Dynamic filters stop here (a filter one
reader's join derives must not shrink what the others see), and so do order requirements:
a reader gets the rows in the order the subplan made them. The planner shares no join
estimated past a sixteenth of the memory limit.

When the pool refuses to keep a partition's batches, they go to a spill file instead (the
batches kept so far, then the rest as they come), and every reader of that partition replays
the file; the last one deletes it (or the end of the query does). Running each reader's
copy unshared instead is not safe once a run has started: a copy's exchanges need every
partition of that copy read, and readers may already have replayed other partitions of
the shared copy, so another copy would run for some partitions only and its producers would
block on queues no one drains.
"""

from __future__ import annotations

import copy
import threading
import weakref

import pyarrow as pa
from pyarrow import ipc

from plansight.engine.errors import ExecutionError
from plansight.engine.exec.spill import SpillFile, spill_manager
from plansight.engine.logical.expr import Column, Expr, transform
from plansight.engine.physical.plan import ExecutionPlan


class SharedResult:
    """The batches of each partition of one subplan, for one run (query execution) at a
    time, and how many readers have not read them yet.

    Each reader holds its own copy of the subplan (the physical optimizer rewrites every
    reader's subtree on its own), but one run executes one copy, the first reader's: an
    exchange inside it (RepartitionExec) must see every partition read from the same
    instance. Partitions split between two copies left each copy's producers blocked on
    the output queues of partitions the other copy served (a deadlock at 8 partitions).
    """

    def __init__(self, readers: int):
        self.readers = readers
        self._lock = threading.Lock()
        self._runs: dict[int, tuple[weakref.ref, dict[int, _Partition], ExecutionPlan]] = {}

    def partition(self, ctx, partition: int, plan: ExecutionPlan
                  ) -> tuple[_Partition, ExecutionPlan]:
        """This run's entry for ``partition`` and the subplan copy the run executes (the
        first one offered, ``plan``, by the first reader)."""
        key = id(ctx)
        with self._lock:
            run = self._runs.get(key)
            if run is None or run[0]() is not ctx:  # a new run (an id may be reused)
                run = self._runs[key] = (weakref.ref(ctx), {}, plan)
                ctx.on_cleanup(lambda: self._end_run(key))
            entry = run[1].get(partition)
            if entry is None:
                entry = run[1][partition] = _Partition(self.readers)
            return entry, run[2]

    def _end_run(self, key: int) -> None:
        with self._lock:
            run = self._runs.pop(key, None)
        for entry in (run[1].values() if run else ()):
            entry.release()


class _Partition:
    def __init__(self, readers: int):
        self.lock = threading.Lock()  # held while the first reader runs the subplan
        self.batches: list[pa.RecordBatch] | None = None  # kept in memory, or
        self.file: SpillFile | None = None  # spilled when the pool refused them
        self.ctx = None  # the run that wrote ``file``
        self.failed = False
        self.error: Exception | None = None  # what failed it, raised again to later readers
        self.unread = readers
        self.reservation = None

    def release(self) -> None:
        self.batches = None
        if self.reservation is not None:
            self.reservation.free()
            self.reservation = None
        if self.file is not None:
            # readers still replaying it opened it before: deleting it leaves them reading
            spill_manager(self.ctx).delete(self.file.path)
            self.file = None


class SharedExec(ExecutionPlan):
    name = "SharedExec"
    RUNTIME_STATE = {"result": lambda: SharedResult(1)}  # shipped apart: each runs its own

    def __init__(self, input: ExecutionPlan, result: SharedResult, schema: pa.Schema | None = None,
                 renamed: dict[int, Column] | None = None):
        """``schema``/``renamed``: this reader's output names and its columns by the input's
        column ids (None: the input's own)."""
        super().__init__(schema if schema is not None else input.schema)
        self.input, self.result, self.renamed = input, result, renamed

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return SharedExec(children[0], self.result, self.schema, self.renamed)

    def output_partitioning(self):
        partitioning = self.input.output_partitioning()
        if self.renamed is None:
            return partitioning
        return partitioning.renamed(self._rename)

    def _rename(self, expr: Expr) -> Expr | None:
        missing = []

        def swap(e):
            if isinstance(e, Column):
                if e.id not in self.renamed:
                    missing.append(e)
                    return e
                return self.renamed[e.id]
            return e

        renamed = transform(expr, swap)
        return None if missing else renamed

    def output_ordering(self):
        return self.input.output_ordering() if self.renamed is None else None

    def maintains_input_order(self):
        return [False]

    def display(self) -> str:
        return f"{self.name}: readers={self.result.readers}"

    def _execute(self, partition, ctx):
        entry, source = self.result.partition(ctx, partition, self.input)
        spilled = None
        try:
            with entry.lock:
                if entry.failed:
                    ctx.check_cancelled()
                    if entry.error is not None:
                        # the first reader's own error: a stand-in raised here could reach
                        # the user before it does (fuzz seed 9841, query 3185)
                        raise copy.copy(entry.error)
                    raise ExecutionError("a shared subplan failed in another reader")
                if entry.batches is None and entry.file is None:
                    entry.failed = True  # until it completes
                    try:
                        self._materialize(entry, source, partition, ctx)
                    except Exception as error:
                        entry.error = error
                        raise
                    entry.failed = False
                batches = entry.batches
                if entry.file is not None:  # opened now: the last reader may delete it
                    spilled = pa.OSFile(str(entry.file.path), "rb")
                entry.unread -= 1
                if entry.unread == 0:
                    entry.release()  # the last reader: ``batches`` is its own reference now
            if spilled is not None:
                batches = _replay(ipc.open_stream(spilled), ctx)
            for batch in batches:
                if batch.num_columns == 0:  # from_arrays would lose a column-less batch's rows
                    yield batch
                    continue
                yield pa.RecordBatch.from_arrays(batch.columns, schema=self.schema)
        finally:
            if spilled is not None:
                spilled.close()

    def _materialize(self, entry: _Partition, source: ExecutionPlan, partition: int,
                     ctx) -> None:
        """Run ``source``'s partition into ``entry``: its batches in memory while the pool
        grants them, else all of them in one spill file (replayed by every reader)."""
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]", can_spill=True)
        entry.reservation = reservation
        batches: list[pa.RecordBatch] = []
        writer = None
        try:
            for batch in source.execute(partition, ctx):
                if writer is None and reservation.try_grow(batch.nbytes):
                    batches.append(batch)
                    continue
                if writer is None:
                    metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
                    writer = spill_manager(ctx).writer(source.schema, metrics)
                    for kept in batches:
                        writer.write(kept)
                    batches = []
                    reservation.free()
                    entry.reservation = None
                writer.write(batch)
            if writer is not None:
                entry.file, entry.ctx = writer.finish(), ctx
                writer = None
            else:
                entry.batches = batches
        finally:
            if writer is not None:  # an error or cancellation
                writer.abort()


def _replay(reader: ipc.RecordBatchStreamReader, ctx):
    """A spill file's batches, in written order, one at a time."""
    while True:
        ctx.check_cancelled()
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return
