"""The monitor's event reducer and its HTML, on synthetic event streams: self time per
operator, memory per consumer, the spill feed, phased progress and live skew."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.events import (
    BatchProduced,
    OperatorFinished,
    OperatorStarted,
    QueryStarted,
    RepartitionOutput,
    ReservationChanged,
    SpillWritten,
)
from plansight.engine.exec.memory_pool import format_bytes
from plansight.widgets.plan_view import (
    QueryMonitor,
    current_phase,
    plan_rows,
    progress_fraction,
    progress_text,
    render_html,
    render_text,
    self_times,
)

LIMIT = 8 << 20


@pytest.fixture
def monitor():
    """A monitor of an unexecuted plan: SortPreservingMerge <- Sort <- Projection <-
    Aggregate(Final) <- Repartition <- Aggregate(Partial) <- Projection <- Scan, 2 partitions."""
    session = ps.Session(target_partitions=2, memory_limit=LIMIT)
    session.register("t", pa.table({"k": list(range(1000)), "v": list(range(1000))}))
    query = session.sql("SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY s")
    return QueryMonitor(query, live=False, show=False)


def ids(monitor) -> dict[str, int]:
    """Operator name -> id (the deepest of a name wins for AggregateExec: ``partial``)."""
    found = {}
    for _, op in plan_rows(monitor.query.physical):
        found.setdefault(op.name, op.operator_id)
        if op.name == "AggregateExec":
            found["partial"] = op.operator_id
    return found


def run_operator(monitor, operator_id, name, partition, rows, compute, start=1.0, end=2.0):
    monitor(OperatorStarted(operator_id, name, partition, time=start))
    monitor(BatchProduced(operator_id, partition, rows, rows * 8, time=start))
    monitor(OperatorFinished(operator_id, name, partition, rows, end - start, compute=compute,
                             time=end))


def test_self_time_per_operator_and_the_hot_one(monitor):
    op = ids(monitor)
    monitor(QueryStarted("q", time=0.0))
    run_operator(monitor, op["DataSourceExec"], "DataSourceExec", 0, 500, compute=0.010)
    run_operator(monitor, op["SortExec"], "SortExec", 0, 500, compute=0.300)
    run_operator(monitor, op["SortExec"], "SortExec", 1, 500, compute=0.100)
    snap = monitor.snapshot()
    times, hot = self_times(snap, monitor.query.physical)
    assert times[op["SortExec"]] == pytest.approx(0.4)  # summed over partitions
    assert times[op["DataSourceExec"]] == pytest.approx(0.01)
    assert hot == op["SortExec"]
    html = render_html(snap, monitor.query.physical)
    sort_row = re.search(rf"<tr data-operator-id='{op['SortExec']}'[^>]*>(.*?)</tr>", html).group(0)
    assert "plansight-hot-row" in sort_row and "400.0 ms" in sort_row
    total = 0.41
    assert f"({0.4 / total:.0%})" in sort_row  # the bar's share of the query's own time
    scan_row = re.search(rf"<tr data-operator-id='{op['DataSourceExec']}'[^>]*>(.*?)</tr>",
                         html).group(0)
    assert "plansight-hot" not in scan_row and "10.0 ms" in scan_row
    assert "self=400.0ms (hot)" in render_text(snap, monitor.query.physical)


def test_self_time_grows_live_from_batch_events(monitor):
    op = ids(monitor)
    sort = op["SortExec"]
    monitor(QueryStarted("q", time=0.0))
    monitor(OperatorStarted(sort, "SortExec", 0, time=0.1))
    monitor(BatchProduced(sort, 0, 10, 80, compute=0.25, time=0.4))
    assert monitor.snapshot().operators[sort].compute == pytest.approx(0.25)
    monitor(BatchProduced(sort, 0, 10, 80, compute=0.05, time=0.5))
    assert monitor.snapshot().operators[sort].compute == pytest.approx(0.30)
    # the finish carries the run's total: only what came after the last batch is added
    monitor(OperatorFinished(sort, "SortExec", 0, 20, 0.5, compute=0.32, time=0.6))
    assert monitor.snapshot().operators[sort].compute == pytest.approx(0.32)


def test_memory_per_consumer_now_and_peak_against_the_limit(monitor):
    op = ids(monitor)
    monitor(QueryStarted("q", time=0.0))
    monitor(OperatorStarted(op["SortExec"], "SortExec", 0, time=0.1))
    monitor(ReservationChanged("SortExec[0]", 3 << 20, 3 << 20, 3 << 20))
    monitor(ReservationChanged("SortExec[1]", 2 << 20, 5 << 20, 5 << 20))
    monitor(ReservationChanged("SortExec[0]", 1 << 20, 3 << 20, 5 << 20))
    monitor(ReservationChanged("RepartitionExec[0]", 4096, (3 << 20) + 4096, 5 << 20))
    snap = monitor.snapshot()
    sort = snap.operators[op["SortExec"]]
    assert sort.memory == 3 << 20 and sort.memory_peak == 5 << 20
    assert snap.operators[op["RepartitionExec"]].memory == 4096
    assert snap.memory_limit == LIMIT
    html = render_html(snap, monitor.query.physical)
    assert f"{format_bytes(3 << 20)} / {format_bytes(5 << 20)}" in html  # now / peak
    assert f"memory {format_bytes((3 << 20) + 4096)} / {format_bytes(LIMIT)}" in html
    monitor(ReservationChanged("SortExec[0]", 0, 2 << 20, 5 << 20))
    assert monitor.snapshot().operators[op["SortExec"]].memory == 2 << 20


def test_spills_per_operator_and_the_spill_feed(monitor):
    op = ids(monitor)
    monitor(QueryStarted("q", time=10.0))
    monitor(SpillWritten("SortExec", 100, 4096, "/tmp/a", operator_id=op["SortExec"],
                         partition=1, time=10.5))
    monitor(SpillWritten("SortExec", 300, 3 << 20, "/tmp/b", operator_id=op["SortExec"],
                         partition=0, time=11.25))
    snap = monitor.snapshot()
    sort = snap.operators[op["SortExec"]]
    assert (sort.spill_count, sort.spilled_rows, sort.spilled_bytes) == (2, 400, 4096 + (3 << 20))
    assert [(e.at, e.partition, e.rows) for e in snap.spill_feed] == [(0.5, 1, 100), (1.25, 0, 300)]
    html = render_html(snap, monitor.query.physical)
    assert f"⛁ 2× {format_bytes(4096 + (3 << 20))}" in html
    feed = html[html.index("plansight-spill-feed"):]
    # newest first: time, operator partition, bytes, rows
    assert feed.index("1.25 s") < feed.index("0.50 s")
    assert "SortExec[0]" in feed and format_bytes(3 << 20) in feed and "300" in feed


def test_progress_stays_below_100_while_a_sort_works(monitor):
    op = ids(monitor)
    monitor(QueryStarted("q", time=0.0))
    for p in (0, 1):  # the scan read everything and ended
        run_operator(monitor, op["DataSourceExec"], "DataSourceExec", p, 500, 0.01)
    snap = monitor.snapshot()
    assert snap.rows_scanned == snap.rows_estimated == 1000
    scan, *blocking = snap.phases
    assert scan.fraction == 1.0 and [p.name for p in blocking] == [
        f"AggregateExec #{op['partial']}", f"AggregateExec #{op['AggregateExec']}",
        f"SortExec #{op['SortExec']}", f"SortPreservingMergeExec #{op['SortPreservingMergeExec']}"]
    assert progress_fraction(snap) < 0.5
    assert current_phase(snap).name == f"AggregateExec #{op['partial']}"
    # the aggregates end, the projection feeding the sort ends; the sort emitted half
    for name in ("partial", "AggregateExec"):
        for p in (0, 1):
            run_operator(monitor, op[name], "AggregateExec", p, 500, 0.01)
    for p in (0, 1):
        run_operator(monitor, op["ProjectionExec"], "ProjectionExec", p, 500, 0.0)
    monitor(OperatorStarted(op["SortExec"], "SortExec", 0, time=3.0))
    monitor(BatchProduced(op["SortExec"], 0, 500, 4000, time=3.0))
    snap = monitor.snapshot()
    fraction = progress_fraction(snap)
    assert 0.6 < fraction < 1.0
    assert current_phase(snap).name == f"SortExec #{op['SortExec']}"
    text = progress_text(snap)
    assert f"({fraction:.0%} done)" in text and f"sorting (SortExec #{op['SortExec']})" in text


def test_skew_updates_live_before_the_repartition_ends(monitor):
    op = ids(monitor)
    repartition = op["RepartitionExec"]
    monitor(QueryStarted("q", time=0.0))
    monitor(RepartitionOutput(repartition, (10, 200), (80, 1600), final=False))
    snap = monitor.snapshot()
    assert snap.repartitions[repartition] == (10, 200)
    html = render_html(snap, monitor.query.physical)
    assert "routing…" in html and "min 10, p25 58, median 105, p75 152, max 200" in html
    assert f"max {format_bytes(1600)}" in html
    monitor(RepartitionOutput(repartition, (20, 400), (160, 3200)))
    monitor(RepartitionOutput(repartition, (15, 300), (1, 1), final=False))  # a late live one
    snap = monitor.snapshot()
    assert snap.repartitions[repartition] == (20, 400)
    assert "routing…" not in render_html(snap, monitor.query.physical)


def test_a_real_run_shows_self_time_memory_and_spills():
    session = ps.Session(target_partitions=2, memory_limit=256 << 10, batch_size=512)
    session.register("t", pa.table({"k": [i % 97 for i in range(60_000)],
                                    "v": list(range(60_000))}))
    query = session.sql("SELECT k, v FROM t ORDER BY v DESC, k")
    monitor = QueryMonitor(query, live=False, show=False)
    run = monitor.run()
    snap = monitor.snapshot()
    metrics = run.ctx.metrics.snapshot()
    for _, op in plan_rows(run.plan):
        # own compute from the engine's metrics: children are not in it
        assert snap.operators[op.operator_id].compute == pytest.approx(
            metrics[op.operator_id].get("elapsed_compute", 0.0))
    sort = next(op for _, op in plan_rows(run.plan) if op.name == "SortExec")
    state = snap.operators[sort.operator_id]
    assert state.spill_count == metrics[sort.operator_id]["spill_count"] > 0
    assert state.memory_peak > 0 and state.memory == 0
    assert len(snap.spill_feed) == min(snap.spill_count, 100)
    assert "plansight-spill-feed" in render_html(snap, run.plan)
