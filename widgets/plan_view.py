"""QueryMonitor: a live view of a running plan — per-operator rows, batches, elapsed time,
memory pool use, spills and rows per partition after each repartition.

Threads and responsibilities::

    engine threads ──events──> event bus ──> QueryMonitor.__call__   (on the bus's delivery
                                             thread: record into a locked state; never touch
                                             a widget; batches arrive summed when it lags)
    cell thread    ──poll────> snapshot() ─> render_html ─> HTML widget.value
                               at most once per ``min_interval`` and only when something
                               changed (snapshots coalesce); one final refresh always

The query runs in a worker thread so that the cell thread stays free to refresh the widget
(and to receive KeyboardInterrupt, which cancels the query). Without ipywidgets or a kernel,
the monitor prints a text summary at the end instead.
"""

from __future__ import annotations

import html
import threading
import time
from dataclasses import dataclass, field, replace

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

from plansight.errors import Cancelled

MAX_SKEW_PARTITIONS = 32  # partitions drawn per repartition; the rest are summarised
SKEW_FACTOR = 4  # a repartition is flagged as skewed when max >= SKEW_FACTOR x median rows


@dataclass
class OperatorState:
    """What the monitor has seen of one operator, summed over its partitions."""

    output_rows: int = 0
    output_batches: int = 0
    started: dict[int, float] = field(default_factory=dict)  # partition -> start time
    finished: dict[int, float] = field(default_factory=dict)  # partition -> end time

    def elapsed(self, now: float) -> float:
        """Wall time from the first partition start to the last end (or now)."""
        if not self.started:
            return 0.0
        running = len(self.finished) < len(self.started)
        end = now if running else max(self.finished.values())
        return max(0.0, end - min(self.started.values()))

    def copy(self) -> OperatorState:
        return replace(self, started=dict(self.started), finished=dict(self.finished))


@dataclass
class MonitorSnapshot:
    """A consistent copy of the monitor's state at one instant."""

    version: int
    status: str  # pending | running | finished | failed | cancelled
    elapsed: float
    operators: dict[int, OperatorState]
    pool_total: int
    pool_peak: int
    spill_count: int
    spilled_rows: int
    spilled_bytes: int
    repartitions: dict[int, tuple[int, ...]]
    result_rows: int | None
    error: str | None
    now: float


class QueryMonitor:
    """Observe a query's events and mirror them into a (rate-limited) widget.

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.table({"x": [1, 2, 3]}))
        >>> monitor = QueryMonitor(s.sql("SELECT x FROM t WHERE x > 1"), live=False, show=False)
        >>> monitor.run().result.num_rows, monitor.snapshot().status
        (2, 'finished')
    """

    def __init__(self, query, min_interval: float = 0.2, live: bool | None = None,
                 show: bool = True, observers=()):
        self.query = query
        self.observers = list(observers)  # more engine observers (e.g. a profiler)
        self.min_interval = min_interval
        self.live = _widgets_available() if live is None else live
        self.show = show
        self.widget = None
        self.refresh_count = 0
        self._lock = threading.Lock()
        self._version = 0
        self._status = "pending"
        self._start: float | None = None
        self._end: float | None = None
        self._operators: dict[int, OperatorState] = {}
        self._pool_total = self._pool_peak = 0
        self._spill_count = self._spilled_rows = self._spilled_bytes = 0
        self._repartitions: dict[int, tuple[int, ...]] = {}
        self._result_rows: int | None = None
        self._error: str | None = None

    # -- engine side: called from engine threads --------------------------------
    def __call__(self, event: Event) -> None:
        with self._lock:
            self._version += 1
            if isinstance(event, BatchProduced):
                state = self._operator(event.operator_id)
                state.output_rows += event.rows
                state.output_batches += event.batches  # > 1 when events coalesced
            elif isinstance(event, OperatorStarted):
                self._operator(event.operator_id).started[event.partition] = event.time
            elif isinstance(event, OperatorFinished):
                self._operator(event.operator_id).finished[event.partition] = event.time
            elif isinstance(event, ReservationChanged):
                self._pool_total = event.pool_total
                self._pool_peak = max(self._pool_peak, event.pool_peak, event.pool_total)
            elif isinstance(event, SpillWritten):
                self._spill_count += 1
                self._spilled_rows += event.rows
                self._spilled_bytes += event.bytes
            elif isinstance(event, RepartitionOutput):
                self._repartitions[event.operator_id] = tuple(event.rows_per_partition)
            elif isinstance(event, QueryStarted):
                self._status, self._start = "running", event.time
            elif isinstance(event, QueryFinished):
                self._status, self._end, self._result_rows = "finished", event.time, event.rows
            elif isinstance(event, QueryFailed):
                self._status, self._end, self._error = "failed", event.time, event.error
            elif isinstance(event, QueryCancelled):
                self._status, self._end = "cancelled", event.time

    def _operator(self, operator_id: int) -> OperatorState:
        state = self._operators.get(operator_id)
        if state is None:
            state = self._operators[operator_id] = OperatorState()
        return state

    def snapshot(self) -> MonitorSnapshot:
        now = time.perf_counter()
        with self._lock:
            start = self._start if self._start is not None else now
            return MonitorSnapshot(
                version=self._version, status=self._status,
                elapsed=(self._end if self._end is not None else now) - start,
                operators={k: v.copy() for k, v in self._operators.items()},
                pool_total=self._pool_total, pool_peak=self._pool_peak,
                spill_count=self._spill_count, spilled_rows=self._spilled_rows,
                spilled_bytes=self._spilled_bytes, repartitions=dict(self._repartitions),
                result_rows=self._result_rows, error=self._error, now=now)

    # -- cell side ----------------------------------------------------------------
    def run(self):
        """Execute the query in a worker thread, refreshing the view; returns the QueryRun."""
        outcome: dict = {}

        def work():
            try:
                outcome["run"] = self.query.execute(observer=[self, *self.observers])
            except BaseException as error:  # noqa: BLE001 -- re-raised in the cell thread
                outcome["error"] = error

        handle = self._open_view()
        worker = threading.Thread(target=work, name="plansight-query", daemon=True)
        worker.start()
        rendered = -1
        try:
            while worker.is_alive():
                worker.join(self.min_interval)
                snap = self.snapshot()
                if worker.is_alive() and snap.version != rendered:
                    self._refresh(snap)
                    rendered = snap.version
        except KeyboardInterrupt:
            self.query.cancel()
            while worker.is_alive():
                worker.join(0.1)
            with self._lock:
                self._status = "cancelled"
            self._close_view(handle, self.snapshot())
            raise Cancelled("query cancelled") from None
        self._close_view(handle, self.snapshot())
        if "error" in outcome:
            raise outcome["error"]
        return outcome["run"]

    def _open_view(self):
        if not self.live:
            return None
        import ipywidgets

        self.widget = ipywidgets.HTML(value=render_html(self.snapshot(), self.query.physical))
        if self.show:
            from IPython.display import display

            return display(self.widget, display_id=True)
        return None

    def _refresh(self, snap: MonitorSnapshot) -> None:
        if self.widget is not None:
            self.widget.value = render_html(snap, self.query.physical)
            self.refresh_count += 1

    def _close_view(self, handle, final: MonitorSnapshot) -> None:
        """The final snapshot always lands in the widget; the live view becomes static HTML."""
        self._refresh(final)
        if not self.show:
            return
        if handle is not None:
            from IPython.display import HTML

            handle.update(HTML(render_html(final, self.query.physical)))
            self.widget.close()
        elif not self.live:
            print(render_text(final, self.query.physical))


