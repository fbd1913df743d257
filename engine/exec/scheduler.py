"""Run partition streams on worker threads, merging their batches through a bounded queue.

    partition 0 ─┐
    partition 1 ─┼─▶ bounded queue ─▶ consumer (one iterator)
    partition 2 ─┘

Arrow kernels release the GIL, so threads give real parallelism. The bounded queue is the
backpressure.

In order (``merge_streams_in_order``), every partition still runs at once, but the consumer
takes all of partition 0, then all of partition 1, ...: the rows of contiguous source ranges
come out in source order. A partition ahead of the one being read keeps a few batches, and
more only while the memory pool grants them; refused, it waits for the reader (which never
waits on the pool, so this cannot deadlock).

    partition 0 ─▶ [b b b]        ─▶ reader (at partition 0)
    partition 1 ─▶ [b b b b b b]  (waits when the pool says no)
    partition 2 ─▶ [b b b b]

The first real error in any producer is recorded on the context (which stops the other
producers) and re-raised in the consumer with its original traceback, whichever failure
reaches the consumer first; closing the consumer stops them too. No thread
outlives the iterator.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator

import pyarrow as pa

from plansight.engine.exec.context import TaskContext
from plansight.engine.exec.memory_pool import AmortizedAccount

_DONE = object()


def merge_streams(streams: list[Callable[[], Iterator]], ctx: TaskContext,
                  capacity: int = 4) -> Iterator:
    """Items of every stream (interleaved), each stream produced on its own thread."""
    if len(streams) == 1:
        yield from streams[0]()
        return
    items: queue.Queue = queue.Queue(maxsize=capacity * len(streams))
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                items.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce(make: Callable[[], Iterator]) -> None:
        iterator = None
        try:
            iterator = make()
            for item in iterator:
                if stop.is_set() or ctx.cancelled.is_set() or not put(item):
                    break
            put(_DONE)
        except BaseException as error:  # noqa: BLE001 (re-raised by the consumer)
            put(_Failure(ctx.fail(error)))
        finally:
            if iterator is not None and hasattr(iterator, "close"):
                iterator.close()

    threads = [threading.Thread(target=produce, args=(s,), daemon=True,
                                name=f"plansight-worker-{i}") for i, s in enumerate(streams)]
    for thread in threads:
        thread.start()
    finished = 0
    try:
        while finished < len(threads):
            try:
                item = items.get(timeout=0.1)
            except queue.Empty:
                ctx.check_cancelled()
                continue
            if item is _DONE:
                finished += 1
            elif isinstance(item, _Failure):
                # the query fails with its first real error (a sibling's Cancelled may arrive
                # first); fail() also stops every thread of it, those waiting on an exchange
                # queue whose reader was the failed partition too (they would wait forever)
                raise ctx.fail(item.error)
            else:
                yield item
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def merge_streams_in_order(streams: list[Callable[[], Iterator]], ctx: TaskContext,
                           reservation=None, capacity: int = 4) -> Iterator:
    """Items of stream 0, then of stream 1, ...; the streams are produced concurrently, each
    on its own thread. ``reservation`` (a MemoryReservation) pays for the batches a stream
    holds beyond ``capacity`` while it is not the one being read."""
    if len(streams) == 1:
        yield from streams[0]()
        return
    buffers: list[deque] = [deque() for _ in streams]  # (item, reserved bytes)
    # accounted in chunks: a pool grant (and a ReservationChanged event) per batch would be
    # per-batch work the event bus contract rules out
    account = AmortizedAccount(reservation) if reservation is not None else None
    done = [False] * len(streams)
    failures: list[BaseException] = []
    head = 0  # the stream being read
    changed = threading.Condition()
    stop = threading.Event()

    def accept(index: int, item) -> bool:
        """Queue ``item`` of stream ``index`` once there is room; False when stopping."""
        size = 0
        with changed:
            while not stop.is_set() and not ctx.cancelled.is_set():
                if len(buffers[index]) < capacity:
                    break
                if index != head and account is not None:
                    size = getattr(item, "nbytes", 0)
                    if account.try_add(size):
                        break
                    size = 0
                changed.wait(0.05)
            else:
                return False
            buffers[index].append((item, size))
            changed.notify_all()
            return True

    def produce(index: int) -> None:
        iterator = None
        try:
            iterator = streams[index]()
            for item in iterator:
                if not accept(index, item):
                    break
        except BaseException as error:  # noqa: BLE001 -- re-raised by the consumer
            error = ctx.fail(error)  # the query's first real error (stops the others)
            with changed:
                failures.append(error)
        finally:
            if iterator is not None and hasattr(iterator, "close"):
                iterator.close()
            with changed:
                done[index] = True
                changed.notify_all()

    threads = [threading.Thread(target=produce, args=(i,), daemon=True,
                                name=f"plansight-worker-{i}") for i in range(len(streams))]
    for thread in threads:
        thread.start()
    try:
        while head < len(streams):
            with changed:
                while not failures and not buffers[head] and not done[head]:
                    changed.wait(0.1)
                    ctx.check_cancelled()
                if failures:
                    # the query fails with its first real error (see merge_streams)
                    raise ctx.fail(failures[0])
                if buffers[head]:
                    item, size = buffers[head].popleft()
                else:  # done and drained: read the next stream
                    head += 1
                    changed.notify_all()
                    continue
                if size:
                    account.remove(size)
                changed.notify_all()
            yield item
    finally:
        stop.set()
        with changed:
            changed.notify_all()
        for thread in threads:
            thread.join()
        if reservation is not None:
            reservation.free()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


def run_partitions(plan, ctx: TaskContext) -> Iterator[pa.RecordBatch]:
    """All batches of all partitions of ``plan`` (order across partitions unspecified)."""
    count = plan.output_partitioning().count
    return merge_streams([lambda p=p: plan.execute(p, ctx) for p in range(count)], ctx)
