"""ShuffleWriterExec and ShuffleReaderExec: the two ends of an exchange between stages.

    stage s (one task per input partition m)        stage s+1 (one task per output r)
    ShuffleWriterExec ──route──▶ pieces (s, m, r) ── ShuffleReaderExec partition r reads
                                 on m's worker        piece (s, m, r) of every m: local ones
                                                      from the store, others from the peer

The writer replaces a RepartitionExec's producers, the reader its consumers (same routing:
``RepartitionExec.route``, so equal keys meet as they do locally). Below a
CoalescePartitionsExec or SortPreservingMergeExec the exchange is ``passthrough``: map
partition m writes one piece and reader partition m reads it, and the merge above the
reader runs in the next stage as it runs locally.

Where pieces are and how to reach them is the task's ``ShuffleContext`` (ctx.shuffle): the
process's piece store, the locations of the input stages' map tasks, and a fetch function
(the Dask worker's rpc; a plain call in tests without a cluster).

In one tree, the reader keeps the writer as its child, so EXPLAIN shows the stages; a
pickled reader leaves the writer behind (it runs in another task).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa

from plansight.engine.distributed.pieces import PieceKey, PieceStore, read_ipc
from plansight.engine.errors import ExecutionError
from plansight.engine.exec.context import TaskContext
from plansight.engine.logical.expr import Expr, SortKey
from plansight.engine.physical.dynamic_filter import KeySummary
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.plan import ExecutionPlan, Ordering, Partitioning
from plansight.engine.physical.repartition import RepartitionExec
from plansight.engine.physical.sorts.merge import merge_sorted
from plansight.engine.physical.vocabulary import RepartitionMode

PASSTHROUGH = "passthrough"


@dataclass
class ShuffleContext:
    """What a task knows of the shuffle: its store, where its inputs are, how to fetch.

    ``inputs[stage]`` lists the worker address of each map partition of ``stage``;
    ``fetch(address, key)`` returns piece ``key`` from that worker as IPC bytes (or None).
    """

    query_id: str
    store: PieceStore
    address: str = "local"
    inputs: dict[int, list[str]] = field(default_factory=dict)
    fetch: Callable[[str, PieceKey], bytes | None] | None = None
    #: what this task's writer summarized of its rows' join keys, by filter name
    key_summaries: dict[str, dict] = field(default_factory=dict)


def _shuffle(ctx: TaskContext) -> ShuffleContext:
    shuffle = getattr(ctx, "shuffle", None)
    if shuffle is None:
        raise ExecutionError("a staged plan runs as distributed tasks (execute_task), "
                             "not in one process")
    return shuffle


class ShuffleWriterExec(ExecutionPlan):
    """Routes each input partition's rows into pieces kept in the worker's piece store."""

    name = "ShuffleWriterExec"

    def __init__(self, input: ExecutionPlan, stage_id: int, mode: str, partitions: int,
                 exprs: tuple[Expr, ...] = ()):
        super().__init__(input.schema)
        self.input, self.stage_id, self.mode = input, stage_id, mode
        self.partitions, self.exprs = partitions, tuple(exprs)
        # routing is RepartitionExec's, so both give each row the same output partition
        self._router = None if mode == PASSTHROUGH else \
            RepartitionExec(input, mode, partitions, exprs)
        # dynamic filters across stages (stage_filters): the join keys this stage's rows
        # feed a build side with, and the filters its scans wait for
        self.key_summaries: list = []
        self.awaited_filters: list = []
        # below a final LIMIT (stage_limits): rows a task need write at most
        self.fetch: int | None = None

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return ShuffleWriterExec(children[0], self.stage_id, self.mode, self.partitions,
                                 self.exprs)

    def output_partitioning(self) -> Partitioning:
        return self.input.output_partitioning()

    def output_ordering(self):
        return None

    def display(self) -> str:
        if self.mode == PASSTHROUGH:
            how = "passthrough"
        elif self.mode == RepartitionMode.HASH.value:
            how = f"Hash([{', '.join(map(str, self.exprs))}], {self.partitions})"
        else:
            how = f"RoundRobinBatch({self.partitions})"
        text = (f"ShuffleWriterExec: stage={self.stage_id}, partitioning={how}, "
                f"tasks={self.input.output_partitioning().count}")
        if self.key_summaries:
            text += f", build_keys_for=[{', '.join(k.name for k in self.key_summaries)}]"
        if self.awaited_filters:
            text += ", after=[" + ", ".join(f"stage {f.build_stage} for {f.name}"
                                            for f in self.awaited_filters) + "]"
        if self.fetch is not None:
            text += f", fetch={self.fetch}"
        return text

    def _execute(self, partition: int, ctx: TaskContext) -> Iterator[pa.RecordBatch]:
        # Pieces smaller than a batch are held per target until they add up to one: a hash
        # split cuts each batch P ways, and after a few shuffles every batch would be a
        # handful of rows, each paying every operator's per-batch cost
        shuffle = _shuffle(ctx)
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        pending: dict[int, list[pa.RecordBatch]] = {}
        pending_rows: dict[int, int] = {}
        written: set[PieceKey] = set()

        def store(target: int, batches: list[pa.RecordBatch]) -> None:
            batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
            key = (shuffle.query_id, self.stage_id, partition, target)
            shuffle.store.append(key, batch)
            written.add(key)
            metrics.add("shuffle_bytes", batch.nbytes)
            metrics.add("shuffle_rows", batch.num_rows)

        summaries = [(k, KeySummary(k.type, k.max_keys, k.max_bitmap_bits))
                     for k in self.key_summaries]
        remaining = self.fetch
        stream = self.input.execute(partition, ctx)
        try:
            for i, batch in enumerate(stream if remaining != 0 else ()):
                if remaining is not None:
                    batch = batch.slice(0, remaining)
                    remaining -= batch.num_rows
                for wanted, summary in summaries:
                    summary.add(evaluate(wanted.expr, batch))
                pieces = [(0, batch)] if self._router is None else \
                    self._router.route(batch, partition + i)
                for target, piece in pieces:
                    pending.setdefault(target, []).append(piece)
                    pending_rows[target] = pending_rows.get(target, 0) + piece.num_rows
                    if pending_rows[target] >= ctx.batch_size:
                        store(target, pending.pop(target))
                        pending_rows[target] = 0
                if remaining == 0:
                    break  # the LIMIT above takes no more rows from this task
            for target, batches in pending.items():
                store(target, batches)
            for wanted, summary in summaries:
                shuffle.key_summaries[wanted.name] = summary.result()
        finally:
            stream.close()
            for key in written:
                shuffle.store.finish(key)
        metrics.add("pieces_written", len(written))
        return
        yield  # a generator: the writer's output is its pieces


class ShuffleReaderExec(ExecutionPlan):
    """Partition r: the pieces every map task of ``stage_id`` wrote for r (fetched from
    the workers that hold them), merged by ``sort_keys`` when order must be kept."""

    name = "ShuffleReaderExec"

    def __init__(self, writer: ShuffleWriterExec, partitioning: Partitioning,
                 ordering: Ordering | None = None, sort_keys: list[SortKey] | None = None):
        super().__init__(writer.schema)
        self.input: ExecutionPlan | None = writer
        self.stage_id, self.mode = writer.stage_id, writer.mode
        self.map_partitions = writer.output_partitioning().count
        self.partitioning, self.ordering = partitioning, ordering
        self.sort_keys = list(sort_keys or [])

    def __getstate__(self) -> dict:
        # the writer runs in its own stage's tasks: a shipped reader leaves it behind
        state = super().__getstate__()
        state["input"] = None
        return state

    def children(self):
        return [self.input] if self.input is not None else []

    def with_new_children(self, children):
        return ShuffleReaderExec(children[0], self.partitioning, self.ordering,
                                 self.sort_keys)

    def output_partitioning(self) -> Partitioning:
        return self.partitioning

    def output_ordering(self) -> Ordering | None:
        return self.ordering

    def display(self) -> str:
        text = (f"ShuffleReaderExec: stage={self.stage_id}, partitioning={self.partitioning}"
                if self.mode != PASSTHROUGH else
                f"ShuffleReaderExec: stage={self.stage_id}, passthrough, "
                f"partitions={self.partitioning.count}")
        if self.sort_keys:
            text += f", merge=[{', '.join(map(str, self.sort_keys))}]"
        return text

    def _execute(self, partition: int, ctx: TaskContext) -> Iterator[pa.RecordBatch]:
        shuffle = _shuffle(ctx)
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        locations = shuffle.inputs.get(self.stage_id)
        if locations is None or len(locations) != self.map_partitions:
            raise ExecutionError(f"ShuffleReaderExec[{partition}]: the locations of stage "
                                 f"{self.stage_id}'s pieces are missing")
        if self.mode == PASSTHROUGH:
            sources = [(partition, 0)]
        else:
            sources = [(m, partition) for m in range(self.map_partitions)]

        def lane(m: int, r: int) -> Iterator[pa.RecordBatch]:
            key = (shuffle.query_id, self.stage_id, m, r)
            address = locations[m]
            if address is None:  # a satisfied LIMIT cancelled map task m (stage_limits)
                metrics.add("map_tasks_cancelled")
                return
            if address == shuffle.address or shuffle.fetch is None:
                metrics.add("local_pieces")
                yield from shuffle.store.batches(key)
                return
            data = shuffle.fetch(address, key)
            metrics.add("remote_pieces")
            if data is not None:
                metrics.add("remote_bytes", len(data))
                yield from read_ipc(data)

        if self.sort_keys and len(sources) > 1:
            yield from merge_sorted([lane(m, r) for m, r in sources], self.sort_keys,
                                    self.schema, batch_size=ctx.batch_size)
            return
        for m, r in sources:
            yield from lane(m, r)
