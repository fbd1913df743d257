"""Profiling: sampler, timeline, Chrome trace export, run comparison, %%query --profile."""

from __future__ import annotations

import doctest
import importlib
import itertools
import json
import time
from collections import Counter
from xml.etree import ElementTree

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.events import (
    BatchProduced,
    OperatorFinished,
    OperatorStarted,
    QueryCancelled,
    QueryFinished,
    QueryStarted,
    ReservationChanged,
    SpillWritten,
)
from plansight.profiling import (
    Sampler,
    build_timeline,
    chrome_trace,
    compare,
    compare_settings,
    operator_stats,
    profile_query,
    trace_events,
    write_trace,
)
from plansight.profiling.plots import gantt_svg, memory_svg
from plansight.profiling.timeline import plan_operators

MODULES = ["plansight.profiling", "plansight.profiling.sampler", "plansight.profiling.timeline",
           "plansight.profiling.trace_export", "plansight.profiling.profile",
           "plansight.profiling.compare", "plansight.profiling.plots"]


def chunked(n: int, chunk: int) -> pa.Table:
    table = pa.table({"k": [i % 100 for i in range(n)], "v": list(range(n))})
    return pa.Table.from_batches(table.to_batches(max_chunksize=chunk))


@pytest.fixture
def session():
    session = ps.Session(target_partitions=4, batch_size=1000)
    session.register("a", chunked(20_000, 1000))
    session.register("b", pa.table({"k": list(range(100)), "name": [f"n{i}" for i in range(100)]}))
    return session


JOIN_SQL = "SELECT name, count(*) AS n, sum(v) AS s FROM a JOIN b USING (k) GROUP BY name"


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_sampler_produces_samples():
    sampler = Sampler(interval=0.01)
    sampler.start()
    assert sampler.running
    time.sleep(0.2)
    samples = sampler.stop()
    assert not sampler.running
    assert len(samples) >= 5
    assert all(s.rss > 0 and s.cpu_percent >= 0 for s in samples)
    times = [s.time for s in samples]
    assert times == sorted(times)
    assert sampler.stop() == samples  # idempotent
    with pytest.raises(ValueError):
        Sampler(interval=0)


def test_timeline_has_a_span_per_operator_partition(session):
    profile = profile_query(session.sql(JOIN_SQL))
    run = profile.run
    timeline = profile.timeline
    assert timeline.status == "finished"
    metrics = run.ctx.metrics
    spans = {(s.operator_id, s.partition): s for s in timeline.spans}
    assert len(spans) == len(timeline.spans)
    for op in plan_operators(run.plan):
        for m in metrics.partitions(op.operator_id):
            span = spans.pop((op.operator_id, m.partition))
            assert span.operator == op.name and span.finished
            assert span.rows == m["output_rows"] and span.batches == m["output_batches"]
            assert timeline.start <= span.start <= span.end <= timeline.end
    assert spans == {}
    assert timeline.order == [op.operator_id for op in plan_operators(run.plan)]
    assert timeline.pool and timeline.pool_peak == run.ctx.memory_pool.peak > 0
    assert run.profile is profile


def test_chrome_trace_one_complete_event_per_operator_partition(session, tmp_path):
    profile = profile_query(session.sql(JOIN_SQL), interval=0.005)
    path = write_trace(tmp_path / "trace.json", profile)
    with open(path, encoding="utf-8") as file:
        trace = json.load(file)  # valid JSON, as Perfetto and chrome://tracing read it
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    metrics = profile.run.ctx.metrics
    expected = Counter((op.operator_id, m.partition) for op in plan_operators(profile.plan)
                       for m in metrics.partitions(op.operator_id))
    found = Counter((e["args"]["operator_id"], e["args"]["partition"]) for e in complete)
    assert found == expected and set(found.values()) == {1}
    for event in complete:
        assert event["pid"] == 1 and event["ts"] >= 0 and event["dur"] >= 0
        assert event["args"]["rows"] == metrics.for_partition(
            event["args"]["operator_id"], event["name"], event["args"]["partition"])["output_rows"]
    # every operator partition is its own named track; slices on a track never overlap
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    for event in complete:
        assert names[event["tid"]].startswith(f"{event['name']} #{event['args']['operator_id']} ")
    by_tid: dict[int, list] = {}
    for event in complete:
        by_tid.setdefault(event["tid"], []).append(event)
    for slices in by_tid.values():
        slices.sort(key=lambda e: e["ts"])
        for before, after in itertools.pairwise(slices):
            assert before["ts"] + before["dur"] <= after["ts"]
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"process RSS (MB)", "CPU %", "memory pool reserved (MB)"} <= counters
    assert sum(e["name"] == "process RSS (MB)" for e in events) == len(profile.samples) >= 2


