"""Chrome trace-event JSON of profiled runs: open the file in https://ui.perfetto.dev.

Mapping (the "JSON Object Format" of the Trace Event Format)::

    pid  = one query run (two runs side by side when comparing)
    tid  = one operator partition: a track named "SortExec #3 p0", in EXPLAIN order
    "X"  = a complete event per operator partition run (ts, dur in microseconds)
    "C"  = counters: process RSS and CPU % (sampler), memory pool reserved (events)
    "i"  = an instant per spill file written, on the spilling operator partition's track

Times are microseconds from the run's own start, so runs compared in one file line up at 0.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from plansight.profiling.sampler import Sample
from plansight.profiling.timeline import Timeline

_MB = 1024 * 1024


def trace_events(timeline: Timeline, samples: Iterable[Sample] = (), pid: int = 1,
                 name: str = "query") -> list[dict[str, Any]]:
    """The trace events of one run (metadata, complete events, counters, instants)."""
    samples = list(samples)
    origin = min([timeline.start] + [s.time for s in samples])

    def ts(t: float) -> float:
        return round((t - origin) * 1e6, 3)

    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}},
    ]
    seen: dict[tuple[int, int], int] = {}
    tracks: dict[tuple[int, int], int] = {}  # (operator id, partition) -> its first track
    for tid, (operator_id, partition, lane) in enumerate(timeline.lanes(), start=1):
        tracks.setdefault((operator_id, partition), tid)
        repeat = seen.get((operator_id, partition), 0)
        seen[(operator_id, partition)] = repeat + 1
        track = f"{timeline.names.get(operator_id, '?')} #{operator_id} p{partition}"
        if repeat:
            track += f" ({repeat + 1})"
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": track}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                       "args": {"sort_index": tid}})
        for span in lane:
            events.append({
                "ph": "X", "cat": "operator", "name": span.operator, "pid": pid, "tid": tid,
                "ts": ts(span.start), "dur": round(max(span.duration, 0.0) * 1e6, 3),
                "args": {"operator_id": span.operator_id, "partition": span.partition,
                         "rows": span.rows, "batches": span.batches, "bytes": span.bytes,
                         "finished": span.finished,
                         "first_output_ms": None if span.first_output is None else
                         round((span.first_output - span.start) * 1000, 3)}})
    for sample in samples:
        events.append({"ph": "C", "name": "process RSS (MB)", "pid": pid, "ts": ts(sample.time),
                       "args": {"rss": round(sample.rss / _MB, 3)}})
        events.append({"ph": "C", "name": "CPU %", "pid": pid, "ts": ts(sample.time),
                       "args": {"cpu": round(sample.cpu_percent, 1)}})
    for time, total in timeline.pool:
        events.append({"ph": "C", "name": "memory pool reserved (MB)", "pid": pid, "ts": ts(time),
                       "args": {"reserved": round(total / _MB, 3)}})
    for spill in timeline.spills:
        event = {"ph": "i", "s": "p", "cat": "spill", "name": f"spill {spill.operator}",
                 "pid": pid, "ts": ts(spill.time),
                 "args": {"operator": spill.operator, "rows": spill.rows, "bytes": spill.bytes}}
        tid = tracks.get((getattr(spill, "operator_id", None), getattr(spill, "partition", None)))
        if tid is not None:  # on the spilling operator partition's own track
            event.update(s="t", tid=tid)
        events.append(event)
    return events


def chrome_trace(*profiles) -> dict[str, Any]:
    """One trace of one or more profiles (``plansight.profiling.Profile``), a process each.

    Example:
        >>> import json, pyarrow as pa, plansight as ps
        >>> from plansight.profiling import profile_query
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.table({"x": [1, 2, 3]}))
        >>> trace = chrome_trace(profile_query(s.sql("SELECT sum(x) AS s FROM t")))
        >>> sorted({e["name"] for e in trace["traceEvents"] if e["ph"] == "X"})
        ['AggregateExec', 'DataSourceExec', 'ProjectionExec']
        >>> json.loads(json.dumps(trace)) == trace
        True
    """
    events: list[dict[str, Any]] = []
    for pid, profile in enumerate(profiles, start=1):
        events.extend(trace_events(profile.timeline, profile.samples, pid, profile.label))
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"producer": "plansight"}}


def write_trace(path: str | os.PathLike[str], *profiles) -> str:
    """Write ``chrome_trace(*profiles)`` as JSON to ``path``; returns the path as a string."""
    path = os.fspath(path)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(chrome_trace(*profiles), file)
    return path
