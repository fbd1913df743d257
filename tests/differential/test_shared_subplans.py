"""Aggregates that a query computes twice (a CTE named twice, the same subquery written
twice) run once, through SharedExec, against DuckDB: NULL group keys, empty inputs, a CTE
joined to itself, read three times, and read by both sides of a join, at partitions
1/2/3/8 and batch sizes 1/3/7/8192; and what is not shared (differing filters, random())."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.context import TaskContext
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.physical.scan import DataSourceExec
from plansight.engine.physical.shared import SharedExec
from tests.differential.harness import check


def _tables() -> dict[str, pa.Table]:
    r = np.random.default_rng(3)
    n = 400
    k = [None if i % 17 == 0 else int(v) for i, v in enumerate(r.integers(0, 30, n))]
    return {"t": pa.table({"k": pa.array(k, pa.int64()),
                           "g": pa.array(r.integers(0, 4, n), pa.int32()),
                           "v": pa.array(r.integers(-50, 100, n), pa.int64())}),
            "s": pa.table({"k": pa.array(range(0, 40, 2), pa.int64()),
                           "name": [f"s{i}" for i in range(20)]})}


REVENUE = "WITH r AS (SELECT k, sum(v) AS total FROM t GROUP BY k) "
QUERIES = [
    # TPC-H Q15's shape: the top group, found through the same CTE twice
    REVENUE + "SELECT s.name, r.k, r.total FROM s, r WHERE s.k = r.k "
    "AND r.total = (SELECT max(total) FROM r)",
    REVENUE + "SELECT k, total FROM r WHERE total > (SELECT avg(total) FROM r)",
    # joined to itself (both sides of one join read it), NULL keys never match
    REVENUE + "SELECT a.k, a.total, b.total FROM r a JOIN r b ON a.k = b.k + 1",
    REVENUE + "SELECT a.k, b.k FROM r a LEFT JOIN r b ON a.total = b.total AND a.k < b.k",
    # read three times
    REVENUE + "SELECT k FROM r WHERE total > 100 UNION ALL SELECT k FROM r WHERE total < 0 "
    "UNION ALL SELECT count(*) FROM r",
    # empty: the filter keeps nothing
    "WITH r AS (SELECT k, sum(v) AS total FROM t WHERE v > 1000 GROUP BY k) "
    "SELECT (SELECT count(*) FROM r), (SELECT max(total) FROM r)",
    # the same aggregate subquery written twice, no CTE
    "SELECT g, v FROM t WHERE v > (SELECT avg(v) FROM t) AND v < (SELECT avg(v) FROM t) + 20",
    # grouped by an expression and with NULL groups
    "WITH c AS (SELECT g % 2 AS p, k, count(*) AS n FROM t GROUP BY g % 2, k) "
    "SELECT x.p, x.k, x.n, y.n FROM c x JOIN c y ON x.k = y.k AND x.p <> y.p",
    # two aggregates that differ (a filter): each its own
    "SELECT (SELECT sum(v) FROM t WHERE g = 1), (SELECT sum(v) FROM t WHERE g = 2)",
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_shared_subplans_match_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)


def _session(partitions: int = 2) -> ps.Session:
    session = ps.Session(target_partitions=partitions)
    for name, table in _tables().items():
        session.register(name, table)
    return session


def _shared(plan) -> list[SharedExec]:
    return [op for _, op in plan.walk() if isinstance(op, SharedExec)]


def test_a_cte_named_twice_scans_its_table_once():
    query = _session().sql(QUERIES[0])
    assert [op.result.readers for op in _shared(query.physical)] == [2, 2]
    run = query.execute()
    scans = {op.operator_id for _, op in run.plan.walk() if isinstance(op, DataSourceExec)
             and op.source is not None and "k" in op.columns and "v" in op.columns}
    read = sum(run.metrics.total(i, "output_rows") for i in scans)
    assert read == 400  # t once, not twice


@pytest.mark.parametrize("sql", [QUERIES[-1], "WITH r AS (SELECT k, sum(v + random()) AS x "
                                               "FROM t GROUP BY k) SELECT (SELECT max(x) FROM r), "
                                               "(SELECT min(x) FROM r)"])
def test_differing_or_volatile_aggregates_are_not_shared(sql):
    assert _shared(_session().sql(sql).physical) == []


def _run(plan, ctx) -> int:
    return sum(b.num_rows for p in range(plan.output_partitioning().count)
               for b in plan.execute(p, ctx))


def test_kept_batches_are_released_by_the_last_reader_or_at_the_end():
    session = _session(3)
    every_reader = session.sql(QUERIES[2])
    ctx = TaskContext(every_reader.config, MemoryPool(None))
    assert _run(every_reader.physical, ctx) > 0
    assert ctx.memory_pool.reserved == 0  # both readers read every partition
    # a reader that never runs (a branch a limit never reaches): the end of the query
    one = _shared(every_reader.physical)[0]
    ctx = TaskContext(every_reader.config, MemoryPool(None))
    assert _run(one, ctx) > 0
    assert ctx.memory_pool.reserved > 0  # kept for the other reader
    ctx.cleanup()
    assert ctx.memory_pool.reserved == 0


def test_one_run_executes_one_copy_of_the_shared_subplan(monkeypatch):
    """Each reader holds its own copy of the subplan; a run must execute one of them. Two
    copies, each serving some partitions, left each copy's exchange producers blocked on
    queues only the other copy's readers would drain: a hang at 8 partitions (fuzz seed
    9001)."""
    from plansight.engine.physical.repartition import RepartitionExec
    from plansight.engine.physical.shared import SharedResult

    query = _session(8).sql(QUERIES[0])
    readers = _shared(query.physical)
    assert len({id(r.input) for r in readers}) == 2  # the premise: two copies
    started = set()
    start = RepartitionExec._start

    def record(self, ctx):
        started.add(id(self))
        return start(self, ctx)

    monkeypatch.setattr(RepartitionExec, "_start", record)
    for _ in range(5):
        started.clear()
        run = _session(8).sql(QUERIES[0]).execute()
        shared = {id(op) for r in _shared(run.plan) for _, op in r.input.walk()
                  if isinstance(op, RepartitionExec)}
        assert len(shared) == 2 and len(started & shared) == 1
    # the first reader's copy, whichever reader or partition comes first
    result, ctx = SharedResult(2), TaskContext(query.config, MemoryPool(None))
    first, second = object(), object()
    assert result.partition(ctx, 5, first)[1] is first
    assert result.partition(ctx, 0, second)[1] is first
    ctx.cleanup()


def _refuse_shared(monkeypatch) -> None:
    """A pool that refuses every SharedExec reservation (and grants the rest as before)."""
    grant = MemoryPool._grant

    def refuse(self, reservation, additional):
        if reservation.consumer.startswith("SharedExec") and additional > 0:
            return False
        return grant(self, reservation, additional)

    monkeypatch.setattr(MemoryPool, "_grant", refuse)


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", [QUERIES[0], QUERIES[2], QUERIES[4], QUERIES[5], QUERIES[6]])
def test_refused_shared_batches_spill_and_every_reader_replays_them(
        sql, partitions, batch_size, monkeypatch):
    """The pool refuses to keep the shared batches: they go to a spill file that every
    reader replays, and the answer is DuckDB's (it failed with ResourcesExhausted)."""
    _refuse_shared(monkeypatch)
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)