def test_two_profiles_in_one_trace(session):
    sql = "SELECT k, count(*) AS n FROM a GROUP BY k"
    first, second = profile_query(session.sql(sql)), profile_query(session.sql(sql))
    trace = chrome_trace(first, second)
    assert {e["pid"] for e in trace["traceEvents"]} == {1, 2}
    processes = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert processes == [first.label, second.label]


def test_unfinished_spans_after_cancel():
    events = [QueryStarted("q", time=1.0), OperatorStarted(1, "SortExec", 0, time=1.1),
              OperatorStarted(2, "DataSourceExec", 0, time=1.2),
              BatchProduced(2, 0, 10, 80, time=1.3),
              OperatorFinished(2, "DataSourceExec", 0, 10, 0.2, time=1.4),
              ReservationChanged("SortExec[0]", 80, 80, time=1.35),
              QueryCancelled(time=2.0)]
    timeline = build_timeline(events)
    assert timeline.status == "cancelled" and timeline.duration == pytest.approx(1.0)
    sort, scan = timeline.spans
    assert (sort.operator, sort.finished, sort.end) == ("SortExec", False, 2.0)
    assert (scan.rows, scan.batches, scan.bytes, scan.finished) == (10, 1, 80, True)
    assert scan.first_output == 1.3 and sort.first_output is None
    assert timeline.pool == [(1.35, 80)]


def test_repeated_runs_of_one_partition_get_their_own_lanes():
    events = [OperatorStarted(3, "X", 0, time=0.0), OperatorStarted(3, "X", 0, time=0.1),
              OperatorFinished(3, "X", 0, 1, 0.2, time=0.2),
              OperatorFinished(3, "X", 0, 1, 0.2, time=0.3),
              OperatorStarted(3, "X", 0, time=0.4), OperatorFinished(3, "X", 0, 1, 0.1, time=0.5)]
    timeline = build_timeline(events)
    assert len(timeline.spans) == 3
    lanes = timeline.lanes()
    assert [len(lane) for _, _, lane in lanes] == [2, 1]


def test_compare_lists_every_operator(session):
    comparison = compare_settings(session, JOIN_SQL, {"target_partitions": 1},
                                  {"target_partitions": 4})
    first, second = comparison.runs
    for side, profile in (("a", first), ("b", second)):
        listed = [row[side]["operator_id"] for row in comparison.rows if row[side] is not None]
        assert listed == [op.operator_id for op in plan_operators(profile.plan)]
    text = str(comparison)
    for row in comparison.rows:
        assert row["operator"] in text
        assert row["operator"] in comparison._repr_html_()
    assert "target_partitions=1" in text and "target_partitions=4" in text
    # the row counts are the runs' own
    for row in comparison.rows:
        for side, profile in (("a", first), ("b", second)):
            if row[side] is not None:
                assert row[side]["output_rows"] == profile.run.ctx.metrics.total(
                    row[side]["operator_id"], "output_rows")
    assert session.get_option("target_partitions") == 4  # restored


def test_compare_runs_and_stats(session):
    sql = "SELECT k, sum(v) AS s FROM a GROUP BY k ORDER BY k"
    run_a, run_b = session.sql(sql).execute(), session.sql(sql).execute()
    comparison = compare(run_a, run_b)
    assert comparison.labels == ("A", "B")
    assert all(row["a"] is not None and row["b"] is not None for row in comparison.rows)
    stats = operator_stats(run_a)
    assert stats[0]["output_rows"] == 100 and all(s["wall_ms"] >= 0 for s in stats)


