"""RepartitionExec: redistributes rows over ``partitions`` outputs, by hash or round robin.

    input partitions ──(one thread each)──▶ route batch ──▶ per-output bounded queues
                                                          └──▶ output partition p reads queue p

Hash routing decides with integers: one hash per row (fixed seed, so equal keys land in the
same partition on every child and every run), ``np.argsort`` of the target partitions gives
one ``take`` per input batch, and each output gets a zero-copy slice. A batch whose rows all
go to one partition is passed on untouched. Round robin deals whole batches, each input
starting at a different output so small inputs still spread.

Small outputs are coalesced: slicing a batch N ways (or dealing small batches round robin)
makes pieces far below the batch size, and every piece costs each operator above a Python
round trip. Each producer keeps, per output partition, the pieces smaller than half the batch
size until they add up to a batch (``concat_batches``), and flushes the rest when its input
ends; a piece at least half the batch size with nothing pending goes on untouched. So the
delay is bounded by one batch of rows per output partition and input. Pending pieces are
reserved (``RepartitionExec[input i]``); when the pool refuses, they are sent at once
instead, and the output queue spills as usual.

Each output queue holds its batches under a spillable reservation ``RepartitionExec[p]``.
When the pool refuses one, the batch is appended to the partition's spill file and the queue
keeps a marker in its place; the reader replaces markers by the file's batches in order, so
every output partition stays FIFO. The queue bound (in batches, markers included) still gives
backpressure.

Order-preserving variant (``preserve_order``, for a sorted input whose consumer needs the
order): the pieces an input sends to an output are a sorted subsequence of that input, so
each output partition keeps one lane per input and k-way merges the lanes on read
(``merge_sorted``), instead of a repartition followed by a full sort:

    input 0 (sorted) ──route──▶ lane 0 ─┐
    input 1 (sorted) ──route──▶ lane 1 ─┴─ merge_sorted ──▶ output p (sorted)
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import PlanError
from plansight.engine.exec.compute_clock import CLOCK, waiting
from plansight.engine.exec.events import RepartitionOutput
from plansight.engine.exec.spill import SpillWriter, spill_manager
from plansight.engine.kernels.hash_table import fnv_each
from plansight.engine.kernels.keys import byte_buffers
from plansight.engine.logical.expr import Expr
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.plan import ExecutionPlan, Partitioning
from plansight.engine.physical.sorts.merge import merge_sorted
from plansight.engine.physical.vocabulary import RepartitionMode

_SEED = np.uint64(0x9E3779B97F4A7C15)


def hash_rows(arrays: list[pa.Array], seed: int = int(_SEED)) -> np.ndarray:
    """A uint64 hash per row of the key columns, stable across runs and processes.

    Operators that split rows again after a hash repartition (a grace hash join's buckets)
    pass their own ``seed``: with the repartition's seed, every row of a partition would
    land in the same few buckets.
    """
    n = len(arrays[0]) if arrays else 0
    h = np.full(n, np.uint64(seed), dtype=np.uint64)
    for array in arrays:
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        t = array.type
        if pa.types.is_floating(t):
            values = pc.cast(array, pa.float64()).fill_null(0).to_numpy(zero_copy_only=False)
            values = (values + 0.0).view(np.uint64)  # +0.0 folds -0.0 into 0.0
        elif pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_temporal(t):
            if pa.types.is_temporal(t):  # same bits, read as integers
                array = array.view(pa.int64() if t.bit_width == 64 else pa.int32())
            as_int = pc.cast(array, pa.int64())
            values = as_int.fill_null(0).to_numpy(zero_copy_only=False).view(np.uint64)
        elif _short_strings(array):
            # the same content hash as below, of every row: for short strings one pass over
            # their bytes costs less than Arrow's hash of each into a dictionary (Q10's
            # customer name, phone and address keys are nearly all distinct)
            if isinstance(array, pa.ChunkedArray):
                array = array.combine_chunks()
            values = fnv_each(*byte_buffers(array))
        else:
            # strings, decimals, ...: factorize to codes, then hash the distinct values once
            encoded = pc.dictionary_encode(array).combine_chunks() \
                if isinstance(array, pa.ChunkedArray) else pc.dictionary_encode(array)
            dictionary = encoded.dictionary
            words = _hash_values(dictionary)
            codes = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
            values = words[codes] if len(words) else np.zeros(n, np.uint64)
        if array.null_count:
            nulls = np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            values = np.where(nulls, np.uint64(0x5BD1E995), values)
        h = _mix(h ^ values)
    return h


#: targets up to which a batch is split by one filter per target: Arrow's filter copies
#: each column in order, where the argsort's take gathers rows at random; splitting a
#: 64K-row batch of TPC-H part (two string columns) two ways took 1.8 ms against 2.4 ms,
#: three ways 2.0 against 3.1, and eight ways about the same either way
FILTER_TARGETS = 4


def split_by_target(batch: pa.RecordBatch, targets: np.ndarray, count: int):
    """(target, rows of ``batch`` routed there) for each non-empty target in ``range(count)``.

    Up to ``FILTER_TARGETS`` targets, one ``filter`` per target; beyond, one stable argsort
    and one ``take`` per batch, then zero-copy slices. A batch whose rows all go to one
    target is passed on untouched. Row order within a target is kept.
    """
    if len(targets) and (targets == targets[0]).all():
        yield int(targets[0]), batch
        return
    if count <= FILTER_TARGETS:
        for target in range(count):
            mask = targets == target
            if mask.any():
                yield target, batch.filter(pa.array(mask))
        return
    order = np.argsort(targets, kind="stable")
    counts = np.bincount(targets, minlength=count)
    shuffled = batch.take(pa.array(order))
    offset = 0
    for target, rows in enumerate(counts):
        if rows:
            yield target, shuffled.slice(offset, int(rows))
        offset += int(rows)


#: strings at most this long on average are hashed row by row (FNV is ~1 ns a byte)
SHORT_STRING_BYTES = 32


def _short_strings(array: pa.Array | pa.ChunkedArray) -> bool:
    """Plain string or binary values averaging at most ``SHORT_STRING_BYTES`` bytes."""
    t = array.type
    if not (pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t)
            or pa.types.is_large_binary(t)) or len(array) == 0:
        return False
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    data = sum(len(chunk.buffers()[2] or b"") for chunk in chunks)
    return data <= SHORT_STRING_BYTES * len(array)


def _hash_values(dictionary: pa.Array) -> np.ndarray:
    """Content hash (FNV-1a, compiled) of each distinct value; non-string types hash their
    canonical text form."""
    if not (pa.types.is_string(dictionary.type) or pa.types.is_binary(dictionary.type)):
        dictionary = pc.cast(dictionary, pa.string())
    dictionary = dictionary.fill_null("")  # NULL keys are handled by the caller
    return fnv_each(*byte_buffers(dictionary))


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: spreads every input bit over the word."""
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))


