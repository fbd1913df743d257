"""EventBus: observers run on their own threads; BatchProduced is synthesized from run counters
(progress while running, exact totals at the end); reservations coalesce; the end flushes."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.catalog import MemorySource
from plansight.engine.exec.events import (
    BatchProduced,
    EventBus,
    OperatorFinished,
    OperatorStarted,
    QueryCancelled,
    QueryFailed,
    QueryFinished,
    QueryStarted,
    RepartitionOutput,
    ReservationChanged,
    RunProgress,
    SpillWritten,
    _Delivery,
)
from plansight.errors import Cancelled, ExecutionError
from plansight.profiling.timeline import build_timeline

LIFECYCLE = (QueryStarted, QueryFinished, QueryFailed, QueryCancelled, OperatorStarted,
             OperatorFinished, SpillWritten, RepartitionOutput)


class Gate:
    """An observer that blocks on its first event until released, then records the rest
    (optionally sleeping per event): an observer as slow as a test wants it."""

    def __init__(self, sleep: float = 0.0):
        self.events: list = []
        self.entered, self.release = threading.Event(), threading.Event()
        self.sleep = sleep

    def __call__(self, event) -> None:
        self.events.append(event)
        if len(self.events) == 1:
            self.entered.set()
            assert self.release.wait(60), "the test never released the observer"
        elif self.sleep:
            time.sleep(self.sleep)


class Finished:
    """A fast observer that records everything and says when the query has ended."""

    def __init__(self):
        self.events: list = []
        self.ended = threading.Event()

    def __call__(self, event) -> None:
        self.events.append(event)
        if isinstance(event, (QueryFinished, QueryFailed, QueryCancelled)):
            self.ended.set()


def _lifecycle(events: list) -> list:
    return [e for e in events if isinstance(e, LIFECYCLE)]


def _new_threads(before: set) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


def _session(rows: int = 60_000, batch_size: int = 100, partitions: int = 2) -> ps.Session:
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    session.register("t", pa.table({"k": [i % 7 for i in range(rows)], "v": list(range(rows)),
                                    "s": ["1"] * (rows - 1) + ["x"]}))
    return session


# -- the bus alone: synthesis and coalescing rules, exactly ------------------------------------

def _produce(run: RunProgress, rows: int, time: float) -> None:
    """What an operator's engine thread does per batch: replace the run's counters (the
    batch: one int64 column without nulls, 8 bytes a row)."""
    total_rows, batches, _, _ = run.counts
    if batches == 0:
        run.first = time
    batch = pa.record_batch({"x": pa.array(range(rows), pa.int64())})
    run.counts = (total_rows + rows, batches + 1, time, batch)


def test_a_lagging_observer_gets_each_runs_batches_at_once_and_the_latest_reservations():
    gate = Gate()
    bus = EventBus([gate])
    bus.publish(QueryStarted("q", time=0.0))
    assert gate.entered.wait(10)  # the observer is now stuck in its first call
    first, other, again = RunProgress(1, 0), RunProgress(2, 0), RunProgress(1, 0)
    published = []

    def publish(event, run=None):
        published.append(event)
        bus.publish(event, run)

    publish(OperatorStarted(1, "A", 0, time=1.0), first)
    _produce(first, 10, 1.1)
    publish(ReservationChanged("A[0]", 100, 100, 100, time=1.15))
    publish(OperatorStarted(2, "B", 0, time=1.18), other)
    _produce(other, 1, 1.2)
    _produce(first, 20, 1.3)
    publish(SpillWritten("A", 30, 64, "f1", operator_id=1, time=1.35))
    publish(ReservationChanged("B[0]", 50, 150, 150, time=1.4))
    publish(ReservationChanged("A[0]", 0, 50, 150, time=1.45))
    _produce(first, 30, 1.5)
    publish(OperatorFinished(1, "A", 0, 60, 0.5, time=1.6), first)
    publish(OperatorStarted(1, "A", 0, time=1.7), again)  # the same partition runs again
    _produce(again, 5, 1.8)
    publish(OperatorFinished(1, "A", 0, 5, 0.1, time=1.9), again)
    publish(QueryFinished(65, time=2.0))  # ``other`` never finished: close() flushes it
    assert len(gate.events) == 1  # publishing did not wait for the observer
    gate.release.set()
    bus.close()
    delivered = gate.events[1:]
    assert _lifecycle(delivered) == _lifecycle(published)  # all kept, in order
    batches = [e for e in delivered if isinstance(e, BatchProduced)]
    # one per run, counted apart, each time its first batch's
    assert [(e.operator_id, e.rows, e.bytes, e.batches, e.time) for e in batches] == [
        (1, 60, 480, 3, 1.1), (1, 5, 40, 1, 1.8), (2, 1, 8, 1, 1.2)]
    # a run's batches come before its finish
    assert delivered.index(batches[0]) < delivered.index(published[6]) \
        < delivered.index(batches[1]) < delivered.index(published[8])
    reservations = [e for e in delivered if isinstance(e, ReservationChanged)]
    # the latest per consumer, in the order of their last change: the last total is current
    assert [(e.consumer, e.size, e.pool_total, e.pool_peak) for e in reservations] == [
        ("B[0]", 50, 150, 150), ("A[0]", 0, 50, 150)]
    assert bus.coalesced == 1 and not bus.active


def _wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def test_a_live_run_is_reported_while_it_runs_batches_since_the_last_event():
    seen = []
    bus = EventBus([seen.append])
    run = RunProgress(4, 1)
    _produce(run, 10, 1.1)
    _produce(run, 20, 1.2)
    bus.publish(OperatorStarted(4, "X", 1, time=1.0), run)

    def batches():
        return [e for e in seen if isinstance(e, BatchProduced)]

    assert _wait_for(lambda: len(batches()) == 1)  # nothing else moves: a tick reports it
    _produce(run, 5, 1.3)
    assert _wait_for(lambda: len(batches()) == 2)
    bus.publish(OperatorFinished(4, "X", 1, 35, 0.4, time=1.4), run)  # nothing new: no event
    bus.close()
    assert [(e.rows, e.bytes, e.batches, e.time) for e in batches()] == [
        (30, 240, 2, 1.1), (5, 40, 1, 1.3)]
    assert isinstance(seen[-1], OperatorFinished)


def test_a_fast_observer_gets_lifecycle_events_as_published():
    seen = []
    with EventBus([seen.append]) as bus:
        for i in range(200):
            run = RunProgress(i, 0)
            bus.publish(OperatorStarted(i, "X", 0), run)
            _produce(run, i + 1, 0.0)
            bus.publish(OperatorFinished(i, "X", 0, i + 1, 0.0), run)
    assert [type(e) for e in seen[:3]] == [OperatorStarted, BatchProduced, OperatorFinished]
    assert [e.operator_id for e in seen if isinstance(e, OperatorFinished)] == list(range(200))
    assert sum(e.rows for e in seen if isinstance(e, BatchProduced)) == sum(range(1, 201))


def test_synchronous_bus_reports_a_runs_batches_before_its_finish():
    seen = []
    bus = EventBus([seen.append], synchronous=True)
    run = RunProgress(1, 0)
    bus.publish(OperatorStarted(1, "X", 0), run)
    _produce(run, 3, 1.0)
    _produce(run, 4, 2.0)
    bus.publish(OperatorFinished(1, "X", 0, 7, 0.1), run)
    bus.close()
    assert [type(e) for e in seen] == [OperatorStarted, BatchProduced, OperatorFinished]
    assert (seen[1].rows, seen[1].bytes, seen[1].batches, seen[1].time) == (7, 56, 2, 1.0)


def test_synchronous_bus_calls_observers_on_the_publishing_thread():
    threads = []
    bus = EventBus([lambda event: threads.append(threading.current_thread())],
                   synchronous=True)
    before = set(threading.enumerate())
    bus.publish(QueryStarted("q"))
    assert threads == [threading.current_thread()] and _new_threads(before) == []
    bus.close()


def test_no_observer_starts_no_thread_and_counts_no_progress(monkeypatch):
    import plansight.engine.physical.plan as plan_module

    def no_progress(*args):
        raise AssertionError("progress counted without an observer")

    monkeypatch.setattr(plan_module, "RunProgress", no_progress)
    before = set(threading.enumerate())
    bus = EventBus()
    assert not bus.active
    run = _session(rows=1000).sql("SELECT k, v FROM t WHERE v > 10").execute()
    assert run.result.num_rows == 989 and _new_threads(before) == []
    bus.close()


# -- through Query.execute ----------------------------------------------------------------------

def test_a_blocked_observer_does_not_stall_the_query_and_gets_coalesced_batches():
    session = _session(rows=60_000, batch_size=100, partitions=2)
    query = session.sql("SELECT k, v + 1 AS w FROM t WHERE v % 3 <> 0")
    gate, fast, outcome = Gate(sleep=0.001), Finished(), {}
    thread = threading.Thread(target=lambda: outcome.update(
        run=query.execute(observer=[gate, fast])))
    thread.start()
    # the engine publishes its last event while the slow observer is (at most) in its first
    # call: delivery threads are independent, it may not even have started
    assert fast.ended.wait(120) and isinstance(fast.events[-1], QueryFinished)
    assert len(gate.events) <= 1
    gate.release.set()
    thread.join(120)
    run = outcome["run"]
    metrics = run.ctx.metrics.snapshot()
    root = run.plan.operator_id
    assert metrics[root]["output_batches"] > 300  # many batches were produced ...
    slow_batches = [e for e in gate.events if isinstance(e, BatchProduced)]
    runs = Counter((e.operator_id, e.partition) for e in gate.events
                   if isinstance(e, OperatorStarted))
    # ... the slow observer got at most two per run: one from a tick before it blocked, one
    # (at the run's finish) counting every batch since
    assert len(slow_batches) <= 2 * sum(runs.values())
    for operator_id, totals in metrics.items():  # and nothing was lost
        mine = [e for e in slow_batches if e.operator_id == operator_id]
        assert sum(e.rows for e in mine) == totals["output_rows"]
        assert sum(e.batches for e in mine) == totals["output_batches"]
    assert sum(e.rows for e in slow_batches if e.operator_id == root) == run.result.num_rows
    # both observers saw the same lifecycle events, in the same order, the end last
    assert _lifecycle(gate.events) == _lifecycle(fast.events)
    assert isinstance(gate.events[0], QueryStarted) and gate.events[-1] == fast.events[-1]
    assert sum(runs.values()) == sum(isinstance(e, OperatorFinished) for e in gate.events)


class _WaitingSource(MemorySource):
    """Stops after its first batch until the observer has seen a BatchProduced: the query
    can only finish if progress is delivered while it runs."""

    def __init__(self, table: pa.Table):
        super().__init__(table)
        self.progress_seen = threading.Event()
        self.waited: list[bool] = []

    def read(self, unit, columns, batch_size):
        for i, batch in enumerate(super().read(unit, columns, batch_size)):
            yield batch
            if i == 0:
                self.waited.append(self.progress_seen.wait(30))


@pytest.mark.parametrize("partitions", [1, 2])
def test_an_observer_sees_batches_while_the_query_runs(partitions):
    session = ps.Session(target_partitions=partitions, batch_size=100)
    source = _WaitingSource(pa.table({"v": list(range(20_000))}))
    session.register("t", source)
    seen = []

    def observer(event):
        seen.append(event)
        if isinstance(event, BatchProduced):
            source.progress_seen.set()

    run = session.sql("SELECT v * 2 AS w FROM t WHERE v % 2 = 0").execute(observer=observer)
    assert run.result.num_rows == 10_000
    assert source.waited and all(source.waited)  # progress arrived before the scan went on
    first = next(i for i, e in enumerate(seen) if isinstance(e, BatchProduced))
    assert first < min(i for i, e in enumerate(seen) if isinstance(e, OperatorFinished))
    assert isinstance(seen[-1], QueryFinished)


def test_the_engine_publishes_no_per_batch_events(monkeypatch):
    published = []
    put = _Delivery.put
    monkeypatch.setattr(_Delivery, "put", lambda self, item: (published.append(item),
                                                              put(self, item)))
    recorder = Finished()
    run = _session(rows=60_000, batch_size=100, partitions=2).sql(
        "SELECT k, v + 1 AS w FROM t WHERE v % 3 <> 0").execute(observer=recorder)
    metrics = run.ctx.metrics.snapshot()
    batches = sum(totals["output_batches"] for totals in metrics.values())
    assert batches > 1000
    # everything that went through the queue is a lifecycle or reservation event ...
    assert not any(isinstance(item, BatchProduced) for item in published)
    delivered = [e for e in recorder.events if not isinstance(e, BatchProduced)]
    assert len(published) == len(delivered) + run.ctx.events.coalesced < batches / 10
    # ... yet the observer got every batch
    assert sum(e.batches for e in recorder.events if isinstance(e, BatchProduced)) == batches


def _check_batches_match_metrics(events: list, run) -> None:
    """Per operator, the BatchProduced sums equal the metrics; each lies inside its run."""
    metrics = run.ctx.metrics.snapshot()
    for operator_id, totals in metrics.items():
        mine = [e for e in events if isinstance(e, BatchProduced) and e.operator_id == operator_id]
        assert sum(e.rows for e in mine) == totals["output_rows"]
        assert sum(e.batches for e in mine) == totals["output_batches"]
        assert all(e.batches >= 1 and e.rows >= e.batches for e in mine)
    open_runs: Counter = Counter()
    for event in events:
        if isinstance(event, OperatorStarted):
            open_runs[(event.operator_id, event.partition)] += 1
        elif isinstance(event, OperatorFinished):
            open_runs[(event.operator_id, event.partition)] -= 1
        elif isinstance(event, BatchProduced):
            assert open_runs[(event.operator_id, event.partition)] > 0
    # the timeline (which orders by time) puts every batch inside its span
    spans = build_timeline(events).spans
    for operator_id, totals in metrics.items():
        assert sum(s.batches for s in spans if s.operator_id == operator_id) == \
            totals["output_batches"]


@pytest.mark.parametrize(("batch_size", "partitions"), [(1, 1), (3, 2), (7, 3), (8192, 8)])
def test_batch_totals_equal_the_operator_metrics_exactly(batch_size, partitions):
    session = _session(rows=3_000 if batch_size < 8 else 60_000, batch_size=batch_size,
                       partitions=partitions)
    recorder = Finished()
    run = session.sql("SELECT k, count(*) AS n, sum(v) AS s FROM t WHERE v % 5 <> 1 "
                      "GROUP BY k ORDER BY k").execute(observer=recorder)
    assert run.result.num_rows == 7
    _check_batches_match_metrics(recorder.events, run)
    root = [e for e in recorder.events
            if isinstance(e, BatchProduced) and e.operator_id == run.plan.operator_id]
    assert sum(e.rows for e in root) == 7


def test_an_observer_raising_on_a_batch_is_reported_not_fatal():
    session = _session(rows=20_000, batch_size=100)
    calls, recorder = [], Finished()

    def broken(event):
        calls.append(event)
        if getattr(event, "batches", 0):  # a BatchProduced
            raise RuntimeError("bad batch")

    with pytest.warns(RuntimeWarning, match="bad batch.*detached"):
        run = session.sql("SELECT k, v FROM t WHERE k > 2").execute(observer=[broken, recorder])
    assert run.result.num_rows == sum(1 for i in range(20_000) if i % 7 > 2)
    assert sum(isinstance(e, BatchProduced) for e in calls) == 1
    assert isinstance(calls[-1], BatchProduced) and not run.ctx.events.active
    assert isinstance(recorder.events[-1], QueryFinished)
    _check_batches_match_metrics(recorder.events, run)
    assert [type(e) for e in run.ctx.events.errors] == [RuntimeError]


def test_every_event_is_delivered_before_execute_returns():
    session = _session(rows=20_000, batch_size=50, partitions=2)
    slow = Gate(sleep=0.0005)
    slow.release.set()
    before = set(threading.enumerate())
    run = session.sql("SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k").execute(
        observer=slow)
    assert _new_threads(before) == []  # the delivery thread has ended: nothing can arrive
    assert isinstance(slow.events[-1], QueryFinished) and slow.events[-1].rows == 7
    assert isinstance(slow.events[0], QueryStarted)
    metrics = run.ctx.metrics.snapshot()
    for operator_id, totals in metrics.items():
        assert sum(e.batches for e in slow.events if isinstance(e, BatchProduced)
                   and e.operator_id == operator_id) == totals["output_batches"]
    reservations = [e for e in slow.events if isinstance(e, ReservationChanged)]
    assert reservations and reservations[-1].pool_total == 0  # the pool ends empty
    assert max(e.pool_peak for e in reservations) == run.ctx.memory_pool.peak > 0
    assert any(isinstance(e, RepartitionOutput) for e in slow.events)


def test_a_raising_observer_is_reported_once_and_detached():
    session = _session(rows=5_000, batch_size=100)
    calls, recorder = [], Finished()

    def broken(event):
        calls.append(event)
        if len(calls) == 3:  # QueryStarted, an OperatorStarted, then it fails
            raise RuntimeError("observer bug")

    with pytest.warns(RuntimeWarning, match="observer bug.*detached") as caught:
        run = session.sql("SELECT k, v FROM t").execute(observer=[broken, recorder])
    assert run.result.num_rows == 5_000
    assert len([w for w in caught if "detached" in str(w.message)]) == 1
    assert len(calls) == 3  # called no more after it raised
    assert isinstance(recorder.events[-1], QueryFinished)  # the other observer is unaffected
    assert sum(e.rows for e in recorder.events if isinstance(e, BatchProduced)
               and e.operator_id == run.plan.operator_id) == 5_000


def test_a_failed_query_flushes_and_leaves_no_thread():
    session = _session(rows=5_000, batch_size=100)
    slow = Gate(sleep=0.0005)
    slow.release.set()
    before = set(threading.enumerate())
    with pytest.raises(ExecutionError):
        session.sql("SELECT CAST(s AS INTEGER) AS i FROM t").execute(observer=slow)
    assert _new_threads(before) == []
    assert isinstance(slow.events[-1], QueryFailed)
    starts = sum(isinstance(e, OperatorStarted) for e in slow.events)
    assert starts == sum(isinstance(e, OperatorFinished) for e in slow.events) > 0


class _CancellingSource(MemorySource):
    """Cancels the query after the first batch it reads, from the engine's own thread."""

    query = None

    def read(self, unit, columns, batch_size):
        for i, batch in enumerate(super().read(unit, columns, batch_size)):
            yield batch
            if i == 0:
                self.query.cancel()