def test_plots_are_svg_with_a_bar_per_span(session):
    profile = profile_query(session.sql(JOIN_SQL), interval=0.005)
    gantt = ElementTree.fromstring(profile.gantt_svg())
    bars = gantt.findall("{http://www.w3.org/2000/svg}g")
    assert len(bars) == len(profile.timeline.spans)
    for bar, span in zip(bars, profile.timeline.spans):
        assert f"partition {span.partition}: " in bar.find("{http://www.w3.org/2000/svg}title").text
    memory = ElementTree.fromstring(memory_svg(profile.timeline, profile.samples))
    assert memory.findall("{http://www.w3.org/2000/svg}polyline")
    html = profile._repr_html_()
    assert "plansight-gantt" in html and "plansight-memory" in html
    assert "operator partitions" in repr(profile)
    # many partitions: one row per operator
    many = ps.Session(target_partitions=32)
    many.register("a", chunked(64_000, 1000))
    big = profile_query(many.sql("SELECT k, count(*) AS n FROM a GROUP BY k"))
    rows = ElementTree.fromstring(gantt_svg(big.timeline)).findall(
        "{http://www.w3.org/2000/svg}text")
    assert len(rows) < len(big.timeline.spans)


def test_spills_are_instants_on_their_operator_track():
    events = [QueryStarted("q", time=1.0), OperatorStarted(1, "SortExec", 0, time=1.0),
              SpillWritten("SortExec", 100, 4096, "/tmp/x.arrow", operator_id=1, partition=0,
                           time=1.5),
              OperatorFinished(1, "SortExec", 0, 100, 1.0, time=2.0), QueryFinished(100, time=2.0)]
    timeline = build_timeline(events)
    (spill,) = [e for e in trace_events(timeline) if e["ph"] == "i"]
    (track,) = [e for e in trace_events(timeline) if e["name"] == "thread_name"]
    assert spill["tid"] == track["tid"] and spill["s"] == "t" and spill["ts"] == 500_000
    assert spill["args"] == {"operator": "SortExec", "rows": 100, "bytes": 4096}
    assert "spill" in memory_svg(timeline)


def test_gantt_draws_own_compute_not_the_childrens():
    """A parent's solid marks are its own compute: they do not span its child's."""
    from plansight.engine.exec.events import (
        BatchProduced,
        OperatorFinished,
        OperatorStarted,
        QueryFinished,
        QueryStarted,
    )
    from plansight.profiling.timeline import build_timeline

    events = [QueryStarted("q", time=0.0),
              OperatorStarted(1, "SortExec", 0, time=0.0),
              OperatorStarted(2, "DataSourceExec", 0, time=0.0),
              BatchProduced(2, 0, 10, 80, compute=0.4, time=0.4),
              OperatorFinished(2, "DataSourceExec", 0, 10, 0.45, compute=0.45, time=0.45),
              BatchProduced(1, 0, 10, 80, compute=0.5, time=1.0),
              OperatorFinished(1, "SortExec", 0, 10, 1.0, compute=0.5, time=1.0),
              QueryFinished(10, time=1.0)]
    timeline = build_timeline(events)
    sort, scan = timeline.for_operator(1)[0], timeline.for_operator(2)[0]
    assert (sort.duration, sort.compute, sort.busy) == (1.0, 0.5, ((0.5, 1.0),))
    assert scan.busy == ((0.0, 0.4), (0.4, 0.45)) and scan.compute == pytest.approx(0.45)
    svg = ElementTree.fromstring(gantt_svg(timeline))
    solid = [r for r in svg.iter("{http://www.w3.org/2000/svg}rect")
             if r.get("class") == "plansight-self"]
    assert len(solid) == 3
    assert "own compute 500.00 ms of 1000.00 ms wall" in gantt_svg(timeline)
