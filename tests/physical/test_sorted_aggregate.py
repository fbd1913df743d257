"""Sorted-input aggregation: groups stream out as soon as the next group starts, with the
same results as the hash aggregate (differential against DuckDB)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.functions.aggregate import AggregateSpec
from plansight.engine.logical.expr import Column, SortKey
from plansight.engine.physical.aggregates.aggregate import AggregateExec
from plansight.engine.physical.aggregates.sorted_groups import run_starts
from plansight.engine.physical.plan import ExecutionPlan, Partitioning
from tests.differential.harness import check
from tests.differential.tables import ALL

# every query groups an input sorted on its keys; the plan must stream (asserted below)
SORTED_QUERIES = [
    # NULL keys, every decomposable aggregate (state carried across batches)
    ("SELECT k, count(*), count(v), sum(v), avg(v), min(s), max(s), min(f), max(f), "
    "bool_and(b), bool_or(b), sum(dec), avg(dec), max(d), min(ts) "
    "FROM (SELECT * FROM t ORDER BY k) AS s GROUP BY k"),
    # descending, NULLs first, and aggregates that need the group's rows
    ("SELECT k, count(DISTINCT v), sum(DISTINCT v), avg(DISTINCT v), median(v), "
    "quantile_disc(v, 0.25), stddev(v), var_pop(f), string_agg(s, '|' ORDER BY s), product(v) "
    "FROM (SELECT * FROM t ORDER BY k DESC NULLS FIRST) AS s GROUP BY k"),
    # two keys in the other order than the sort, string and integer
    "SELECT s, k, count(*), sum(v) FROM (SELECT * FROM t ORDER BY k, s) AS x GROUP BY s, k",
    # the group keys are a prefix of a longer ordering
    ("SELECT k, min(v), max(v), count(*) FROM (SELECT * FROM t ORDER BY k, v DESC) AS x "
    "GROUP BY k"),
    # float keys: NaN groups with NaN, -0.0 with 0.0, NULL with NULL
    "SELECT x, count(*), sum(id) FROM (SELECT * FROM fl ORDER BY x) AS s GROUP BY x",
    # many groups spanning batches, date and string keys
    ("SELECT g, count(*), sum(y), avg(x), count(DISTINCT h) FROM (SELECT * FROM big ORDER BY g) "
    "AS s GROUP BY g"),
    "SELECT dt, h, count(*), max(y) FROM (SELECT * FROM big ORDER BY dt, h) AS s GROUP BY h, dt",
    # one group for the whole input, and an empty input
    ("SELECT k, count(*), sum(v), string_agg(s, ',' ORDER BY s) "
    "FROM (SELECT * FROM e ORDER BY k) AS s GROUP BY k"),
    "SELECT k, count(*), sum(v) FROM (SELECT * FROM t_empty ORDER BY k) AS s GROUP BY k",
]


@pytest.mark.parametrize("sql", SORTED_QUERIES)
def test_sorted_input_streams_instead_of_hashing(sql):
    for partitions in (1, 3):
        session = ps.Session(target_partitions=partitions)
        for name, table in ALL.items():
            session.register(name, table)
        assert "ordering_mode=Sorted" in session.sql(sql).explain()


def _batch_sizes(sql: str) -> list[int]:
    # the 5,000-row table at batch size 1 costs minutes and proves nothing the small ones
    # do not: 7 and 97 rows still cut through most of its ~100-row groups
    return [7, 97, 8192] if "big" in sql else [1, 3, 7, 8192]


@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql, batch_size", [(q, b) for q in SORTED_QUERIES
                                             for b in _batch_sizes(q)])
def test_sorted_aggregation_matches_duckdb(sql, partitions, batch_size):
    check(sql, ALL, target_partitions=partitions, batch_size=batch_size)


def test_unsorted_or_other_ordering_keeps_the_hash_aggregate():
    session = ps.Session(target_partitions=1)
    session.register("t", ALL["t"])
    assert "ordering_mode" not in session.sql("SELECT k, count(*) FROM t GROUP BY k").explain()
    # sorted by v, then k: groups of k are not contiguous
    plan = session.sql("SELECT k, count(*) FROM (SELECT * FROM t ORDER BY v, k) AS s "
                       "GROUP BY k").explain()
    assert "ordering_mode" not in plan
    # sorted by k only, grouped by (k, v): a k-run holds several groups
    plan = session.sql("SELECT k, v, count(*) FROM (SELECT * FROM t ORDER BY k) AS s "
                       "GROUP BY k, v").explain()
    assert "ordering_mode" not in plan


def test_runs_compare_nulls_and_nans_as_equal():
    keys = [pa.array([None, None, 1.0, float("nan"), float("nan"), -0.0, 0.0, None])]
    assert run_starts(keys, None).tolist() == [True, False, True, True, False, True, False,
                                               True]
    # the row before the batch: continuing its NULL group is no new group
    assert run_starts([pa.array([None, 2.0])], [pa.array([None], pa.float64())]).tolist() == \
        [False, True]


# ----------------------------------------------------------------------------- streaming

K = Column(1, "k", pa.int64())
V = Column(2, "v", pa.int64())
SCHEMA = pa.schema([("k#1", pa.int64()), ("v#2", pa.int64())])


class RecordingSource(ExecutionPlan):
    """A sorted source that records how many of its batches have been pulled."""

    name = "RecordingSource"

    def __init__(self, batches: list[pa.RecordBatch]):
        super().__init__(SCHEMA)
        self.batches, self.pulled = batches, 0

    def output_partitioning(self):
        return Partitioning(1)

    def output_ordering(self):
        return (SortKey(K),)

    def _execute(self, partition, ctx):
        for batch in self.batches:
            self.pulled += 1
            yield batch


def _batches(keys: list[int], size: int) -> list[pa.RecordBatch]:
    table = pa.table({"k#1": pa.array(keys, pa.int64()),
                      "v#2": pa.array(range(len(keys)), pa.int64())})
    return table.to_batches(max_chunksize=size)


def _aggregate(source: ExecutionPlan, func: str, distinct: bool = False) -> AggregateExec:
    spec = AggregateSpec(func, "v#2", "out#3", pa.int64(), distinct)
    schema = pa.schema([("k#1", pa.int64()), ("out#3", pa.int64())])
    return AggregateExec(source, [K], [spec], schema)


@pytest.mark.parametrize("func, distinct", [("sum", False), ("count", True)])
def test_groups_are_emitted_before_the_input_ends(func, distinct):
    keys = np.repeat(np.arange(100), 10).tolist()  # 100 groups of 10 rows
    source = RecordingSource(_batches(keys, 7))
    plan = _aggregate(source, func, distinct)
    assert "ordering_mode=Sorted" in plan.display()
    pool = MemoryPool(None)
    ctx = TaskContext(SessionConfig(batch_size=8192), pool)
    stream = plan.execute(0, ctx)
    first = next(stream)
    assert source.pulled < 5 and first.column(0).to_pylist()[0] == 0
    rest = list(stream)
    assert source.pulled == len(source.batches)
    out = pa.Table.from_batches([first] + rest)
    assert out.column(0).to_pylist() == list(range(100))
    expected = [10] * 100 if distinct else [sum(range(10 * g, 10 * g + 10)) for g in range(100)]
    assert out.column(1).to_pylist() == expected
    assert pool.reserved == 0


def test_one_group_spanning_every_batch_carries_one_state_row_not_its_rows():
    keys = [5] * 5000  # 80 kB of input; the pool allows 16 kB
    plan = _aggregate(RecordingSource(_batches(keys, 100)), "sum")
    pool = MemoryPool(16_000)
    ctx = TaskContext(SessionConfig(batch_size=8192), pool)
    out = pa.Table.from_batches(list(plan.execute(0, ctx)))
    assert out.to_pydict() == {"k#1": [5], "out#3": [sum(range(5000))]}
    # a DISTINCT count must hold the open group's rows: they are reserved, and refused here
    distinct = _aggregate(RecordingSource(_batches(keys, 100)), "count", distinct=True)
    with pytest.raises(ps.ResourcesExhausted):
        list(distinct.execute(0, ctx))
    assert pool.reserved == 0
