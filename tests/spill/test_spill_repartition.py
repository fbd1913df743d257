"""RepartitionExec: output queues over their reservation spill, each partition stays FIFO."""

from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.events import EventBus, ReservationChanged, SpillRead, SpillWritten
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.logical.expr import Column
from plansight.engine.physical.plan import ExecutionPlan, Partitioning
from plansight.engine.physical.repartition import RepartitionExec

SCHEMA = pa.schema([("seq#1", pa.int64()), ("key#2", pa.int64()), ("pad#3", pa.string())])
BATCH_ROWS = 1000


class Source(ExecutionPlan):
    """``inputs`` partitions of ``batches`` batches each; seq numbers the rows per input."""

    name = "Source"

    def __init__(self, inputs: int, batches: int):
        super().__init__(SCHEMA)
        self.inputs, self.batches = inputs, batches

    def output_partitioning(self):
        return Partitioning(self.inputs)

    def _execute(self, partition, ctx):
        for b in range(self.batches):
            seq = np.arange(b * BATCH_ROWS, (b + 1) * BATCH_ROWS) + partition * 10**9
            yield pa.record_batch({"seq#1": seq, "key#2": seq % 97,
                                   "pad#3": pa.array(["x" * 20] * BATCH_ROWS)}, schema=SCHEMA)


def _read_partitions(plan, ctx, delay=0.0):
    """Each output partition read on its own thread (slowly), in order."""
    results = {}

    def read(p):
        batches = []
        for batch in plan.execute(p, ctx):
            batches.append(batch)
            time.sleep(delay)
        results[p] = batches

    threads = [threading.Thread(target=read, args=(p,))
               for p in range(plan.output_partitioning().count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return [results[p] for p in range(len(threads))]


def _ctx(tmp_path, limit, events):
    """Spill events come through the bus (close it before reading them); reservation
    changes straight from the pool, each one as it happens."""
    bus = EventBus([events.append] if events is not None else [])
    ctx = TaskContext(SessionConfig(spill_dir=str(tmp_path)), MemoryPool(limit), events=bus)
    if events is not None:
        ctx.memory_pool.listeners.append(lambda r, total: events.append(
            ReservationChanged(r.consumer, r.size, total)))
    return ctx


@pytest.mark.parametrize("mode", ["round_robin", "hash"])
def test_queues_spill_and_keep_each_partition_in_order(tmp_path, mode):
    events = []
    one_batch = Source(1, 1).execute(0, _ctx(tmp_path, None, None))
    limit = 3 * next(one_batch).nbytes  # three batches for all queues together
    ctx = _ctx(tmp_path, limit, events)
    exprs = (Column(2, "key", pa.int64()),) if mode == "hash" else ()
    plan = RepartitionExec(Source(2, 40), "hash" if mode == "hash" else "round_robin", 3, exprs)
    outputs = _read_partitions(plan, ctx, delay=0.002)
    ctx.events.close()  # every spill event delivered
    rows = pa.Table.from_batches([b for out in outputs for b in out], schema=SCHEMA)
    assert sorted(rows.column("seq#1").to_pylist()) == \
        sorted(list(range(40 * BATCH_ROWS)) + [10**9 + i for i in range(40 * BATCH_ROWS)])
    for out in outputs:  # FIFO per input within every output partition
        seq = pa.Table.from_batches(out, schema=SCHEMA).column("seq#1").to_numpy()
        for source in (seq[seq < 10**9], seq[seq >= 10**9]):
            assert (np.diff(source) > 0).all()
    written = [e for e in events if isinstance(e, SpillWritten)]
    assert written and all(e.operator == "RepartitionExec" for e in written)
    assert len([e for e in events if isinstance(e, SpillRead)]) == len(written)
    totals = ctx.metrics.snapshot()[plan.operator_id]
    assert totals["spill_count"] == len(written) and totals["spilled_rows"] > 0
    assert max(e.pool_total for e in events if isinstance(e, ReservationChanged)) <= limit
    assert ctx.memory_pool.reserved == 0
    assert list(ctx.spill_dir().iterdir()) == []
    ctx.cleanup()


def test_a_reader_that_stops_early_releases_its_queue(tmp_path):
    events = []
    ctx = _ctx(tmp_path, 200_000, events)
    plan = RepartitionExec(Source(2, 60), "round_robin", 2)
    first = plan.execute(0, ctx)
    next(first)
    first.close()  # e.g. a LIMIT above: the producers must not block on this queue
    rest = list(plan.execute(1, ctx))
    assert sum(b.num_rows for b in rest) == 60 * BATCH_ROWS
    ctx.events.close()
    assert ctx.memory_pool.reserved == 0
    assert list(ctx.spill_dir().iterdir()) == []
    ctx.cleanup()


def test_spilling_queues_under_sql(tmp_path):
    """A hash repartition under a pool far below the data, through a query (a DISTINCT
    aggregate cannot pre-aggregate, so every row crosses the repartition)."""
    n = 400_000
    rng = np.random.default_rng(3)
    table = pa.table({"k": rng.integers(0, 1000, n), "v": rng.random(n)})
    sql = "SELECT k, count(DISTINCT v) AS d, max(v) AS m FROM t GROUP BY k"

    def run(limit):
        session = ps.Session(target_partitions=3, memory_limit=limit, batch_size=16384,
                             spill_dir=str(tmp_path))
        session.register("t", table)
        return session.sql(sql).execute()

    limited = run("2MB")
    expected = run("8GB").result.sort_by([("k", "ascending")])
    assert limited.result.sort_by([("k", "ascending")]).equals(expected)
    assert "RepartitionExec" in limited.explain_analyze()
    repartition = next(line for line in limited.explain_analyze().splitlines()
                       if "RepartitionExec" in line)
    assert "spill_count=" in repartition
    assert list(tmp_path.iterdir()) == []
