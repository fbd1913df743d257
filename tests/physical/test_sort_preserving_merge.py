"""SortPreservingMergeExec and merge_sorted: vectorized k-way merge of sorted streams."""

from __future__ import annotations

import math
import random

import numpy as np
import pyarrow as pa
import pytest

from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.logical.expr import Column, SortKey
from plansight.engine.physical.plan import ExecutionPlan, Partitioning, collect_partition
from plansight.engine.physical.sorts.merge import merge_sorted
from plansight.engine.physical.sorts.permutation import sort_indices
from plansight.engine.physical.sorts.sort_preserving_merge import SortPreservingMergeExec
from plansight.errors import PlanError

K = Column(1, "k", pa.int64())
S = Column(2, "s", pa.string())
F = Column(3, "f", pa.float64())
TAG = Column(4, "tag", pa.int64())
SCHEMA = pa.schema([("k#1", pa.int64()), ("s#2", pa.string()), ("f#3", pa.float64()),
                    ("tag#4", pa.int64())])


class Partitions(ExecutionPlan):
    """A source whose partition p yields the given batches."""

    name = "Partitions"

    def __init__(self, partitions: list[list[pa.RecordBatch]], schema: pa.Schema = SCHEMA,
                 ordering=None):
        super().__init__(schema)
        self.partitions, self.ordering = partitions, ordering

    def output_partitioning(self):
        return Partitioning(len(self.partitions))

    def output_ordering(self):
        return self.ordering

    def _execute(self, partition, ctx):
        yield from self.partitions[partition]


def _ctx(limit=None) -> TaskContext:
    return TaskContext(SessionConfig(batch_size=7), MemoryPool(limit))


def _random_table(rng: random.Random, n: int, tag: int) -> pa.Table:
    def maybe(value):
        return None if rng.random() < 0.1 else value

    return pa.table({
        "k#1": [maybe(rng.randint(0, 5)) for _ in range(n)],
        "s#2": [maybe(rng.choice(["a", "b", "é", "zz", ""])) for _ in range(n)],
        "f#3": [maybe(rng.choice([0.5, -0.0, 0.0, math.nan, 2.0, -1.5])) for _ in range(n)],
        "tag#4": [tag * 1000 + i for i in range(n)],
    }, schema=SCHEMA)


def _sorted_streams(rng, keys, count, max_rows, max_batch):
    tables = []
    for tag in range(count):
        table = _random_table(rng, rng.randint(0, max_rows), tag)
        tables.append(table.take(sort_indices(table, keys)))
    streams = []
    for table in tables:
        batches, offset = [], 0
        while offset < table.num_rows:
            size = rng.randint(0, max_batch)
            batches.append(table.slice(offset, size).to_batches()[0] if size else
                           pa.RecordBatch.from_pylist([], schema=SCHEMA))
            offset += size
        streams.append(batches)
    return tables, streams


def _tags(table: pa.Table) -> list[int]:
    """Row identities in order (tables with NaN never compare equal)."""
    return table.column("tag#4").to_pylist()


def _expected(tables, keys, fetch=None):
    whole = pa.concat_tables(tables) if tables else SCHEMA.empty_table()
    whole = whole.take(sort_indices(whole, keys))  # stable: stream order, then input order
    return whole if fetch is None else whole.slice(0, fetch)


KEY_SETS = [
    [SortKey(K)],
    [SortKey(K, descending=True)],
    [SortKey(K, nulls_first=True), SortKey(S, descending=True)],
    [SortKey(S), SortKey(F, descending=True, nulls_first=True)],
    [SortKey(F), SortKey(K, descending=True)],
    [SortKey(F, descending=True), SortKey(S, nulls_first=True)],
]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("key_set", range(len(KEY_SETS)))
def test_merge_equals_a_stable_sort_of_the_streams(seed, key_set):
    rng = random.Random(seed * 100 + key_set)
    keys = KEY_SETS[key_set]
    tables, streams = _sorted_streams(rng, keys, rng.randint(1, 6), 60, 9)
    fetch = rng.choice([None, None, 0, 1, 17])
    got = pa.Table.from_batches(
        list(merge_sorted([iter(s) for s in streams], keys, SCHEMA, batch_size=5,
                          min_rows=rng.randint(1, 8), fetch=fetch)), schema=SCHEMA)
    assert _tags(got) == _tags(_expected(tables, keys, fetch))