def test_a_small_memory_limit_spills_the_shared_result_instead_of_failing():
    """A CTE of 1,500 groups read twice under 40 KB: its SharedExec is refused part way
    through a partition (ResourcesExhausted before), spills what it kept and the rest, and
    the query answers as DuckDB does."""
    r = np.random.default_rng(5)
    n = 3000
    k = [None if i % 17 == 0 else int(v) for i, v in enumerate(r.integers(0, 1500, n))]
    tables = {"t": pa.table({"k": pa.array(k, pa.int64()),
                             "v": pa.array(r.integers(-50, 100, n), pa.int64())})}
    for partitions in (1, 3):
        session = ps.Session(target_partitions=partitions, memory_limit="40KB")
        session.register("t", tables["t"])
        run = session.sql(QUERIES[1]).execute()
        assert any(operator == "SharedExec" for operator, *_ in run.spills)
        check(QUERIES[1], tables, target_partitions=partitions, memory_limit="40KB")


def test_a_spilled_shared_partition_is_deleted_by_the_last_reader_or_at_the_end(monkeypatch):
    from plansight.engine.exec.spill import spill_manager

    _refuse_shared(monkeypatch)
    session = _session(3)
    every_reader = session.sql(QUERIES[2])
    ctx = TaskContext(every_reader.config, MemoryPool(None))
    assert _run(every_reader.physical, ctx) > 0
    assert spill_manager(ctx).history  # it spilled
    assert spill_manager(ctx).live_files() == [] and ctx.memory_pool.reserved == 0
    ctx.cleanup()
    # one reader of two: the file waits for the other until the end of the query
    one = _shared(every_reader.physical)[0]
    ctx = TaskContext(every_reader.config, MemoryPool(None))
    assert _run(one, ctx) > 0
    assert spill_manager(ctx).live_files()
    ctx.cleanup()
    assert spill_manager(ctx).live_files() == [] and ctx.memory_pool.reserved == 0


def test_a_later_reader_raises_the_first_readers_error(monkeypatch):
    """A reader that finds its partition failed raises the error that failed it, not a
    stand-in: both readers' errors race to the query's error slot, and at one partition the
    stand-in "a shared subplan failed in another reader" sometimes won (fuzz seed 9841,
    query 3185)."""
    from plansight.engine.errors import ExecutionError

    query = _session(1).sql(QUERIES[2])
    first, second = _shared(query.physical)
    ctx = TaskContext(query.config, MemoryPool(None))

    def overflow(self, partition, ctx):
        raise ExecutionError("Overflow in multiplication of BIGINT, BIGINT")
        yield

    monkeypatch.setattr(type(first.input), "execute", overflow)
    for reader in (first, second):
        with pytest.raises(ExecutionError, match="Overflow in multiplication"):
            _run(reader, ctx)
    ctx.cleanup()
