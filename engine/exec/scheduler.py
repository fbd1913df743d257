"""Run partition streams on worker threads, merging their batches through a bounded queue.

    partition 0 ─┐
    partition 1 ─┼─▶ bounded queue ─▶ consumer (one iterator)
    partition 2 ─┘

Arrow kernels release the GIL, so threads give real parallelism. The bounded queue is the
backpressure. The first error in any producer is re-raised in the consumer with its original
traceback, and stops the other producers; closing the consumer stops them too. No thread
outlives the iterator.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

import pyarrow as pa

from plansight.engine.exec.context import TaskContext

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
        except BaseException as error:  # re-raised by the consumer
            put(_Failure(error))
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
                # the query fails: stop every thread of it, also those waiting on an exchange
                # queue whose reader was the failed partition (they would wait forever)
                ctx.cancelled.set()
                raise item.error
            else:
                yield item
    finally:
        stop.set()
        for thread in threads:
            thread.join()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


def run_partitions(plan, ctx: TaskContext) -> Iterator[pa.RecordBatch]:
    """All batches of all partitions of ``plan`` (order across partitions unspecified)."""
    count = plan.output_partitioning().count
    return merge_streams([lambda p=p: plan.execute(p, ctx) for p in range(count)], ctx)