def test_a_cancelled_query_flushes_and_leaves_no_thread():
    session = ps.Session(target_partitions=2, batch_size=100)
    source = _CancellingSource(pa.table({"v": list(range(50_000))}))
    session.register("t", source)
    query = session.sql("SELECT v * 2 AS w FROM t WHERE v > 3")
    source.query = query
    slow = Gate(sleep=0.0005)
    slow.release.set()
    before = set(threading.enumerate())
    with pytest.raises(Cancelled):
        query.execute(observer=slow)
    assert _new_threads(before) == []
    assert isinstance(slow.events[-1], QueryCancelled)
    assert sum(isinstance(e, QueryCancelled) for e in slow.events) == 1
    assert _session(rows=100).sql("SELECT count(*) AS n FROM t").to_arrow()["n"][0].as_py() == 100


def test_cancel_stops_a_flush_that_waits_for_a_stuck_observer():
    session = _session(rows=5_000, batch_size=100)
    query = session.sql("SELECT k, v FROM t")
    stuck, fast, outcome = Gate(), Finished(), {}
    thread = threading.Thread(target=lambda: outcome.update(
        run=query.execute(observer=[stuck, fast])))
    thread.start()
    assert fast.ended.wait(120)  # the engine is done; execute() waits for the stuck observer
    assert stuck.entered.wait(60)
    query.cancel()
    thread.join(60)
    assert not thread.is_alive() and outcome["run"].result.num_rows == 5_000
    assert len(stuck.events) == 1  # what was still pending was dropped
    stuck.release.set()  # let its thread end


def test_batch_bytes_are_measured_or_estimated_exactly_for_fixed_width_columns():
    """nbytes is measured on the latest batch of each event; its rows at bytes per row."""
    import numpy as np

    session = ps.Session(target_partitions=1, batch_size=37)
    session.register("t", pa.table({"k": np.arange(5_000), "v": np.arange(5_000) * 0.5}))
    recorder = Finished()
    run = session.sql("SELECT k, v FROM t WHERE v > 10").execute(observer=recorder)
    root = [e for e in recorder.events
            if isinstance(e, BatchProduced) and e.operator_id == run.plan.operator_id]
    assert sum(e.batches for e in root) > 50
    assert sum(e.bytes for e in root) == sum(b.nbytes for b in run.result.to_batches()) > 0
