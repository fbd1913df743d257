"""External sort under a memory limit far below the data: same rows as an unlimited run."""

from __future__ import annotations

import threading

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.events import ReservationChanged, SpillRead, SpillWritten
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.exec.spill import SpillWriter
from plansight.engine.logical.expr import Column, SortKey
from plansight.engine.physical.plan import collect_partition
from plansight.engine.physical.sorts.sort import SortExec
from plansight.engine.physical.values import ValuesExec
from plansight.errors import Cancelled, ExecutionError, ResourcesExhausted
from tests.session_defaults import session_defaults

LIMIT = 8_000_000
ROWS = 4_200_000  # ~100 MB: 3 int64/float64 columns


@pytest.fixture(scope="module")
def big() -> pa.Table:
    rng = np.random.default_rng(42)
    table = pa.table({"k": rng.integers(0, 5_000, ROWS),  # many ties: checks stability
                      "v": rng.random(ROWS),
                      "id": np.arange(ROWS)})
    assert table.nbytes >= 100_000_000
    return table


def _session(table, tmp_path, limit=LIMIT, partitions=1) -> ps.Session:
    s = ps.Session(target_partitions=partitions, memory_limit=limit, batch_size=65536,
                   spill_dir=str(tmp_path))
    s.register("big", table)
    return s


class Recorder:
    """Observer keeping the pool total and the spill events."""

    def __init__(self):
        self.max_total = 0
        self.spills_written = self.spills_read = 0

    def __call__(self, event):
        if isinstance(event, ReservationChanged):
            # pool_peak: exact even when the observer lagged and got only the latest
            # change per consumer
            self.max_total = max(self.max_total, event.pool_total, event.pool_peak)
        elif isinstance(event, SpillWritten):
            self.spills_written += 1
        elif isinstance(event, SpillRead):
            self.spills_read += 1


def _session_usable(s: ps.Session) -> bool:
    got = s.sql("SELECT id, k FROM big WHERE id = 7 ORDER BY k").to_arrow()
    return got.column("id").to_pylist() == [7]


def _spill_totals(run) -> dict[str, float]:
    totals = {"spill_count": 0, "spilled_bytes": 0, "spilled_rows": 0}
    for metrics in run.ctx.metrics.snapshot().values():
        for name in totals:
            totals[name] += metrics.get(name, 0)
    return totals


@pytest.fixture(scope="module")
def unlimited(big, tmp_path_factory):
    s = _session(big, tmp_path_factory.mktemp("unlimited"), limit="64GB")
    return s.sql("SELECT k, v, id FROM big ORDER BY k").to_arrow()


def test_sort_spills_and_returns_the_unlimited_result(big, unlimited, tmp_path):
    s = _session(big, tmp_path)
    recorder = Recorder()
    run = s.sql("SELECT k, v, id FROM big ORDER BY k").execute(observer=recorder)
    assert run.result.equals(unlimited)  # ties in input order: the merge is stable
    totals = _spill_totals(run)
    assert totals["spill_count"] > 0 and totals["spilled_rows"] >= ROWS
    assert totals["spilled_bytes"] > 0
    assert "spill_count=" in run.explain_analyze()
    assert recorder.spills_written == totals["spill_count"]
    assert recorder.spills_read == recorder.spills_written
    assert 0 < recorder.max_total <= LIMIT
    assert run.ctx.memory_pool.reserved == 0
    assert list(tmp_path.iterdir()) == []


def test_descending_multi_key_sort_on_two_partitions(big, tmp_path):
    sql = "SELECT k, v, id FROM big WHERE id % 2 = 0 ORDER BY k DESC, v"
    expected = _session(big, tmp_path, limit="64GB", partitions=2).sql(sql).to_arrow()
    recorder = Recorder()
    run = _session(big, tmp_path, partitions=2).sql(sql).execute(observer=recorder)
    assert run.result.equals(expected)
    assert _spill_totals(run)["spill_count"] > 0
    assert recorder.max_total <= LIMIT
    assert list(tmp_path.iterdir()) == []


def test_top_k_never_spills(big, unlimited, tmp_path):
    run = _session(big, tmp_path).sql("SELECT k, v, id FROM big ORDER BY k LIMIT 1000").execute()
    assert run.result.equals(unlimited.slice(0, 1000))
    assert _spill_totals(run)["spill_count"] == 0


@pytest.mark.parametrize("partitions", [1, 2, 6])
def test_spilled_sort_matches_duckdb_with_nulls_strings_and_ties(tmp_path, partitions):
    rng = np.random.default_rng(7)
    n = 300_000
    k = pa.array(rng.integers(0, 50, n), mask=rng.random(n) < 0.05)
    s_values = pa.array([f"s{x:04d}" for x in rng.integers(0, 3000, n)],
                        mask=rng.random(n) < 0.05)
    f = pa.array(rng.choice([0.5, -1.0, 2.25, np.nan], n), mask=rng.random(n) < 0.05)
    table = pa.table({"k": k, "s": s_values, "f": f, "id": np.arange(n)})
    sql = ("SELECT k, s, f, id FROM t ORDER BY k DESC NULLS FIRST, s NULLS FIRST, "
           "f DESC, id")
    session = ps.Session(target_partitions=partitions, memory_limit="1MB", batch_size=65536,
                         spill_dir=str(tmp_path))
    session.register("t", table)
    run = session.sql(sql).execute()
    assert _spill_totals(run)["spill_count"] > 0
    connection = duckdb.connect()
    connection.register("t", table)
    expected = connection.sql(sql).to_arrow_table()
    got = run.result
    for name in ("k", "s", "id"):
        assert got.column(name).to_pylist() == expected.column(name).to_pylist()
    assert list(tmp_path.iterdir()) == []