class RepartitionExec(ExecutionPlan):
    name = "RepartitionExec"
    RUNTIME_STATE = {"_lock": threading.Lock, "_state": lambda: None}

    def __init__(self, input: ExecutionPlan, mode: str, partitions: int,
                 exprs: tuple[Expr, ...] = (), preserve_order: bool = False):
        super().__init__(input.schema)
        self.input, self.mode = input, RepartitionMode.of(mode)
        self.partitions, self.exprs = partitions, tuple(exprs)
        self.preserve_order = preserve_order
        # merge on read: each output partition merges what every input sent it by this order
        self.sort_keys = list(input.output_ordering() or ()) if preserve_order else []
        if preserve_order and not self.sort_keys:
            raise PlanError("RepartitionExec: preserve_order needs a sorted input")
        self._lock = threading.Lock()
        self._state = None

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return RepartitionExec(children[0], self.mode, self.partitions, self.exprs,
                               self.preserve_order and bool(children[0].output_ordering()))

    def output_partitioning(self):
        if self.mode is RepartitionMode.HASH:
            return Partitioning(self.partitions, self.exprs)
        return Partitioning(self.partitions)

    def output_ordering(self):
        # one input's batches reach each output in input order (one producer, FIFO queues)
        if self.preserve_order or self.input.output_partitioning().count == 1:
            return self.input.output_ordering()
        return None

    def display(self) -> str:
        n_in = self.input.output_partitioning().count
        if self.mode is RepartitionMode.HASH:
            keys = ", ".join(map(str, self.exprs))
            text = (f"RepartitionExec: partitioning=Hash([{keys}], {self.partitions}), "
                    f"input_partitions={n_in}")
        else:
            text = (f"RepartitionExec: partitioning=RoundRobinBatch({self.partitions}), "
                    f"input_partitions={n_in}")
        if self.preserve_order:
            text += f", preserve_order=true, sort_exprs=[{', '.join(map(str, self.sort_keys))}]"
        return text

    def route(self, batch: pa.RecordBatch, start: int):
        """(output partition, batch) pieces of one input batch."""
        if self.mode is not RepartitionMode.HASH:
            yield start % self.partitions, batch
            return
        keys = [evaluate(e, batch) for e in self.exprs]
        targets = (hash_rows(keys) % np.uint64(self.partitions)).astype(np.int64)
        yield from split_by_target(batch, targets, self.partitions)

    def _start(self, ctx):
        """Start one producer thread per input partition (once, on first execute)."""
        with self._lock:
            if self._state is not None and self._state["ctx"] is ctx:
                return self._state
            n_in = self.input.output_partitioning().count
            # preserving order, every input has its own lane into each output (merged on
            # read). Lanes are unbounded in batches (the pool still reserves or spills them):
            # a merge waiting on lane j while producer i blocks on a full lane of another
            # output would deadlock
            lanes = n_in if self.preserve_order else 1
            capacity = sys.maxsize if self.preserve_order else _QUEUE_CAPACITY
            queues = [[_OutputQueue(self, p, ctx, capacity) for _ in range(lanes)]
                      for p in range(self.partitions)]
            stop = threading.Event()
            rows = np.zeros(self.partitions, dtype=np.int64)
            sizes = np.zeros(self.partitions, dtype=np.int64)  # Arrow bytes routed
            published = [0.0]  # when the last live RepartitionOutput went out
            counted = threading.Lock()  # guards rows, sizes and published
            state = {"ctx": ctx, "queues": queues, "stop": stop, "rows": rows,
                     "remaining": n_in, "readers": self.partitions}

            def produce(partition):
                stream = None
                lane = partition if self.preserve_order else 0
                pending = _PendingOutputs(self, partition, ctx)
                routing = ctx.metrics.for_partition(self.operator_id, self.name, partition)
                try:
                    stream = self.input.execute(partition, ctx)
                    for i, batch in enumerate(stream):
                        if stop.is_set():
                            break
                        # routing is this operator's compute, though no pull of it runs it;
                        # waits on full queues are not (see compute_clock)
                        clock = CLOCK.state
                        nested, t0 = clock.nested, time.perf_counter()
                        routed = []
                        for p, piece in self.route(batch, partition + i):
                            routed.append((p, piece.num_rows, piece.nbytes))
                            for ready in pending.add(p, piece):
                                queues[p][lane].put(ready, stop)
                        now = time.perf_counter()
                        routing.add("elapsed_compute", now - t0 - (clock.nested - nested))
                        clock.nested = nested + (now - t0)
                        # producers count into shared totals: under the lock, or a thread
                        # switch inside ``+=`` loses the other producer's update
                        with counted:
                            for p, n, size in routed:
                                rows[p] += n
                                sizes[p] += size
                            live = ctx.events.active and now - published[0] >= _LIVE_INTERVAL
                            if live:
                                published[0] = now
                                counts = (tuple(int(r) for r in rows),
                                          tuple(int(b) for b in sizes))
                        if live:
                            ctx.events.publish(RepartitionOutput(
                                self.operator_id, *counts, final=False))
                    for p, ready in pending.flush_all():
                        queues[p][lane].put(ready, stop)
                except BaseException as error:  # noqa: BLE001 (re-raised by every reader)
                    error = ctx.fail(error)
                    for output in queues:
                        for q in output:
                            q.put(_Failure(error), stop)
                finally:
                    pending.free()
                    if stream is not None:
                        stream.close()
                    if self.preserve_order:  # this input's lanes end here
                        for output in queues:
                            output[lane].put(None, stop)
                    with self._lock:
                        state["remaining"] -= 1
                        last = state["remaining"] == 0
                    if last:
                        if ctx.events.active:
                            ctx.events.publish(RepartitionOutput(
                                self.operator_id, tuple(int(r) for r in rows),
                                tuple(int(b) for b in sizes)))
                        if not self.preserve_order:
                            for output in queues:
                                output[0].put(None, stop)

            threads = [threading.Thread(target=produce, args=(i,), daemon=True,
                                        name=f"plansight-repartition-{i}") for i in range(n_in)]
            state["threads"] = threads
            self._state = state
            for thread in threads:
                thread.start()
            return state

    def _execute(self, partition, ctx):
        state = self._start(ctx)
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        lanes = state["queues"][partition]
        merge = None
        try:
            if len(lanes) == 1:
                yield from _drain(lanes[0], ctx, metrics)
            else:
                # each lane is sorted (a subsequence of one sorted input): k-way merge
                merge = ctx.memory_pool.register(f"{self.name}[{partition}] merge")
                yield from merge_sorted([_drain(q, ctx, metrics) for q in lanes],
                                        self.sort_keys, self.schema,
                                        batch_size=ctx.batch_size, reservation=merge)
        finally:
            if merge is not None:
                metrics.set_max("peak_mem", merge.peak)
                merge.free()
            for q in lanes:
                q.close()
            with self._lock:
                state["readers"] -= 1
                done = state["readers"] == 0
            if done:
                state["stop"].set()
                for thread in state["threads"]:
                    thread.join()
                for output in state["queues"]:
                    for other in output:
                        other.close()
                self._state = None


