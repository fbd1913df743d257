"""SortPreservingMergeExec: merges N sorted input partitions into one sorted stream.

The merge (``merge.merge_sorted``) moves batches, never rows; its diagram is there.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

import pyarrow as pa

from plansight.engine.errors import PlanError
from plansight.engine.exec.compute_clock import waiting
from plansight.engine.exec.context import TaskContext
from plansight.engine.logical.expr import SortKey
from plansight.engine.physical.plan import UNSPECIFIED, ExecutionPlan, Partitioning
from plansight.engine.physical.sorts.merge import merge_sorted


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

    def derived_row_estimate(self):
        rows = self.input.row_estimate
        return rows if rows is None or self.fetch is None else min(rows, self.fetch)

    def display(self) -> str:
        text = f"{self.name}: [{', '.join(map(str, self.keys))}]"
        return text + (f", fetch={self.fetch}" if self.fetch is not None else "")

    def _execute(self, partition, ctx):
        count = self.input.output_partitioning().count
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]", metrics=metrics)
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
            # input batches stay accounted by their producers (a sort keeps its reservation
            # until its stream ends); the merge reserves the sorted copies it makes
            yield from merge_sorted(streams, self.keys, self.schema, batch_size=ctx.batch_size,
                                    fetch=self.fetch, reservation=reservation,
                                    reserved_streams=range(count))
        finally:
            for stream in streams:
                stream.close()
            reservation.free()


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
            self._put(_Failure(self.ctx.fail(error)))
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
                with waiting():  # the input's thread computes it: not this merge's time
                    item = self.items.get(timeout=0.1)
            except queue.Empty:
                self.ctx.check_cancelled()
                continue
            if item is _DONE:
                self.finished = True
                raise StopIteration
            if isinstance(item, _Failure):
                self.finished = True
                raise self.ctx.fail(item.error)
            return item

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
            self.thread = None


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error