def test_many_runs_merge_in_levels(monkeypatch):
    session_defaults(monkeypatch, spill_merge_fan_in=3)
    rng = np.random.default_rng(1)
    n = 40_000
    table = pa.table({"k#1": rng.integers(0, 100, n), "id#2": np.arange(n)})
    keys = [SortKey(Column(1, "k", pa.int64()), descending=True)]
    config = SessionConfig(batch_size=1000)
    ctx = TaskContext(config, MemoryPool(60_000))
    got = collect_partition(SortExec(keys, ValuesExec(table)), 0, ctx)
    expected = table.take(np.argsort(-table.column("k#1").to_numpy(), kind="stable"))
    assert got.equals(expected)
    metrics = ctx.metrics.partitions(max(op for op in ctx.metrics.snapshot()))[0]
    assert metrics["spill_count"] > 3 * 3  # runs, plus the runs written by merge levels
    assert metrics["spilled_rows"] > n
    assert ctx.memory_pool.reserved == 0 and ctx.memory_pool.peak <= 60_000
    assert list(ctx.spill_dir().iterdir()) == []
    ctx.cleanup()


def test_no_spill_file_remains_after_a_failure(big, tmp_path):
    s = _session(big, tmp_path)
    recorder = Recorder()
    sql = (f"SELECT k, id, CAST(CASE WHEN id = {ROWS - 1} THEN 'x' ELSE '1' END AS INTEGER) "
           "AS bad FROM big ORDER BY k")  # the last input row fails, after runs were spilled
    with pytest.raises(ExecutionError, match="Could not convert"):
        s.sql(sql).execute(observer=recorder)
    assert recorder.spills_written > 0
    assert list(tmp_path.iterdir()) == []
    assert _session_usable(s)


def test_an_interrupt_while_spilling_cancels_and_cleans_up(big, tmp_path, monkeypatch):
    s = _session(big, tmp_path)
    written = []
    finish = SpillWriter.finish

    def interrupting(writer):  # observers run on their own thread: interrupt in the engine
        written.append(finish(writer))
        if len(written) == 3:
            raise KeyboardInterrupt  # what a kernel interrupt looks like in the engine
        return written[-1]

    monkeypatch.setattr(SpillWriter, "finish", interrupting)
    with pytest.raises(Cancelled):
        s.sql("SELECT k, v, id FROM big ORDER BY v").execute()
    assert len(written) == 3 and all(not file.path.exists() for file in written)
    assert list(tmp_path.iterdir()) == []
    assert _session_usable(s)


def test_cancel_from_another_thread_is_prompt_and_cleans_up(big, tmp_path):
    """Prompt means within a batch or so of work, counted in rows read, not seconds."""
    s = _session(big, tmp_path)
    q = s.sql("SELECT k, v, id FROM big ORDER BY v")
    spilled = threading.Event()
    outcome = {}

    def observer(event):
        if isinstance(event, SpillWritten):
            spilled.set()

    def run():
        try:
            q.execute(observer=observer)
        except BaseException as error:  # noqa: BLE001 (checked below)
            outcome["error"] = error

    def rows_scanned() -> int:
        snapshot = q._ctx.metrics.snapshot()
        leaves = [op for op in _operators(q.physical) if not op.children()]
        return sum(snapshot.get(op.operator_id, {}).get("output_rows", 0) for op in leaves)

    thread = threading.Thread(target=run)
    thread.start()
    assert spilled.wait(60)
    q.cancel()
    scanned_at_cancel = rows_scanned()
    thread.join(30)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), Cancelled)
    # the scan stops within a couple of 65,536-row batches of the cancel, far short of the input
    assert rows_scanned() - scanned_at_cancel <= 2 * 65_536
    assert 0 < scanned_at_cancel and rows_scanned() < big.num_rows
    assert list(tmp_path.iterdir()) == []
    assert _session_usable(s)


def _operators(plan):
    yield plan
    for child in plan.children():
        yield from _operators(child)


def test_a_consumer_that_cannot_spill_fails_with_resources_exhausted(big, tmp_path):
    s = _session(big, tmp_path)
    # a nested-loop join's build side is held whole (a hash join's would spill)
    with pytest.raises(ResourcesExhausted,
                       match=r"NestedLoopJoinExec\[build\] could not reserve"):
        s.sql("SELECT a.id, b.v FROM big a JOIN big b ON a.id < b.id").to_arrow()
    assert list(tmp_path.iterdir()) == []
    assert _session_usable(s)