def _drain(q: _OutputQueue, ctx, metrics) -> Iterator[pa.RecordBatch]:
    """The batches of one queue until its end marker (re-raising a producer's error)."""
    while True:
        item = q.get(timeout=0.1)
        if item is _EMPTY:
            ctx.check_cancelled()
            continue
        if item is None:
            return
        if isinstance(item, _Failure):
            raise ctx.fail(item.error)
        metrics.add("partition_rows", item.num_rows)
        yield item


_LIVE_INTERVAL = 0.05  # seconds between live rows-per-partition events while routing
_QUEUE_CAPACITY = 8  # batches per output queue: the backpressure bound


class _PendingOutputs:
    """One producer's small pieces per output partition, held until they make a batch.

    Pieces are kept in arrival order and concatenated in that order, so every output stays
    FIFO per input (an order-preserving reader relies on it). A piece is a slice that keeps
    its whole input batch alive, so every ``_COMPACT_EVERY`` pieces are copied into one
    compact chunk: a partition that gets one row per input batch holds a bounded number of
    input batches, not one per row. The reservation counts the buffers pending pieces keep
    alive (``get_total_buffer_size``), an overestimate where pieces share an input batch.
    """

    def __init__(self, plan: RepartitionExec, input_partition: int, ctx):
        self.schema = plan.schema
        self.target = max(1, ctx.batch_size)
        outputs = plan.partitions
        self.chunks: list[list[pa.RecordBatch]] = [[] for _ in range(outputs)]  # compact
        self.pieces: list[list[pa.RecordBatch]] = [[] for _ in range(outputs)]  # slices
        self.rows = [0] * outputs
        self.held = [0] * outputs  # reserved bytes per output
        self.reservation = ctx.memory_pool.register(f"{plan.name}[input {input_partition}]")

    def add(self, partition: int, piece: pa.RecordBatch) -> list[pa.RecordBatch]:
        """The batches ready to send to ``partition`` after adding ``piece``."""
        if piece.num_rows == 0:
            return []
        pieces = self.pieces[partition]
        if not pieces and not self.chunks[partition] and 2 * piece.num_rows >= self.target:
            return [piece]  # big enough: passed on untouched
        pieces.append(piece)
        self.rows[partition] += piece.num_rows
        size = piece.get_total_buffer_size()
        if self.rows[partition] >= self.target or not self.reservation.try_grow(size):
            return [self.flush(partition)]
        self.held[partition] += size
        if len(pieces) >= _COMPACT_EVERY:
            self._compact(partition)
        return []

    def _compact(self, partition: int) -> None:
        chunk = _concat(self.pieces[partition], self.schema)
        self.pieces[partition] = []
        self.chunks[partition].append(chunk)
        kept = sum(c.get_total_buffer_size() for c in self.chunks[partition])
        if kept < self.held[partition]:
            self.reservation.shrink(self.held[partition] - kept)
            self.held[partition] = kept

    def flush(self, partition: int) -> pa.RecordBatch:
        parts = self.chunks[partition] + self.pieces[partition]
        batch = parts[0] if len(parts) == 1 else _concat(parts, self.schema)
        self.chunks[partition], self.pieces[partition] = [], []
        self.rows[partition] = 0
        self.reservation.shrink(self.held[partition])
        self.held[partition] = 0
        return batch

    def flush_all(self):
        """(output partition, batch) for every output with pending pieces (input ended)."""
        for partition, rows in enumerate(self.rows):
            if rows:
                yield partition, self.flush(partition)

    def free(self) -> None:
        self.chunks = [[] for _ in self.chunks]
        self.pieces = [[] for _ in self.pieces]
        self.reservation.free()