def test_empty_streams_and_no_streams():
    keys = [SortKey(K)]
    assert list(merge_sorted([], keys, SCHEMA, batch_size=4)) == []
    assert list(merge_sorted([iter([]), iter([])], keys, SCHEMA, batch_size=4)) == []
    table = pa.table({"k#1": [1, 2], "s#2": ["a", "b"], "f#3": [1.0, 2.0], "tag#4": [0, 1]},
                     schema=SCHEMA)
    got = merge_sorted([iter([]), iter(table.to_batches()), iter([])], keys, SCHEMA,
                       batch_size=4)
    assert pa.Table.from_batches(list(got)).equals(table)


def test_ties_keep_stream_order():
    keys = [SortKey(K)]
    streams = [[pa.record_batch({"k#1": [1, 1, 2], "s#2": ["a"] * 3, "f#3": [0.0] * 3,
                                 "tag#4": [tag, tag, tag]}, schema=SCHEMA)] for tag in range(4)]
    got = pa.Table.from_batches(list(merge_sorted([iter(s) for s in streams], keys, SCHEMA,
                                                  batch_size=100, min_rows=1)))
    assert got.column("tag#4").to_pylist() == [0, 0, 1, 1, 2, 2, 3, 3, 0, 1, 2, 3]


def test_large_sorted_streams_merge_in_few_rounds_with_big_batches():
    rng = np.random.default_rng(0)
    keys = [SortKey(K)]
    tables = []
    for tag in range(5):
        values = np.sort(rng.integers(0, 10**6, 20_000))
        tables.append(pa.table({"k#1": values, "s#2": pa.nulls(20_000, pa.string()),
                                "f#3": np.zeros(20_000), "tag#4": np.full(20_000, tag)},
                               schema=SCHEMA))
    streams = [iter(t.to_batches(max_chunksize=1000)) for t in tables]
    batches = list(merge_sorted(streams, keys, SCHEMA, batch_size=4096, min_rows=4096))
    got = pa.Table.from_batches(batches)
    assert got.equals(_expected(tables, keys))
    assert np.mean([b.num_rows for b in batches]) > 1000


def test_exec_merges_partitions_with_fetch_and_releases_memory():
    rng = random.Random(3)
    keys = [SortKey(K, descending=True), SortKey(S)]
    tables, streams = _sorted_streams(rng, keys, 4, 50, 6)
    source = Partitions(streams, ordering=tuple(keys))
    for fetch in (None, 0, 3, 1000):
        merge = SortPreservingMergeExec(keys, source, fetch=fetch)
        ctx = _ctx()
        got = collect_partition(merge, 0, ctx)
        assert _tags(got) == _tags(_expected(tables, keys, fetch))
        assert ctx.memory_pool.reserved == 0
        assert ctx.memory_pool.peak > 0 or fetch == 0


def test_exec_declarations_and_explain():
    keys = [SortKey(K), SortKey(S, descending=True, nulls_first=True)]
    merge = SortPreservingMergeExec(keys, Partitions([[], []]), fetch=10)
    assert merge.output_partitioning().count == 1
    assert merge.output_ordering() == tuple(keys)
    assert merge.required_input_ordering() == [tuple(keys)]
    assert merge.display() == \
        "SortPreservingMergeExec: [k ASC NULLS LAST, s DESC NULLS FIRST], fetch=10"
    assert SortPreservingMergeExec(keys, Partitions([[]])).display().endswith("FIRST]")
    assert merge.with_new_children([Partitions([[]])]).fetch == 10
    with pytest.raises(PlanError):
        SortPreservingMergeExec([], Partitions([[]]))


def test_an_input_error_is_raised_and_threads_stop():
    class Failing(Partitions):
        def _execute(self, partition, ctx):
            yield self.partitions[0][0]
            if partition == 1:
                raise ValueError("boom")
            yield from self.partitions[0][1:]

    batch = pa.record_batch({"k#1": [1], "s#2": ["a"], "f#3": [0.0], "tag#4": [0]},
                            schema=SCHEMA)
    merge = SortPreservingMergeExec([SortKey(K)], Failing([[batch] * 50, []]))
    ctx = _ctx()
    with pytest.raises(ValueError, match="boom"):
        collect_partition(merge, 0, ctx)
    assert ctx.memory_pool.reserved == 0
