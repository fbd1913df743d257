"""On the 3-worker cluster: errors keep their type, cancel leaves nothing behind, the monitor's
events come from the workers, and the cluster option's ways in."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import plansight as ps
from plansight.engine.distributed.executor import translate
from plansight.engine.distributed.worker import worker_state
from plansight.engine.exec.events import BatchProduced, OperatorFinished, QueryFinished
from plansight.errors import Cancelled, ExecutionError, ResourcesExhausted
from tests.differential.harness import assert_same, run_duckdb
from tests.distributed.helpers import assert_equal_to_local, cluster_session


@pytest.fixture(scope="module")
def session(client):
    session = cluster_session(client)
    session.register("words", pa.table({"s": ["1", "2", "x", "4"] * 50, "k": range(200)}))
    keys = pa.array([i % 4 for i in range(20_000)], pa.int64())
    session.register("wide", pa.table({"k": keys, "v": pa.array(range(20_000), pa.int64())}))
    for name, table in JOIN_TABLES.items():
        session.register(name, table)
    return session


# a build side holding every 50th key of the probe side's (and NULLs on both sides)
JOIN_TABLES = {
    "probe": pa.table({"k": pa.array([None if i % 997 == 0 else i % 5_000
                                      for i in range(40_000)], pa.int64()),
                       "v": pa.array(range(40_000), pa.int64())}),
    "build": pa.table({"k": pa.array([None, *range(0, 5_000, 50)], pa.int64()),
                       "w": pa.array(range(101), pa.int64())}),
}


def clean_everywhere(client, timeout: float = 60.0) -> dict:
    """Wait until no worker runs a plansight task or holds a piece; their states."""
    deadline = time.monotonic() + timeout
    while True:
        states = client.run(worker_state)
        if all(s["running"] == 0 and not s["queries"] and not s["files"] and
               s["reserved"] == 0 for s in states.values()) or time.monotonic() > deadline:
            return states
        time.sleep(0.05)


def test_an_error_keeps_its_type_and_the_cluster_stays_usable(session, client):
    sql = "SELECT CAST(s AS INTEGER) AS n FROM words"
    local = ps.Session(target_partitions=4)
    local.register("words", pa.table({"s": ["1", "2", "x", "4"] * 50, "k": range(200)}))
    with pytest.raises(ps.errors.PlansightError) as expected:
        local.sql(sql).to_arrow()
    with pytest.raises(type(expected.value)) as got:
        session.sql(sql).to_arrow()
    assert str(expected.value).split("(in ")[0] in str(got.value)
    assert session.sql("SELECT count(*) AS n FROM words WHERE s <> 'x'").to_arrow() \
        .to_pydict() == {"n": [150]}
    states = clean_everywhere(client)
    assert all(s["running"] == 0 and not s["queries"] for s in states.values()), states


def test_cancel_stops_every_task_and_leaves_no_piece(session, client):
    # 20,000 rows joined three ways on 4 keys: 5e11 rows to count, endless for this test
    query = session.sql("SELECT count(*) AS n FROM wide a JOIN wide b ON a.k = b.k "
                        "JOIN wide c ON b.k = c.k")
    outcome: list = []

    def run():
        try:
            outcome.append(query.to_arrow())
        except BaseException as error:  # noqa: BLE001 (the test inspects it)
            outcome.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and thread.is_alive() and not any(
            s["running"] for s in client.run(worker_state).values()):
        time.sleep(0.02)
    states = client.run(worker_state)
    assert any(s["running"] for s in states.values()), (outcome, states)
    query.cancel()
    thread.join(30)
    assert not thread.is_alive()
    assert isinstance(outcome[0], Cancelled), outcome
    states = clean_everywhere(client)
    assert all(s["running"] == 0 and not s["queries"] and not s["files"] and
               s["reserved"] == 0 for s in states.values()), states
    assert session.sql("SELECT count(*) AS n FROM wide").to_arrow().to_pydict() == \
        {"n": [20_000]}


def test_the_monitor_gets_the_workers_events_and_ends_finished(session):
    events: list = []
    query = session.sql("SELECT k, sum(v) AS s FROM wide GROUP BY k ORDER BY k")
    run = query.execute(observer=events.append)
    assert run.result.to_pydict()["s"] == [sum(range(k, 20_000, 4)) for k in range(4)]
    assert isinstance(events[-1], QueryFinished) and events[-1].rows == 4
    finished: dict[int, int] = {}
    produced: dict[int, int] = {}
    for event in events:
        if isinstance(event, OperatorFinished):
            finished[event.operator_id] = finished.get(event.operator_id, 0) + event.rows
        elif isinstance(event, BatchProduced):
            produced[event.operator_id] = produced.get(event.operator_id, 0) + event.rows
    operators = {op.operator_id for _, op in query.physical.walk()}
    assert set(finished) == operators
    for operator_id in operators:
        rows = int(run.metrics.total(operator_id, "output_rows"))
        assert finished[operator_id] == rows
        assert produced.get(operator_id, 0) == rows


class _Observer:
    def __call__(self, event) -> None:
        pass


def _observed_query(session) -> weakref.ref:
    """Run a query watched by an observer; a weak reference to the observer (the caller's
    frame never holds the observer itself)."""
    observer = _Observer()
    session.sql("SELECT k, count(*) AS n FROM wide GROUP BY k").execute(observer=observer)
    return weakref.ref(observer)


def test_a_finished_query_leaves_no_handler_holding_its_observer(session, client):
    # Client.unsubscribe_topic keeps the handler: ours must not keep the query's context
    watch = _observed_query(session)
    gc.collect()
    assert watch() is None
    handlers = [h for topic, h in client._event_handlers.items()
                if topic.startswith("plansight-events-")]
    assert handlers and all(h.__name__ == "_ignore_event" for h in handlers)


def test_the_monitor_shows_what_each_worker_did(session, client):
    from plansight.engine.distributed.stages import stages_of
    from plansight.widgets.plan_view import QueryMonitor, render_html, render_text

    query = session.sql("SELECT k, sum(v) AS s FROM wide GROUP BY k ORDER BY k")
    monitor = QueryMonitor(query, live=False, show=False)
    run = monitor.run()
    snap = monitor.snapshot()
    tasks = sum(stage.tasks for stage in stages_of(query.physical))
    assert sum(w.tasks for w in snap.workers.values()) == tasks  # every task, once
    assert set(snap.workers) <= set(client.scheduler_info()["workers"])
    # rows out: the 20,000 rows the scan stage routes, the 16 partial sums routed to the
    # final aggregate, and the 4 the final stage returns (stages end where a shuffle
    # writer takes their rows)
    routed = sum(int(run.metrics.total(w.children()[0].operator_id, "output_rows"))
                 for _, w in query.physical.walk() if w.name == "ShuffleWriterExec")
    assert sum(w.rows for w in snap.workers.values()) == routed + 4
    assert all(w.busy > 0 and w.peak_memory >= 0 for w in snap.workers.values())
    page = render_html(snap, run.plan)
    assert page.count("class='plansight-worker'") == len(snap.workers)
    assert "tasks per worker" in page
    assert sum(line.startswith("worker tcp://127.0.0.1:") for line in
               render_text(snap, run.plan).splitlines()) == len(snap.workers)


def test_shuffle_metrics_count_every_piece_once(session):
    query = session.sql("SELECT k, count(*) AS n FROM wide GROUP BY k")
    run = query.execute()
    (reader,) = [op for _, op in query.physical.walk()
                 if op.name == "ShuffleReaderExec" and op.mode == "hash"]
    (writer,) = reader.children()
    metrics = run.metrics
    # 4 map tasks x 4 reduce tasks: each piece read once, from the store or from a peer
    assert metrics.total(reader.operator_id, "local_pieces") + \
        metrics.total(reader.operator_id, "remote_pieces") == 16
    assert metrics.total(writer.operator_id, "shuffle_rows") == 16  # 4 keys x 4 partials
    assert metrics.total(writer.operator_id, "shuffle_bytes") > 0
    text = run.explain_analyze()
    assert "ShuffleWriterExec: stage=1" in text and "shuffle_bytes=" in text


def test_a_dead_worker_is_resources_exhausted_naming_it():
    from distributed.scheduler import KilledWorker

    class Worker:
        address = "tcp://127.0.0.1:4242"

    error = translate(KilledWorker("plansight-q-1-0", Worker(), 0))
    assert isinstance(error, ResourcesExhausted) and "tcp://127.0.0.1:4242" in str(error)
    assert isinstance(translate(OSError("connection reset")), ExecutionError)


def test_local_n_starts_and_stops_a_loopback_cluster():
    session = cluster_session("local:1", target_partitions=2)
    session.register("t", pa.table({"x": [1, 2, 3]}))
    try:
        assert session.sql("SELECT sum(x) AS s FROM t").to_arrow().to_pydict() == {"s": [6]}
        (connection,) = session._clusters.values()
        assert connection.client.scheduler_info()["address"].startswith("tcp://127.0.0.1:")
        session.sql("SET cluster = 'none'")
        assert not session.sql("SELECT sum(x) AS s FROM t").distributed
    finally:
        session.close()
    assert connection.client.status == "closed"


def test_the_magic_runs_a_cell_on_the_cluster(client, capsys):
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    from plansight.magic import get_session, set_session

    start_ipython()
    shell = get_ipython()
    if "query" not in shell.magics_manager.magics["cell"]:
        shell.run_line_magic("load_ext", "plansight")
    session = ps.Session(target_partitions=2)
    session.set_option("cluster_min_rows", 0)  # a 4-row table goes to the cluster too
    session.register("t", pa.table({"k": [1, 2, 1, 3]}))
    set_session(session)
    address = client.scheduler.address  # connected by address: a client of its own
    sql = "SELECT k, count(*) AS n FROM t GROUP BY k ORDER BY k"
    try:
        shell.run_cell_magic("query", f"--no-monitor --explain --cluster {address}", sql)
        assert "ShuffleReaderExec" in capsys.readouterr().out
        result = shell.run_cell_magic("query", f"--no-monitor --cluster {address}", sql)
        assert result.table.to_pydict() == {"k": [1, 2, 3], "n": [2, 1, 1]}
        assert get_session().get_option("cluster") is None  # for that cell only
        shell.run_line_magic("config", f"Query.cluster = '{address}'")
        assert get_session().get_option("cluster") == address
        assert get_session().sql(sql).distributed
    finally:
        shell.run_line_magic("config", "Query.cluster = 'none'")
        session.close()
    assert get_session().get_option("cluster") is None
    assert len(client.scheduler_info()["workers"]) == 3  # the shared cluster still runs


def test_tasks_spill_under_the_query_memory_limit_and_clean_up(session, client):
    sql = "SELECT v, k FROM wide ORDER BY k DESC, v"
    local = ps.Session(target_partitions=4, memory_limit="256KB")
    keys = pa.array([i % 4 for i in range(20_000)], pa.int64())
    local.register("wide", pa.table({"k": keys, "v": pa.array(range(20_000), pa.int64())}))
    run = session.sql(sql, options={"memory_limit": "256KB", "batch_size": 512}).execute()
    spills = sum(run.metrics.total(op.operator_id, "spill_count")
                 for _, op in run.plan.walk())
    assert spills > 0  # the sorts on the workers spilled to the workers' directories
    assert run.result.equals(local.sql(sql, options={"batch_size": 512}).to_arrow())
    states = clean_everywhere(client)
    assert all(not s["files"] and s["reserved"] == 0 for s in states.values()), states


@pytest.mark.parametrize("sql, options", [
    # a partitioned join: the probe scan runs in the stage below the probe side's shuffle
    ("SELECT p.v, b.w FROM build b JOIN probe p ON b.k = p.k",
     {"hash_join_single_partition_threshold_rows": 10}),
    # a collect-left join over an aggregate: the probe scan runs below the partial one
    ("SELECT a.k, a.n, b.w FROM build b JOIN (SELECT k, count(*) AS n FROM probe GROUP BY k) a"
     " ON b.k = a.k", {}),
])
def test_a_build_stage_filters_the_probe_scan_stage(session, sql, options):
    query = session.sql(sql, options=options)
    run = query.execute()
    (scan,) = [op for _, op in query.physical.walk()
               if op.name == "DataSourceExec" and op.table == "probe"]
    (waiting,) = [op for _, op in query.physical.walk() if getattr(op, "awaited_filters", None)]
    assert any(op is scan for _, op in waiting.walk())  # the scan's stage waits for the build
    # 100 of the 5,000 keys are built: the scan keeps only their rows (NULLs never match)
    kept = pc.sum(pc.is_in(JOIN_TABLES["probe"]["k"], JOIN_TABLES["build"]["k"],
                           skip_nulls=True)).as_py()
    assert 0 < kept < 1_000
    skipped = int(run.metrics.total(scan.operator_id, "rows_skipped_dynamic"))
    assert skipped == 40_000 - kept
    (line,) = [x for x in run.explain_analyze().splitlines() if "table=probe" in x]
    assert f"rows_skipped_dynamic={skipped}" in line
    local = ps.Session(target_partitions=4)
    for name, table in JOIN_TABLES.items():
        local.register(name, table)
    assert_same(run.result, run_duckdb(sql, JOIN_TABLES), ordered=False, sql=sql)
    assert_equal_to_local(run.result, local.sql(sql, options=options).to_arrow(), sql)


def test_a_satisfied_limit_cancels_the_tasks_below_it(session, client):
    # the union's first branch has the 5 rows at once; its second is a 3-way join on 4 keys
    # whose filter drops all of its 5e11 rows: endless unless the LIMIT stops its tasks.
    # Two partitions: the join's two tasks leave one of the three workers free for the
    # first branch (tasks that started never yield their worker to a more urgent one).
    # Small batches: a probe batch of the filtered join (each row meets 5,000) is where a
    # task next sees its cancel flag
    sql = ("SELECT v FROM (SELECT v FROM wide WHERE k = 0 UNION ALL "
           "SELECT a.v FROM wide a JOIN wide b ON a.k = b.k JOIN wide c ON b.k = c.k "
           "WHERE a.v + b.v + c.v < 0) LIMIT 5")
    query = session.sql(sql, options={"target_partitions": 2, "batch_size": 64})
    outcome: list = []

    def run():
        try:
            outcome.append(query.execute())
        except BaseException as error:  # noqa: BLE001 (the test inspects it)
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)  # never keeps the suite alive
    thread.start()
    thread.join(120)
    if thread.is_alive():  # the limit did not stop the join: stop it, then fail
        query.cancel()
        thread.join(30)
        pytest.fail("the LIMIT did not stop the tasks below it")
    (run,) = outcome
    assert not isinstance(run, BaseException), run
    assert run.result.column("v").to_pylist() == [v for v in range(20_000) if v % 4 == 0][:5]
    (reader,) = [op for _, op in query.physical.walk()
                 if op.name == "ShuffleReaderExec" and op.stage_id == 5]
    # the task of the join branch never ran to its end: its pieces were not read
    assert run.metrics.total(reader.operator_id, "map_tasks_cancelled") == 1
    assert "map_tasks_cancelled=1" in run.explain_analyze()
    states = clean_everywhere(client)  # the join's running tasks stopped
    assert all(s["running"] == 0 and not s["queries"] and not s["files"] and
               s["reserved"] == 0 for s in states.values()), states