# pending slices per output before they are copied into one compact chunk
_COMPACT_EVERY = 16


def _concat(pieces: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    try:
        return pa.concat_batches(pieces)
    except pa.ArrowInvalid:  # pieces whose schemas differ only in nullability or metadata
        return pa.concat_batches([pa.RecordBatch.from_arrays(p.columns, schema=schema)
                                  for p in pieces])


_EMPTY = object()  # get() timed out
_SPILLED = object()  # marker: the next batch of this queue's spill files


class _OutputQueue:
    """One output partition's bounded FIFO; batches the pool refuses go to a spill file."""

    def __init__(self, plan: RepartitionExec, partition: int, ctx,
                 capacity: int = _QUEUE_CAPACITY):
        self.plan, self.ctx, self.capacity = plan, ctx, capacity
        self.metrics = ctx.metrics.for_partition(plan.operator_id, plan.name, partition)
        self.reservation = ctx.memory_pool.register(f"{plan.name}[{partition}]", can_spill=True)
        self.items: deque = deque()  # RecordBatch | _SPILLED | None (end) | _Failure
        self.condition = threading.Condition()
        self.writer: SpillWriter | None = None  # where spilled batches are appended
        self.reader = None  # the finished spill file being read back
        self.reader_left = 0  # its batches not yet read
        self.closed = False

    def put(self, item, stop: threading.Event) -> None:
        """Enqueue (blocks while full); dropped once the reader has closed."""
        with self.condition:
            if len(self.items) >= self.capacity:
                with waiting():
                    while (len(self.items) >= self.capacity and not stop.is_set()
                           and not self.closed):
                        self.condition.wait(0.05)
            if stop.is_set() or self.closed:
                return
            if isinstance(item, pa.RecordBatch) and not self.reservation.try_grow(item.nbytes):
                if self.writer is None:
                    self.writer = spill_manager(self.ctx).writer(self.plan.schema, self.metrics)
                self.writer.write(item)
                item = _SPILLED
            self.items.append(item)
            self.condition.notify_all()

    def get(self, timeout: float):
        """The next item, or ``_EMPTY`` after ``timeout`` seconds without one."""
        with self.condition:
            if not self.items:
                with waiting():
                    self.condition.wait(timeout)
                if not self.items:
                    return _EMPTY
            item = self.items.popleft()
            self.condition.notify_all()
            if isinstance(item, pa.RecordBatch):
                self.reservation.shrink(item.nbytes)
                return item
            if item is not _SPILLED:
                return item
            if self.reader_left == 0:
                # the batch is in the file still being written: finish it, start reading it
                file = self.writer.finish()
                self.writer = None
                self.reader = spill_manager(self.ctx).read(file, self.metrics)
                self.reader_left = file.batches
        # read outside the lock (producers keep enqueueing); only this reader touches it
        batch = next(self.reader)
        self.reader_left -= 1
        if self.reader_left == 0:
            self.reader.close()  # deletes the file
            self.reader = None
        return batch

    def close(self) -> None:
        """Drop what is queued, release the reservation, delete spill files (idempotent)."""
        with self.condition:
            self.closed = True
            self.items.clear()
            if self.writer is not None:
                self.writer.abort()
                self.writer = None
            self.condition.notify_all()
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        self.reservation.free()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error
