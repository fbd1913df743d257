"""The monitor's Cancel button and progress, driven through a fake comm that records what the
kernel would send and delivers a click the way a front end does (from another thread, as
ipykernel's subshell thread would)."""

from __future__ import annotations

import io
import re
import threading
import time

import comm
import pyarrow as pa
import pytest
from comm.base_comm import BaseComm

import plansight as ps
from plansight.engine.catalog import ScanUnit, TableSource
from plansight.errors import Cancelled
from plansight.widgets import plan_view
from plansight.widgets.plan_view import QueryMonitor, clicks_reach_busy_kernel


class RecordingComm(BaseComm):
    """A comm with no kernel behind it: every message the widget publishes is kept."""

    def __init__(self, **kwargs):
        self.messages: list[dict] = []
        super().__init__(**kwargs)

    def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        self.messages.append({"msg_type": msg_type, "data": data or {}})

    def deliver(self, data: dict) -> None:
        """A comm_msg from the front end, as the kernel hands it to the comm."""
        self.handle_msg({"content": {"comm_id": self.comm_id, "data": data}, "buffers": []})


@pytest.fixture
def comms(monkeypatch):
    created: list[RecordingComm] = []

    def create_comm(*args, **kwargs):
        created.append(RecordingComm(**kwargs))
        return created[-1]

    monkeypatch.setattr(comm, "create_comm", create_comm)
    return created


class EndlessSource(TableSource):
    """A table that keeps producing batches until ``stop`` is set: its query runs until it is
    cancelled. Its statistics claim a billion rows. After two minutes it ends anyway, so a
    broken cancel fails its test instead of hanging it."""

    def __init__(self):
        self.schema = pa.schema([("x", pa.int64())])
        self.stop = threading.Event()
        self.deadline = time.monotonic() + 120

    def units(self, partitions: int = 1) -> list[ScanUnit]:
        return [ScanUnit(rows=10**9)]

    def read(self, unit, columns, batch_size):
        batch = pa.record_batch([pa.array(range(10), pa.int64())], schema=self.schema)
        while not self.stop.wait(0.001) and time.monotonic() < self.deadline:
            yield batch.select(columns)


def widget_values(comms: list[RecordingComm], key: str) -> list:
    """Every value of state ``key`` the widgets published, in order."""
    return [m["data"]["state"][key] for c in comms for m in c.messages
            if m["data"].get("state", {}).get(key) is not None]


def click(button) -> None:
    button.comm.deliver({"method": "custom", "content": {"event": "click"}})


def test_click_cancels_the_running_query(comms):
    session = ps.Session(target_partitions=2)
    source = EndlessSource()
    session.register("endless", source)
    query = session.sql("SELECT x % 3 AS k, count(*) AS n FROM endless GROUP BY 1")
    monitor = QueryMonitor(query, min_interval=0.02, live=True, show=False, cancel_button=True)

    def click_once_running():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if monitor.cancel_button_shown and monitor.snapshot().rows_scanned > 0:
                click(monitor.cancel_button)
                return
            time.sleep(0.01)

    clicker = threading.Thread(target=click_once_running)
    clicker.start()
    try:
        with pytest.raises(Cancelled):
            monitor.run()
    finally:
        source.stop.set()
        clicker.join()
    assert monitor.cancel_requested and monitor.snapshot().status == "cancelled"
    # the view ends on the cancelled snapshot, the button hidden
    assert "cancelled" in monitor.widget.value
    assert not monitor.cancel_button_shown
    # the session is usable: the next "cell" runs
    session.register("t", pa.table({"x": [1, 2, 3]}))
    assert session.sql("SELECT sum(x) AS s FROM t").to_arrow().to_pylist() == [{"s": 6}]


