"""QueryMonitor: its snapshot mirrors the run's metrics; widget refreshes are rate-limited."""

from __future__ import annotations

import doctest
import importlib
import time

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.events import BatchProduced, OperatorStarted, QueryStarted
from plansight.errors import PlanError
from plansight.widgets.plan_view import QueryMonitor, plan_rows, render_html, render_text


def chunked(n: int, chunk: int) -> pa.Table:
    table = pa.table({"k": [i % 100 for i in range(n)], "v": list(range(n))})
    return pa.Table.from_batches(table.to_batches(max_chunksize=chunk))


def test_final_snapshot_matches_metrics():
    session = ps.Session(target_partitions=4)
    session.register("a", chunked(10_000, 1000))
    query = session.sql("SELECT k, sum(v) AS s FROM a GROUP BY k")
    monitor = QueryMonitor(query, live=False, show=False)
    run = monitor.run()
    snap = monitor.snapshot()
    assert snap.status == "finished" and snap.result_rows == run.result.num_rows == 100
    metrics = run.ctx.metrics.snapshot()
    for _, op in plan_rows(run.plan):
        state = snap.operators[op.operator_id]
        assert state.output_rows == metrics[op.operator_id]["output_rows"]
        assert state.output_batches == metrics[op.operator_id]["output_batches"]
        assert len(state.finished) == len(state.started) > 0
    # the hash repartition reports how its rows were spread
    ((operator_id, rows),) = snap.repartitions.items()
    assert sum(rows) == metrics[operator_id]["output_rows"] > 0 and len(rows) == 4
    assert snap.pool_peak > 0
    text = render_text(snap, run.plan)
    assert "RepartitionExec" in text and "rows per partition" in text
    html = render_html(snap, run.plan)
    assert "RepartitionExec" in html and "10,000" in html
    assert "interrupt the kernel" not in html  # the hint shows only while running
    from dataclasses import replace

    assert "interrupt the kernel" in render_html(replace(snap, status="running"), run.plan)


def test_many_batches_bounded_refreshes():
    session = ps.Session(target_partitions=2, batch_size=50)
    session.register("a", pa.table({"k": [i % 10 for i in range(100_000)],
                                    "v": list(range(100_000))}))
    query = session.sql("SELECT k, v + 1 AS w FROM a WHERE v % 3 <> 0")
    interval = 0.05
    monitor = QueryMonitor(query, min_interval=interval, live=True, show=False)
    start = time.perf_counter()
    run = monitor.run()
    elapsed = time.perf_counter() - start
    batches = run.ctx.metrics.snapshot()[run.plan.operator_id]["output_batches"]
    assert batches > 1000
    # one refresh per interval at most, plus the final one
    assert 1 <= monitor.refresh_count <= elapsed / interval + 2
    # the widget ends on the final state
    assert "finished" in monitor.widget.value
    assert f"{run.result.num_rows:,}" in monitor.widget.value


def test_observer_only_records():
    """Engine threads call the observer; it must not touch the widget."""
    session = ps.Session(target_partitions=1)
    query = session.sql("SELECT 1 AS x")
    monitor = QueryMonitor(query, live=False, show=False)
    monitor(QueryStarted("SELECT 1"))
    monitor(OperatorStarted(1, "X", 0))
    monitor(BatchProduced(1, 0, 5, 40))
    snap = monitor.snapshot()
    assert snap.status == "running" and snap.operators[1].output_rows == 5
    assert monitor.refresh_count == 0 and monitor.widget is None


def test_error_in_worker_is_reraised():
    session = ps.Session(target_partitions=1)
    query = session.sql("SELECT 1 AS x")

    def failing(observer=None):
        raise PlanError("bad")

    query.execute = failing
    with pytest.raises(PlanError, match="bad"):
        QueryMonitor(query, live=False, show=False).run()


def test_doctests():
    module = importlib.import_module("plansight.widgets.plan_view")
    assert doctest.testmod(module).failed == 0
