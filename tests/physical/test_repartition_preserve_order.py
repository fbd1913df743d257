"""Order-preserving hash repartition: each output partition merges its per-input lanes, so a
sorted input stays sorted without a SortExec after the shuffle."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.logical.expr import Column, SortKey
from plansight.engine.physical.plan import ExecutionPlan, Partitioning
from plansight.engine.physical.repartition import RepartitionExec
from plansight.engine.physical.sorts.permutation import sort_indices
from plansight.errors import ExecutionError, PlanError
from tests.differential.harness import check
from tests.session_defaults import session_defaults

K = Column(1, "k", pa.int64())
S = Column(2, "s", pa.string())
TAG = Column(3, "tag", pa.int64())
SCHEMA = pa.schema([("k#1", pa.int64()), ("s#2", pa.string()), ("tag#3", pa.int64())])
ORDER = (SortKey(S, descending=True, nulls_first=True), SortKey(K))


class SortedPartitions(ExecutionPlan):
    """A source whose partition p yields the given batches, declared sorted by ORDER."""

    name = "SortedPartitions"

    def __init__(self, partitions: list[list[pa.RecordBatch]], fail_in: int | None = None):
        super().__init__(SCHEMA)
        self.partitions, self.fail_in = partitions, fail_in

    def output_partitioning(self):
        return Partitioning(len(self.partitions))

    def output_ordering(self):
        return ORDER

    def _execute(self, partition, ctx):
        for i, batch in enumerate(self.partitions[partition]):
            if partition == self.fail_in and i == 1:
                raise ExecutionError("boom in partition 1")
            yield batch


def _sorted_partition(rng: random.Random, rows: int, tag: int, batch_size: int):
    table = pa.table({
        "k#1": pa.array([None if rng.random() < 0.1 else rng.randint(0, 30)
                         for _ in range(rows)], pa.int64()),
        "s#2": pa.array([None if rng.random() < 0.1 else rng.choice("abcde")
                         for _ in range(rows)], pa.string()),
        "tag#3": pa.array([tag] * rows, pa.int64()),
    })
    table = table.take(sort_indices(table, list(ORDER)))
    return table.to_batches(max_chunksize=batch_size)


def _is_sorted(table: pa.Table) -> bool:
    return sort_indices(table, list(ORDER)).to_pylist() == list(range(table.num_rows)) or \
        table.take(sort_indices(table, list(ORDER))).select(["k#1", "s#2"]).equals(
            table.select(["k#1", "s#2"]))


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("inputs, outputs", [(2, 4), (3, 2), (1, 3)])
def test_every_output_partition_is_sorted_and_holds_its_rows(inputs, outputs, batch_size):
    rng = random.Random(inputs * 100 + outputs + batch_size)
    parts = [_sorted_partition(rng, rng.randint(0, 60), tag, batch_size) for tag in range(inputs)]
    source = SortedPartitions(parts)
    plan = RepartitionExec(source, "hash", outputs, (K,), preserve_order=True)
    assert plan.output_ordering() == ORDER
    pool = MemoryPool(None)
    ctx = TaskContext(SessionConfig(batch_size=batch_size), pool)
    streams = [plan.execute(p, ctx) for p in range(outputs)]
    results = [pa.Table.from_batches(list(s), schema=SCHEMA) for s in streams]
    everything = pa.concat_tables([pa.Table.from_batches(p, schema=SCHEMA) for p in parts])
    assert sum(r.num_rows for r in results) == everything.num_rows
    seen = {}
    for p, result in enumerate(results):
        assert _is_sorted(result)
        for key in set(result.column("k#1").to_pylist()):
            assert seen.setdefault(key, p) == p  # one key, one partition
    assert sorted(map(str, pa.concat_tables(results).to_pylist())) == \
        sorted(map(str, everything.to_pylist()))
    assert pool.reserved == 0


def test_an_error_in_one_input_reaches_the_readers():
    rng = random.Random(5)
    parts = [_sorted_partition(rng, 40, tag, 5) for tag in range(2)]
    plan = RepartitionExec(SortedPartitions(parts, fail_in=1), "hash", 2, (K,),
                           preserve_order=True)
    ctx = TaskContext(SessionConfig(batch_size=5), MemoryPool(None))
    with pytest.raises(ExecutionError, match="boom"):
        for p in range(2):
            list(plan.execute(p, ctx))


def test_preserving_order_needs_a_sorted_input():
    class Unsorted(SortedPartitions):
        def output_ordering(self):
            return None

    with pytest.raises(PlanError, match="sorted input"):
        RepartitionExec(Unsorted([[]]), "hash", 2, (K,), preserve_order=True)


# ----------------------------------------------------------------------------- EnsureRequirements

def _session(partitions: int) -> ps.Session:
    s = ps.Session(target_partitions=partitions)
    n = 5000
    s.register("t", pa.table({"p": [i % 7 for i in range(n)], "o": [i % 100 for i in range(n)],
                              "v": [float(i % 13) for i in range(n)]}))
    return s


# the second window needs Hash(p) and (p, o) order; the first delivers Hash(p, o), sorted
# (p, o, v)
STACKED = ("SELECT p, o, v, sum(v) OVER (PARTITION BY p, o ORDER BY v) AS b, "
           "count(*) OVER (PARTITION BY p ORDER BY o) AS a FROM t")


@pytest.fixture
def sorted_windows(monkeypatch):
    session_defaults(monkeypatch, window_executor="partition")


def test_sorted_input_is_repartitioned_preserving_order_instead_of_sorted_again(
        sorted_windows):
    plan = _session(2).sql(STACKED).explain()
    assert ("RepartitionExec: partitioning=Hash([p], 2), input_partitions=2, "
            "preserve_order=true, sort_exprs=[p ASC NULLS LAST, o ASC NULLS LAST, "
            "v ASC NULLS LAST]") in plan
    assert plan.count("SortExec") == 1  # the one under the first window only


def test_a_window_partitioned_on_a_subset_of_the_keys_needs_no_second_exchange(
        sorted_windows):
    plan = _session(2).sql("SELECT p, o, v, sum(v) OVER (PARTITION BY p ORDER BY o) AS a, "
                           "count(*) OVER (PARTITION BY p, o) AS b FROM t").explain()
    assert plan.count("RepartitionExec") == 1 and "Hash([p], 2)" in plan, plan


def test_unsorted_input_or_no_ordering_requirement_repartitions_plainly(sorted_windows):
    session = _session(2)
    plan = session.sql("SELECT p, o, count(*) OVER (PARTITION BY p, o) AS b FROM t").explain()
    assert "preserve_order" not in plan and "SortExec" in plan
    plan = session.sql("SELECT p, count(*) FROM (SELECT * FROM t ORDER BY p) AS s "
                       "GROUP BY p").explain()
    assert "preserve_order" not in plan


@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
def test_stacked_windows_match_duckdb(sorted_windows, partitions):
    table = _session(1).sql("SELECT * FROM t").to_arrow()
    nulls = table.set_column(0, "p", pa.array([None if i % 11 == 0 else x for i, x in
                                               enumerate(table.column("p").to_pylist())]))
    for batch_size in (7, 8192):
        check(STACKED + " ORDER BY p, o, v, a", {"t": nulls}, target_partitions=partitions,
              batch_size=batch_size)
