"""Timeline: when each operator partition ran, built from the engine's events.

An operator partition runs from its ``OperatorStarted`` (its stream's first ``next()``) to its
``OperatorFinished`` (the stream ended or was closed). That span is *inclusive*: a parent's
span contains the time it waited for its children. Its ``busy`` stretches are *own* time: the
compute each ``BatchProduced`` reports (children excluded), so a parent's work does not
cover its children's. ``BatchProduced``
events add the rows, batches and bytes each span emitted; ``ReservationChanged`` events give
the memory pool's reserved total over time. The first batch's time splits a span in two:
before it the operator only consumed input (a sort reading everything), after it it emitted.

    operator partition   0 ms ─────────────────────────────────────────── 40 ms
    SortExec #1 p0            ████████████████████████████████████████████
    RepartitionExec #2 p0        ███████████████████████████
    RepartitionExec #2 p1        ████████████████████████████████
    DataSourceExec #3 p0         ██████████████

An operator partition may run more than once (a nested-loop join reads its build side once
per probe partition); starts and finishes of one (operator, partition) pair up in order.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from plansight.engine.exec.events import (
    BatchProduced,
    Event,
    OperatorFinished,
    OperatorStarted,
    QueryCancelled,
    QueryFailed,
    QueryFinished,
    QueryStarted,
    RepartitionOutput,
    ReservationChanged,
    SpillWritten,
)


@dataclass(frozen=True)
class Span:
    """One execution of one operator partition; times are perf_counter seconds."""

    operator_id: int
    operator: str
    partition: int
    start: float
    end: float
    rows: int = 0
    batches: int = 0
    bytes: int = 0
    finished: bool = True  # False: the query stopped before this partition's stream ended
    first_output: float | None = None  # when the first batch came out (None: no rows)
    compute: float = 0.0  # own compute seconds: children and waits excluded
    # (start, end) stretches when it computed: each event's own compute, placed just before
    # the event (at the delivery thread's ~20 ms resolution)
    busy: tuple[tuple[float, float], ...] = ()

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass
class Timeline:
    """Spans of every operator partition plus the pool's reserved bytes over time.

    ``order`` lists operator ids in EXPLAIN order (parents first) when the plan is known,
    else in order of first start.
    """

    spans: list[Span]
    start: float
    end: float
    order: list[int]
    names: dict[int, str]
    pool: list[tuple[float, int]] = field(default_factory=list)
    spills: list[SpillWritten] = field(default_factory=list)
    repartitions: dict[int, tuple[int, ...]] = field(default_factory=dict)
    status: str = "finished"
    # the pool's largest reserved total: ``pool`` may miss it when a lagging observer got
    # only the latest change per consumer, the events' pool_peak does not
    pool_peak: int = 0

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)

    def for_operator(self, operator_id: int) -> list[Span]:
        """Spans of one operator, by partition then start."""
        return sorted((s for s in self.spans if s.operator_id == operator_id),
                      key=lambda s: (s.partition, s.start))

    def operator_wall(self, operator_id: int) -> float:
        """Seconds from the operator's first partition start to its last partition end."""
        spans = self.for_operator(operator_id)
        if not spans:
            return 0.0
        return max(s.end for s in spans) - min(s.start for s in spans)

    def lanes(self) -> list[tuple[int, int, list[Span]]]:
        """(operator id, partition, spans) rows for a Gantt chart, in ``order``.

        Executions of one operator partition that overlap in time get a row each, so that
        no two spans of a row overlap (a trace viewer needs properly nested slices).
        """
        rows: list[tuple[int, int, list[Span]]] = []
        for operator_id in self.order:
            by_partition: dict[int, list[Span]] = defaultdict(list)
            for span in self.for_operator(operator_id):
                by_partition[span.partition].append(span)
            for partition in sorted(by_partition):
                lanes: list[list[Span]] = []
                for span in by_partition[partition]:
                    for lane in lanes:
                        if lane[-1].end <= span.start:
                            lane.append(span)
                            break
                    else:
                        lanes.append([span])
                rows.extend((operator_id, partition, lane) for lane in lanes)
        return rows


class TimelineRecorder:
    """An engine observer that only appends events (thread-safe, cheap); ``timeline()`` builds.

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.table({"x": [1, 2, 3]}))
        >>> recorder = TimelineRecorder()
        >>> run = s.sql("SELECT x FROM t WHERE x > 1").execute(observer=recorder)
        >>> timeline = recorder.timeline(run.plan)
        >>> [(s.operator, s.partition, s.rows) for s in timeline.spans][:1]
        [('ProjectionExec', 0, 2)]
    """

    def __init__(self):
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def timeline(self, plan=None) -> Timeline:
        with self._lock:
            events = list(self.events)
        return build_timeline(events, plan)