def _widgets_available() -> bool:
    """Live widgets need ipywidgets and a kernel to talk to (not plain terminal IPython)."""
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


# ----------------------------------------------------------------------------- rendering

def plan_rows(plan) -> list[tuple[int, object]]:
    """(depth, operator) in EXPLAIN order: parents before children."""
    rows: list[tuple[int, object]] = []

    def walk(op, depth):
        rows.append((depth, op))
        for child in op.children():
            walk(child, depth + 1)

    if plan is not None:
        walk(plan, 0)
    return rows


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _headline(snap: MonitorSnapshot) -> str:
    text = f"{snap.status} · {snap.elapsed * 1000:.0f} ms"
    if snap.result_rows is not None:
        text += f" · {snap.result_rows:,} rows"
    text += f" · memory {_bytes(snap.pool_total)} (peak {_bytes(snap.pool_peak)})"
    text += f" · spills {snap.spill_count}"
    if snap.spill_count:
        text += f" ({snap.spilled_rows:,} rows, {_bytes(snap.spilled_bytes)})"
    return text


def render_text(snap: MonitorSnapshot, plan) -> str:
    """A plain-text summary: headline, then the plan with per-operator counters."""
    lines = [_headline(snap)]
    for depth, op in plan_rows(plan):
        state = snap.operators.get(op.operator_id, OperatorState())
        lines.append(f"{'  ' * depth}{op.name}: rows={state.output_rows:,} "
                     f"batches={state.output_batches:,} "
                     f"elapsed={state.elapsed(snap.now) * 1000:.1f}ms")
    for operator_id, rows in snap.repartitions.items():
        summary = skew_summary(rows)
        flag = (f" -- skewed: partition {summary['worst']} has {summary['max']:,} rows"
                if summary["skewed"] else "")
        lines.append(f"rows per partition (operator {operator_id}): {list(rows)}{flag}")
    if snap.error:
        lines.append(f"error: {snap.error}")
    return "\n".join(lines)


_CELL = "padding:1px 8px;line-height:1.35"
_NUMBER = f"style='text-align:right;{_CELL}'"
_CODE = "background:none;padding:0;font-size:11px"


