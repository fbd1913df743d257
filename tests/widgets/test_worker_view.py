"""The monitor's per-worker view, from TaskFinished events alone (no cluster needed)."""

from __future__ import annotations

import pyarrow as pa

import plansight as ps
from plansight.engine.exec.events import QueryFinished, QueryStarted, TaskFinished
from plansight.widgets.plan_view import QueryMonitor, render_html, render_summary_text
from plansight.widgets.worker_view import SKEW_FACTOR, WorkerState, busiest


def _monitor(tasks):
    session = ps.Session(target_partitions=1)
    session.register("t", pa.table({"x": [1, 2, 3]}))
    query = session.sql("SELECT x FROM t")
    monitor = QueryMonitor(query, live=False, show=False)
    monitor(QueryStarted(query.sql))
    for worker, seconds, rows, peak in tasks:
        monitor(TaskFinished(worker, 1, 0, rows, seconds, peak))
    monitor(QueryFinished(3))
    return monitor.snapshot(), query.physical


def test_tasks_add_up_per_worker():
    snap, plan = _monitor([("w1", 0.5, 10, 100), ("w2", 0.25, 5, 300), ("w1", 0.5, 7, 50)])
    assert snap.workers == {"w1": WorkerState(2, 17, 1.0, 100), "w2": WorkerState(1, 5, 0.25, 300)}
    page = render_html(snap, plan)
    assert page.count("class='plansight-worker'") == 2
    assert "plansight-worker-skewed" not in page
    assert "worker" not in render_summary_text(snap, plan)  # nothing to say when even


def test_a_worker_that_carries_the_query_is_flagged():
    slow = SKEW_FACTOR * 1.0 + 0.5
    snap, plan = _monitor([("w1", 1.0, 10, 0), ("w2", 1.0, 10, 0), ("w3", slow, 10, 0)])
    assert busiest(snap.workers) == ("w3", True)
    assert "w3 ran ≥" in render_html(snap, plan)
    assert "skewed: worker w3" in render_summary_text(snap, plan)


def test_one_worker_or_none_is_never_skewed():
    assert busiest({}) == (None, False)
    assert busiest({"w": WorkerState(3, 10, 9.0)}) == ("w", False)
    snap, plan = _monitor([])
    assert snap.workers == {} and "tasks per worker" not in render_html(snap, plan)
