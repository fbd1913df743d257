"""plansight.history(): every run recorded however it ended, with its costs, its frozen
monitor, bounded, and holding no session, plan or rows alive."""

from __future__ import annotations

import gc
import threading
import weakref

import pyarrow as pa
import pytest

import plansight as ps
from plansight import query_history as history_module
from plansight.widgets.plan_view import QueryMonitor


@pytest.fixture
def session():
    s = ps.Session(target_partitions=2)
    s.register("t", pa.table({"x": list(range(1000)), "s": [str(i % 13) for i in range(1000)]}))
    return s


def test_finished_run_is_recorded_with_its_costs(session):
    before = len(ps.history(session))  # the process's list is bounded: count this session's
    result = session.sql("SELECT s, count(*) AS n FROM t GROUP BY s").to_arrow()
    assert len(ps.history(session)) == before + 1
    record = ps.history()[-1]
    assert (record.status, record.rows, record.error) == ("finished", result.num_rows, None)
    assert record.peak_memory > 0 and record.elapsed > 0
    assert record.spills == 0 and record.spilled_bytes == 0
    assert "AggregateExec" in record.analyzed and "output_rows=" in record.analyzed
    assert record.summary().startswith(f"#{record.number} finished")
    assert ps.history(session)[-1] is record


def test_failed_and_cancelled_runs_are_recorded(session):
    with pytest.raises(ps.PlansightError):
        session.sql("SELECT CAST(s || 'x' AS INTEGER) FROM t").to_arrow()
    failed = ps.history(session)[-1]
    assert failed.status == "failed" and failed.error and failed.rows is None
    session.register("endless", pa.table({"x": list(range(200_000))}))
    query = session.sql("SELECT count(*) FROM endless a CROSS JOIN endless b WHERE a.x < b.x")
    timer = threading.Timer(0.3, query.cancel)
    timer.start()
    with pytest.raises(ps.Cancelled):
        query.to_arrow()
    timer.cancel()
    assert ps.history(session)[-1].status == "cancelled"
    assert query.last_record is ps.history(session)[-1]


def test_spills_are_counted(tmp_path):
    s = ps.Session(target_partitions=1, memory_limit="4MB", spill_dir=str(tmp_path))
    s.register("big", pa.table({"x": list(range(400_000))[::-1]}))
    run = s.sql("SELECT x FROM big ORDER BY x").execute()
    record = ps.history(s)[-1]
    assert record.spills == len(run.spills) > 0
    assert record.spilled_bytes == sum(spill[3] for spill in run.spills)
    assert "spills (" in record.summary()


def test_a_monitored_run_keeps_its_frozen_monitor(session):
    query = session.sql("SELECT x FROM t ORDER BY x LIMIT 3")
    QueryMonitor(query, live=False, show=False).run()
    record = ps.history(session)[-1]
    assert record is query.last_record
    assert "plansight-monitor" in record.monitor_html and "plansight-graph" in record.monitor_html
    assert record.monitor_html in record._repr_html_()
    # unmonitored runs show their EXPLAIN ANALYZE instead
    session.sql("SELECT 1 AS one").to_arrow()
    assert "metrics=[" in ps.history(session)[-1]._repr_html_()


def test_history_lists_newest_first_and_opens_each_query(session):
    session.sql("SELECT 1 AS first").to_arrow()
    session.sql("SELECT 2 AS second").to_arrow()
    listing = ps.history(session)
    page = listing._repr_html_()
    assert page.index("SELECT 2 AS second") < page.index("SELECT 1 AS first")
    assert page.count("<details class='plansight-history-row'") == len(listing)
    table = listing.to_arrow()
    assert table.num_rows == len(listing)
    assert table.column("sql").to_pylist()[-2:] == ["SELECT 1 AS first", "SELECT 2 AS second"]
    assert "SELECT 2 AS second" in repr(listing).splitlines()[-1]


def test_history_is_bounded_and_holds_no_session_alive(monkeypatch):
    monkeypatch.setattr(history_module, "_records",
                        history_module.deque(maxlen=3))

    def run_five():
        # in a function of its own: the replacement scan reads the caller's locals, and
        # CPython 3.11 keeps that snapshot on the caller's frame until the frame ends
        s = ps.Session(target_partitions=1)
        s.register("t", pa.table({"x": [1, 2]}))
        for i in range(5):
            s.sql(f"SELECT x + {i} FROM t").to_arrow()
        return weakref.ref(s)

    gone = run_five()
    assert [r.sql for r in ps.history()] == [f"SELECT x + {i} FROM t" for i in (2, 3, 4)]
    gc.collect()
    assert gone() is None  # the records did not keep the session (nor its tables) alive
    assert ps.history(session=object()).records == []