# No Cancel button: clicks reach the kernel only after the busy cell ends (ipykernel < 7 /
# JupyterLab < 4.4), so the interrupt is the way, and it stops every thread within a batch.
_CANCEL_HINT = ("<div style='color:#888'>to cancel: interrupt the kernel (■, or I I); the "
                "query stops within one batch and the next cell works</div>")


def render_html(snap: MonitorSnapshot, plan) -> str:
    """The monitor's HTML: headline, plan table and per-partition bars after repartitions."""
    esc = html.escape
    colour = {"running": "#1f77b4", "finished": "#2ca02c", "failed": "#d62728",
              "cancelled": "#ff7f0e"}.get(snap.status, "#888")
    body = []
    for depth, op in plan_rows(plan):
        state = snap.operators.get(op.operator_id, OperatorState())
        total = op.output_partitioning().count
        done = len(state.finished)
        label = op.display()
        short = label if len(label) <= 90 else label[:89] + "…"
        running = " ▸" if state.started and done < len(state.started) else ""
        body.append(
            f"<tr><td style='text-align:left;{_CELL};padding-left:{depth * 1.2 + 0.3:.1f}em' "
            f"title='{esc(label)}'><code style='{_CODE}'>{esc(short)}</code>{running}</td>"
            f"<td {_NUMBER}>{done}/{total}</td><td {_NUMBER}>{state.output_rows:,}</td>"
            f"<td {_NUMBER}>{state.output_batches:,}</td>"
            f"<td {_NUMBER}>{state.elapsed(snap.now) * 1000:.1f}</td></tr>")
    header = "".join(f"<th style='text-align:{align};{_CELL}'>{name}</th>" for name, align in (
        ("operator", "left"), ("partitions", "right"), ("output rows", "right"),
        ("batches", "right"), ("elapsed ms", "right")))
    # inline styles only: the same look in a live widget and in the static snapshot
    parts = [(f"<div class='plansight-monitor' style='font-size:12px;line-height:1.35'>"
              f"<div style='color:{colour};font-weight:bold'>{esc(_headline(snap))}</div>"),
             *([_CANCEL_HINT] if snap.status == "running" else []),
             (f"<table style='border-collapse:collapse;margin:2px 0'><thead><tr>{header}</tr>"
              f"</thead><tbody>{''.join(body)}</tbody></table>")]
    for operator_id, rows in snap.repartitions.items():
        parts.append(_skew_html(operator_id, rows))
    if snap.error:
        parts.append(f"<div style='color:#d62728'>{esc(snap.error)}</div>")
    parts.append("</div>")
    return "".join(parts)


def skew_summary(rows: tuple[int, ...]) -> dict:
    """min / p25 / median / p75 / max of rows per partition, the worst partition, and whether
    it is skewed (max at least ``SKEW_FACTOR`` times the median).

    Example:
        >>> summary = skew_summary((10, 12, 9, 200))
        >>> summary["median"], summary["worst"], summary["skewed"]
        (11.0, 3, True)
    """
    ordered = sorted(rows)
    if not ordered:
        return {"min": 0, "p25": 0.0, "median": 0.0, "p75": 0.0, "max": 0, "worst": None,
                "skewed": False}

    def quantile(q: float) -> float:  # linear interpolation, like numpy's default
        position = q * (len(ordered) - 1)
        low = int(position)
        high = min(low + 1, len(ordered) - 1)
        return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))

    median = quantile(0.5)
    top = ordered[-1]
    return {"min": ordered[0], "p25": quantile(0.25), "median": median, "p75": quantile(0.75),
            "max": top, "worst": rows.index(top),
            "skewed": len(rows) > 1 and top > 0 and top >= SKEW_FACTOR * median}


def _skew_html(operator_id: int, rows: tuple[int, ...]) -> str:
    shown = rows[:MAX_SKEW_PARTITIONS]
    top = max(rows, default=0) or 1
    summary = skew_summary(rows)
    bars = "".join(
        f"<div title='partition {i}: {r:,} rows' style='display:inline-block;width:8px;"
        f"margin-right:1px;vertical-align:bottom;"
        f"background:{'#d62728' if summary['skewed'] and i == summary['worst'] else '#1f77b4'};"
        f"height:{max(1, round(40 * r / top))}px'></div>" for i, r in enumerate(shown))
    more = f" (first {MAX_SKEW_PARTITIONS} of {len(rows)})" if len(rows) > len(shown) else ""
    stats = (f"min {summary['min']:,}, p25 {summary['p25']:,.0f}, median {summary['median']:,.0f}"
             f", p75 {summary['p75']:,.0f}, max {summary['max']:,}")
    flag = ""
    if summary["skewed"]:
        flag = (f" <span class='plansight-skewed' style='color:#d62728;font-weight:bold'>"
                f"skewed: partition {summary['worst']} has {summary['max']:,} rows, "
                f"≥ {SKEW_FACTOR}× the median</span>")
    return (f"<div class='plansight-skew' style='margin-top:4px'>rows per partition, "
            f"RepartitionExec #{operator_id}{more}: {stats}{flag}"
            f"<div style='height:42px'>{bars}</div></div>")