def build_timeline(events: Iterable[Event], plan=None) -> Timeline:
    """Pair operator starts and finishes into spans; count each span's batches.

    Args:
        events: Engine events of one query run, in publication order.
        plan: The physical plan (optional): gives the operators' EXPLAIN order.
    """
    events = sorted(events, key=lambda e: e.time)  # threads publish nearly, not exactly, in order
    open_spans: dict[tuple[int, int], deque[dict]] = defaultdict(deque)
    spans: list[Span] = []
    names: dict[int, str] = {}
    first_seen: list[int] = []
    pool: list[tuple[float, int]] = []
    pool_peak = 0
    spills: list[SpillWritten] = []
    repartitions: dict[int, tuple[int, ...]] = {}
    query_start = query_end = None
    status = "running"
    for event in events:
        if isinstance(event, OperatorStarted):
            if event.operator_id not in names:
                first_seen.append(event.operator_id)
            names[event.operator_id] = event.operator
            open_spans[(event.operator_id, event.partition)].append(
                {"start": event.time, "rows": 0, "batches": 0, "bytes": 0, "first": None,
                 "compute": 0.0, "busy": [], "last": event.time})
        elif isinstance(event, BatchProduced):
            pending = open_spans.get((event.operator_id, event.partition))
            if pending:
                # concurrent executions of one operator partition cannot be told apart:
                # the batch counts for the most recently started one
                current = pending[-1]
                if current["first"] is None:
                    current["first"] = event.time
                current["rows"] += event.rows
                current["batches"] += event.batches  # the batches since the run's previous event
                current["bytes"] += event.bytes
                _busy(current, event.time, event.compute)
        elif isinstance(event, OperatorFinished):
            pending = open_spans.get((event.operator_id, event.partition))
            if pending:
                opened = pending.popleft()
                _busy(opened, event.time, event.compute - opened["compute"])  # after the last
                spans.append(Span(event.operator_id, event.operator, event.partition,
                                  opened["start"], event.time, event.rows, opened["batches"],
                                  opened["bytes"], True, opened["first"],
                                  max(event.compute, opened["compute"]),
                                  tuple(opened["busy"])))
        elif isinstance(event, ReservationChanged):
            pool.append((event.time, event.pool_total))
            pool_peak = max(pool_peak, event.pool_total, event.pool_peak)
        elif isinstance(event, SpillWritten):
            spills.append(event)
        elif isinstance(event, RepartitionOutput):
            repartitions[event.operator_id] = tuple(event.rows_per_partition)
        elif isinstance(event, QueryStarted):
            query_start = event.time
        elif isinstance(event, (QueryFinished, QueryFailed, QueryCancelled)):
            query_end = event.time
            status = {QueryFinished: "finished", QueryFailed: "failed",
                      QueryCancelled: "cancelled"}[type(event)]
    last = events[-1].time if events else 0.0
    end = query_end if query_end is not None else last
    for (operator_id, partition), pending in open_spans.items():
        for opened in pending:  # never finished: the query failed or was cancelled
            spans.append(Span(operator_id, names[operator_id], partition, opened["start"], end,
                              opened["rows"], opened["batches"], opened["bytes"], False,
                              opened["first"], opened["compute"], tuple(opened["busy"])))
    start = query_start if query_start is not None else min(
        (s.start for s in spans), default=end)
    order = first_seen
    if plan is not None:
        operators = plan_operators(plan)
        planned = [op.operator_id for op in operators]
        order = planned + [op for op in first_seen if op not in set(planned)]
        for op in operators:
            names.setdefault(op.operator_id, op.name)
    rank = {operator_id: i for i, operator_id in enumerate(order)}
    spans.sort(key=lambda s: (rank.get(s.operator_id, len(rank)), s.partition, s.start))
    return Timeline(spans, start, end, order, names, pool, spills, repartitions, status,
                    pool_peak)


def _busy(opened: dict, at: float, compute: float) -> None:
    """Record ``compute`` seconds of own work that ended by ``at``: the stretch just before
    it, never before the previous event of the span (it computed after that)."""
    if compute > 0:
        opened["compute"] += compute
        opened["busy"].append((max(opened["last"], at - compute), at))
    opened["last"] = max(opened["last"], at)


def plan_operators(plan) -> list:
    """The plan's operators in EXPLAIN order: each parent before its children."""
    return [op for _, op in plan.walk()]