def test_button_only_where_clicks_reach_a_busy_kernel(comms, monkeypatch):
    session = ps.Session(target_partitions=1)
    session.register("t", pa.table({"x": list(range(100))}))
    monitor = QueryMonitor(session.sql("SELECT x FROM t"), live=True, show=False)
    monitor._open_view()
    # no kernel here: no subshells, so the button stays hidden and the hint says what to do
    assert not clicks_reach_busy_kernel() and not monitor.cancel_button_shown
    running = monitor.snapshot().__class__(**{**vars(monitor.snapshot()), "status": "running"})
    assert "interrupt the kernel" in monitor._html(running)

    class Manager:
        def __init__(self, subshells):
            self.subshells = subshells

        def list_subshell(self):
            return list(self.subshells)

    class Kernel:
        shell_channel_thread = type("Thread", (), {})()

    kernel = Kernel()
    kernel.shell_channel_thread.manager = Manager([])
    shell = type("Shell", (), {"kernel": kernel})()
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    assert not clicks_reach_busy_kernel()  # ipykernel 7, but the front end opened no subshell
    monitor._update_cancel_button()
    assert not monitor.cancel_button_shown
    kernel.shell_channel_thread.manager = Manager(["a-subshell"])  # JupyterLab >= 4.4
    assert clicks_reach_busy_kernel()
    monitor._update_cancel_button()
    assert monitor.cancel_button_shown
    assert "interrupt the kernel" not in monitor._html(running)
    # the layout published display: None (shown) after "none" (hidden)
    assert widget_values(comms, "display")[:1] == ["none"]


def test_cancel_button_off_keeps_the_plain_view(comms):
    session = ps.Session(target_partitions=1)
    monitor = QueryMonitor(session.sql("SELECT 1 AS x"), live=True, show=False,
                           cancel_button=False)
    monitor.run()
    assert monitor.cancel_button is None and monitor.view is monitor.widget


# ----------------------------------------------------------------------------- progress

PROGRESS = re.compile(r"rows scanned ([\d,]+) of ~([\d,]+) \((\d+)%")


def progress_seen(comms) -> list[tuple[int, int, int]]:
    seen = []
    for value in widget_values(comms, "value"):
        match = PROGRESS.search(value)
        if match and "plansight-monitor" in value:
            seen.append(tuple(int(g.replace(",", "")) for g in match.groups()))
    return seen


def chunked(n: int, chunk: int) -> pa.Table:
    table = pa.table({"k": [i % 7 for i in range(n)], "v": list(range(n))})
    return pa.Table.from_batches(table.to_batches(max_chunksize=chunk))


@pytest.mark.parametrize("partitions", [1, 3])
def test_progress_reaches_100_percent_and_never_goes_back(comms, partitions):
    session = ps.Session(target_partitions=partitions, batch_size=100)
    session.register("a", chunked(20_000, 100))
    session.register("b", pa.table({"k": list(range(7))}))
    query = session.sql("SELECT a.k, count(*) AS n FROM a JOIN b ON a.k = b.k GROUP BY 1")
    monitor = QueryMonitor(query, min_interval=0.01, live=True, show=False)
    run = monitor.run()
    assert run.result.num_rows == 7
    seen = progress_seen(comms)
    assert seen, "no progress was published"
    scanned = [s for s, _, _ in seen]
    assert scanned == sorted(scanned)  # monotone
    assert all(total == 20_007 for _, total, _ in seen)
    assert seen[-1] == (20_007, 20_007, 100)
    assert "the rest was not read" not in monitor.widget.value
    assert "plansight-progress-bar" in monitor.widget.value


def test_limit_stops_early_and_says_so(comms):
    session = ps.Session(target_partitions=2, batch_size=1000)
    session.register("a", chunked(500_000, 1000))
    query = session.sql("SELECT v FROM a WHERE k = 3 LIMIT 5")
    monitor = QueryMonitor(query, min_interval=0.01, live=True, show=False)
    assert monitor.run().result.num_rows == 5
    snap = monitor.snapshot()
    assert 0 < snap.rows_scanned < snap.rows_estimated == 500_000
    final = progress_seen(comms)[-1]
    assert final[0] == snap.rows_scanned and final[1] == 500_000 and final[2] < 100
    assert "the rest was not read" in monitor.widget.value


