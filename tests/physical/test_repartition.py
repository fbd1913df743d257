"""RepartitionExec's promises: small outputs coalesced (rows per partition unchanged), a batch
whose rows all go to one partition passed on untouched, round robin with staggered starts."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.events import EventBus, RepartitionOutput
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.logical.expr import Column
from plansight.engine.physical.plan import ExecutionPlan, Partitioning
from plansight.engine.physical.repartition import (
    FILTER_TARGETS,
    RepartitionExec,
    hash_rows,
    split_by_target,
)
from tests.differential.harness import check

SCHEMA = pa.schema([("input#1", pa.int64()), ("seq#2", pa.int64()), ("key#3", pa.int64())])
KEY = Column(3, "key", pa.int64())


class Batches(ExecutionPlan):
    """``inputs`` partitions, each yielding ``batches`` batches of ``rows`` rows; ``key``
    maps (input, row number within the input) arrays to the key column."""

    name = "Batches"

    def __init__(self, inputs: int, batches: int, rows: int, key=lambda i, seq: seq % 1000):
        super().__init__(SCHEMA)
        self.inputs, self.batches, self.rows, self.key = inputs, batches, rows, key
        self.produced: dict[int, list[pa.RecordBatch]] = {}

    def output_partitioning(self):
        return Partitioning(self.inputs)

    def _execute(self, partition, ctx):
        produced = self.produced.setdefault(partition, [])
        for b in range(self.batches):
            seq = np.arange(b * self.rows, (b + 1) * self.rows)
            batch = pa.record_batch([np.full(self.rows, partition), seq,
                                     self.key(partition, seq)], schema=SCHEMA)
            produced.append(batch)
            yield batch


def _ctx(batch_size=8192, limit=None, spill_dir=None, observe=False):
    """A context; with ``observe`` its events land in the returned list (close ``ctx.events``
    before reading them)."""
    events = []
    bus = EventBus([events.append] if observe else [])
    ctx = TaskContext(SessionConfig(batch_size=batch_size, spill_dir=spill_dir),
                      MemoryPool(limit), events=bus)
    return ctx, events


def _read_all(plan, ctx):
    """Every output partition read on its own thread: {partition: [batches]}."""
    results = {}

    def read(p):
        results[p] = list(plan.execute(p, ctx))

    threads = [threading.Thread(target=read, args=(p,))
               for p in range(plan.output_partitioning().count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return [results[p] for p in range(len(threads))]


def _expected_rows_per_partition(source: Batches, partitions: int) -> list[int]:
    keys = pa.concat_arrays([b.column(2) for p in sorted(source.produced)
                             for b in source.produced[p]])
    targets = hash_rows([keys]) % np.uint64(partitions)
    return np.bincount(targets.astype(np.int64), minlength=partitions).tolist()


@pytest.mark.parametrize("inputs,batches", [(1, 10_000), (2, 2_000)])
def test_tiny_batches_are_coalesced_and_rows_per_partition_unchanged(inputs, batches):
    ctx, events = _ctx(batch_size=2048, observe=True)
    source = Batches(inputs, batches // inputs, 3)
    plan = RepartitionExec(source, "hash", 4, (KEY,))
    outputs = _read_all(plan, ctx)
    received = [b for out in outputs for b in out]
    # without coalescing every input batch sends one piece per distinct target
    pieces = sum(len(np.unique(hash_rows([b.column(2)]) % np.uint64(4)))
                 for produced in source.produced.values() for b in produced)
    assert pieces > 2 * batches
    # full batches of 2048 rows, and at most one partly filled batch per output and input
    assert len(received) <= 3 * batches // 2048 + 4 * inputs
    assert len(received) * 100 < pieces
    assert ctx.metrics.total(plan.operator_id, "output_batches") == len(received)
    # rows per output partition (the skew view's numbers) are what the hash says
    expected = _expected_rows_per_partition(source, 4)
    assert [sum(b.num_rows for b in out) for out in outputs] == expected
    ctx.events.close()  # every event delivered
    published = [e for e in events if isinstance(e, RepartitionOutput)]
    assert list(published[-1].rows_per_partition) == expected
    assert [m["partition_rows"] for m in ctx.metrics.partitions(plan.operator_id)] == expected
    # every row arrives exactly once, and each output is FIFO per input
    table = pa.Table.from_batches(received, schema=SCHEMA)
    for i in range(inputs):
        sent = table.filter(pa.compute.equal(table.column(0), i)).column(1).to_numpy()
        assert sorted(sent) == list(range(3 * batches // inputs))
    for out in outputs:
        table = pa.Table.from_batches(out, schema=SCHEMA)
        for i in range(inputs):
            seq = table.filter(pa.compute.equal(table.column(0), i)).column(1).to_numpy()
            assert (np.diff(seq) > 0).all()
    assert ctx.memory_pool.reserved == 0


def test_round_robin_of_tiny_batches_is_coalesced_too():
    ctx, _ = _ctx(batch_size=100)
    source = Batches(2, 1000, 3)
    plan = RepartitionExec(source, "round_robin", 3)
    outputs = _read_all(plan, ctx)
    assert sum(b.num_rows for out in outputs for b in out) == 6000
    for out in outputs:  # only each input's last flush may be short
        assert sum(1 for b in out if b.num_rows < 100) <= 2
    assert sum(len(out) for out in outputs) <= 6000 // 100 + 6
    assert ctx.memory_pool.reserved == 0


def test_a_batch_whose_rows_all_go_to_one_partition_is_passed_on_untouched():
    ctx, _ = _ctx(batch_size=1000)
    source = Batches(1, 5, 1000, key=lambda i, seq: np.full(len(seq), 42))
    plan = RepartitionExec(source, "hash", 4, (KEY,))
    outputs = _read_all(plan, ctx)
    received = [b for out in outputs for b in out]
    assert sum(1 for out in outputs if out) == 1  # one key: one partition
    assert len(received) == 5
    assert all(got is sent for got, sent in zip(received, source.produced[0]))


def test_big_pieces_are_slices_of_one_take_not_copies():
    """Beyond FILTER_TARGETS partitions, pieces of at least half a batch are not
    concatenated: they share the taken buffer."""
    ctx, _ = _ctx(batch_size=1000)
    partitions = FILTER_TARGETS + 4
    source = Batches(1, 1, 4000 * partitions, key=lambda i, seq: seq)
    plan = RepartitionExec(source, "hash", partitions, (KEY,))
    outputs = _read_all(plan, ctx)
    assert [len(out) for out in outputs] == [1] * partitions
    addresses = {out[0].column(1).buffers()[1].address for out in outputs}
    assert len(addresses) == 1


@pytest.mark.parametrize("partitions", range(2, FILTER_TARGETS + 1))
def test_few_targets_get_one_filtered_batch_each_in_input_order(partitions):
    """Up to FILTER_TARGETS partitions a batch is split by one filter per target: each
    partition gets its rows as one batch, in input order, and every row goes somewhere."""
    ctx, _ = _ctx(batch_size=1000)
    source = Batches(1, 1, 4000, key=lambda i, seq: seq)
    plan = RepartitionExec(source, "hash", partitions, (KEY,))
    outputs = _read_all(plan, ctx)
    assert [len(out) for out in outputs] == [1] * partitions
    seqs = [out[0].column(1).to_pylist() for out in outputs]
    assert all(seq == sorted(seq) for seq in seqs)
    assert sorted(v for seq in seqs for v in seq) == list(range(4000))
    targets = hash_rows([pa.array(range(4000), pa.int64())]) % np.uint64(partitions)
    assert all(set(targets[seq].tolist()) == {p} for p, seq in enumerate(seqs))


@pytest.mark.parametrize("count", [1, 2, 3, FILTER_TARGETS, FILTER_TARGETS + 1, 16])
def test_split_by_target_keeps_each_targets_rows_in_order(count):
    rng = np.random.default_rng(count)
    batch = pa.record_batch({"v": np.arange(1000), "s": [f"s{i}" for i in range(1000)]})
    targets = rng.integers(0, count, 1000).astype(np.int64)
    targets[:10] = count - 1  # the last target is never empty
    pieces = list(split_by_target(batch, targets, count))
    assert [t for t, _ in pieces] == sorted({int(t) for t in targets})
    for target, piece in pieces:
        expected = np.flatnonzero(targets == target)
        assert piece.column(0).to_pylist() == expected.tolist()
        assert piece.column(1).to_pylist() == [f"s{i}" for i in expected]
    assert list(split_by_target(batch.slice(0, 0), targets[:0], count)) == []


def test_round_robin_deals_whole_batches_with_a_staggered_start_per_input():
    ctx, _ = _ctx(batch_size=4)
    source = Batches(3, 4, 4)  # batches of a full batch size: never coalesced
    plan = RepartitionExec(source, "round_robin", 3)
    outputs = _read_all(plan, ctx)
    for p, out in enumerate(outputs):
        for batch in out:
            sent_by = batch.column(0)[0].as_py()
            number = batch.column(1)[0].as_py() // 4
            assert batch is source.produced[sent_by][number]  # whole and untouched
            assert (sent_by + number) % 3 == p  # input i starts at output i
    # so the first batch of every input lands on a different output
    firsts = {(b.column(0)[0].as_py()) for out in outputs for b in out
              if b.column(1)[0].as_py() == 0}
    assert firsts == {0, 1, 2}
    assert [len(out) for out in outputs] == [4, 4, 4]


def test_a_partition_getting_one_row_per_batch_holds_few_input_batches():
    """Pending one-row slices are compacted: they do not keep hundreds of input batches
    alive (and reserved) until their partition has a full batch."""
    keys = np.arange(100)
    targets = hash_rows([pa.array(keys)]) % np.uint64(2)
    rare = int(keys[targets == 1][0])
    common = int(keys[targets == 0][0])
    ctx, _ = _ctx(batch_size=1000)
    sizes = []
    ctx.memory_pool.listeners.append(
        lambda r, total: sizes.append(r.size) if r.consumer == "RepartitionExec[input 0]"
        else None)
    source = Batches(1, 300, 999,
                     key=lambda i, seq: np.where(seq % 999 == 0, rare, common))
    plan = RepartitionExec(source, "hash", 2, (KEY,))
    outputs = _read_all(plan, ctx)
    one_input_batch = source.produced[0][0].get_total_buffer_size()
    assert max(sizes) < 20 * one_input_batch  # without compaction: ~300 input batches
    assert len(outputs[1]) == 1 and outputs[1][0].num_rows == 300
    assert outputs[1][0].column(1).to_pylist() == list(range(0, 300 * 999, 999))
    assert outputs[1][0].get_total_buffer_size() < one_input_batch
    assert ctx.memory_pool.reserved == 0


def test_pending_pieces_are_sent_at_once_when_the_pool_refuses_them(tmp_path):
    """A pool too small to hold pending pieces: they go to the queues (which spill), nothing
    is lost and nothing stays reserved."""
    ctx, _ = _ctx(limit=1, spill_dir=str(tmp_path))
    source = Batches(1, 200, 3)
    plan = RepartitionExec(source, "hash", 2, (KEY,))
    outputs = _read_all(plan, ctx)
    got = pa.Table.from_batches([b for out in outputs for b in out], schema=SCHEMA)
    assert sorted(got.column(1).to_pylist()) == list(range(600))
    assert sum(len(out) for out in outputs) > 200  # nothing could be held back
    assert ctx.memory_pool.reserved == 0
    ctx.cleanup()


@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("batch_size", [1, 3, 7])
def test_coalesced_repartitions_match_duckdb(partitions, batch_size):
    rng = np.random.default_rng(2)
    n = 600
    table = pa.table({"k": pa.array(rng.integers(0, 40, n), mask=rng.random(n) < 0.1),
                      "v": rng.random(n), "s": [f"s{x % 13}" for x in range(n)]})
    for sql in ["SELECT k, count(DISTINCT v), sum(v) FROM t GROUP BY k",
                "SELECT s, count(*) FROM t GROUP BY s ORDER BY s",
                "SELECT a.k, count(*) FROM t a JOIN t b ON a.k = b.k GROUP BY a.k"]:
        check(sql, {"t": table}, target_partitions=partitions, batch_size=batch_size)


def test_a_query_through_a_repartition_keeps_its_answer_at_tiny_batches():
    session = ps.Session(target_partitions=3, batch_size=2)
    session.register("t", pa.table({"k": np.arange(1000) % 17, "v": np.arange(1000)}))
    got = session.sql("SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k").to_arrow()
    assert got.column("s").to_pylist() == [sum(range(k, 1000, 17)) for k in range(17)]


@pytest.mark.parametrize("inputs", [1, 2, 3])
def test_rows_per_partition_are_published_while_routing(inputs):
    """Live RepartitionOutput events (the first routed batch always sends one) never exceed
    the final counts; the last event is the final one, with bytes per partition too."""
    ctx, events = _ctx(batch_size=64, observe=True)
    source = Batches(inputs, 50, 7)
    plan = RepartitionExec(source, "hash", 4, (KEY,))
    _read_all(plan, ctx)
    ctx.events.close()
    published = [e for e in events if isinstance(e, RepartitionOutput)]
    live, final = [e for e in published if not e.final], published[-1]
    assert final.final and sum(e.final for e in published) == 1
    assert list(final.rows_per_partition) == _expected_rows_per_partition(source, 4)
    assert len(final.bytes_per_partition) == 4 and sum(final.bytes_per_partition) > 0
    assert live, "the first routed batch publishes the rows per partition so far"
    for event in live:
        assert all(r <= f for r, f in zip(event.rows_per_partition, final.rows_per_partition))
        assert all(b <= f for b, f in zip(event.bytes_per_partition,
                                          final.bytes_per_partition))
    # routing on the producer threads is the repartition's own compute
    assert ctx.metrics.total(plan.operator_id, "elapsed_compute") > 0


@pytest.mark.parametrize("make", [
    lambda v: pa.array(v),
    lambda v: pa.array(v, pa.large_string()),
    lambda v: pa.array(v).slice(3, 500),
    lambda v: pa.chunked_array([pa.array(v[:10]), pa.array(v[10:])]),
    lambda v: pa.array([s.encode() if s is not None else None for s in v], pa.binary()),
], ids=["string", "large_string", "sliced", "chunked", "binary"])
def test_short_strings_hash_row_by_row_as_the_dictionary_path_does(make, monkeypatch):
    """Short strings skip the dictionary: their hash, hence their partition, is the same."""
    import plansight.engine.physical.repartition as repartition

    rng = np.random.default_rng(4)
    values = [None if rng.random() < 0.1 else "" if rng.random() < 0.05 else
              f"c{rng.integers(0, 300):05d}" for _ in range(1000)]
    column = make(values)
    ints = pa.array(rng.integers(0, 7, len(column)))
    assert repartition._short_strings(column)
    row_by_row = hash_rows([column]), hash_rows([ints, column])
    monkeypatch.setattr(repartition, "_short_strings", lambda array: False)
    assert (hash_rows([column]) == row_by_row[0]).all()
    assert (hash_rows([ints, column]) == row_by_row[1]).all()


def test_long_strings_keep_the_dictionary_path():
    import plansight.engine.physical.repartition as repartition

    long = pa.array(["x" * 100, "y" * 100, None])
    assert not repartition._short_strings(long)
    assert not repartition._short_strings(pa.array([1, 2]))
    assert not repartition._short_strings(pa.array([], pa.string()))