def test_limit_pushed_into_the_scan_is_the_estimate(comms):
    session = ps.Session(target_partitions=1, batch_size=1000)
    session.register("a", chunked(50_000, 1000))
    monitor = QueryMonitor(session.sql("SELECT v FROM a LIMIT 10"), live=True, show=False)
    monitor.run()
    assert progress_seen(comms)[-1] == (10, 10, 100)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_text_progress_line_in_a_terminal():
    session = ps.Session(target_partitions=1, batch_size=10)
    source = EndlessSource()
    session.register("endless", source)
    stream = Terminal()
    monitor = QueryMonitor(session.sql("SELECT count(*) AS n FROM endless"), live=False,
                           show=True, min_interval=0.01, progress_stream=stream)

    def stop_after_some_lines():
        deadline = time.monotonic() + 60
        while (stream.getvalue().count("\r") < 3 or monitor.snapshot().rows_scanned < 100) \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        source.stop.set()

    stopper = threading.Thread(target=stop_after_some_lines)
    stopper.start()
    run = monitor.run()
    stopper.join()
    lines = [line.strip() for line in stream.getvalue().split("\r") if line.strip()]
    assert len(lines) >= 3 and stream.getvalue().endswith("\n")
    assert all(re.match(r"\[[#.]{24}\] (pending|running|finished) · rows scanned [\d,]+ of "
                        r"~1,000,000,000 \(\d+%", line) for line in lines)
    counts = [int(PROGRESS.search(line).group(1).replace(",", "")) for line in lines]
    assert counts == sorted(counts)
    assert lines[-1].startswith("[") and "finished" in lines[-1]
    assert counts[-1] == run.result.column("n")[0].as_py() >= 100


def test_no_progress_line_into_a_log_file(capsys):
    session = ps.Session(target_partitions=1)
    session.register("t", pa.table({"x": [1, 2]}))
    stream = io.StringIO()  # not a terminal, no kernel
    QueryMonitor(session.sql("SELECT x FROM t"), live=False, show=True,
                 progress_stream=stream).run()
    assert stream.getvalue() == ""
    assert "finished" in capsys.readouterr().out  # the final text summary still prints


def test_progress_doctests():
    import doctest

    assert doctest.testmod(plan_view).failed == 0


def test_rows_a_join_filter_drops_in_the_scan_count_as_scanned(comms):
    session = ps.Session(target_partitions=2, batch_size=500)
    probe = pa.table({"k": [i % 100 for i in range(20_000)], "v": list(range(20_000))})
    session.register("a", probe)
    session.register("b", pa.table({"k": [3, 5]}))
    query = session.sql("SELECT count(*) AS n FROM a JOIN b ON a.k = b.k")
    monitor = QueryMonitor(query, min_interval=0.01, live=True, show=False)
    run = monitor.run()
    assert run.result.to_pylist() == [{"n": 400}]
    metrics = run.ctx.metrics.snapshot()
    dropped = sum(m.get("rows_skipped_dynamic", 0) for m in metrics.values())
    assert dropped > 0  # the join's key set reached the scan of a
    snap = monitor.snapshot()
    assert snap.rows_scanned == snap.rows_estimated == 20_002
    assert progress_seen(comms)[-1] == (20_002, 20_002, 100)


def test_a_click_shows_cancelling_in_one_message(comms):
    session = ps.Session(target_partitions=1)
    monitor = QueryMonitor(session.sql("SELECT 1 AS x"), live=True, show=False,
                           cancel_button=True)
    monitor._open_view()
    click(monitor.cancel_button)
    assert monitor.cancel_requested
    button_comm = monitor.cancel_button.comm
    before = len(button_comm.messages)
    monitor._update_cancel_button()  # the cell thread's next refresh
    (update,) = button_comm.messages[before:]
    assert update["data"]["state"] == {"disabled": True, "description": "cancelling…"}


def test_final_status_does_not_depend_on_the_last_events():
    """A cancel may cut the event bus's last flush short: the run's outcome decides."""
    from plansight.engine.exec.events import QueryStarted

    session = ps.Session(target_partitions=1)
    for outcome, status in ([{"error": Cancelled("query cancelled")}, "cancelled"],
                            [{"error": RuntimeError("boom")}, "failed"]):
        monitor = QueryMonitor(session.sql("SELECT 1 AS x"), live=False, show=False)
        monitor(QueryStarted("SELECT 1"))  # QueryCancelled / QueryFailed never delivered
        monitor._settle(outcome)
        assert monitor.snapshot().status == status
    monitor = QueryMonitor(session.sql("SELECT 1 AS x"), live=False, show=False)
    monitor(QueryStarted("SELECT 1"))
    run = session.sql("SELECT 1 AS x").execute()
    monitor._settle({"run": run})  # QueryFinished never delivered
    snap = monitor.snapshot()
    assert (snap.status, snap.result_rows) == ("finished", 1)
