"""QueryMonitor: a live view of a running plan that answers where the time and the memory
go — per operator its own compute (children excluded, a bar scaled to the query's total,
the hottest in red) beside its wall time, the bytes its memory consumers hold now and at
their peak against the pool's limit, its spills (and a feed of them), progress weighted over
the scan and each blocking operator, and rows and bytes per partition at each repartition
while it routes.

Threads and responsibilities::

    engine threads ──events──> event bus ──> QueryMonitor.__call__   (on the bus's delivery
                                             thread: record into a locked state; never touch
                                             a widget; batches arrive summed when it lags)
    cell thread    ──poll────> snapshot() ─> render_html ─> HTML widget.value
                               at most once per ``min_interval`` and only when something
                               changed (snapshots coalesce); one final refresh always

The query runs in a worker thread so that the cell thread stays free to refresh the widget
(and to receive KeyboardInterrupt, which cancels the query). Without ipywidgets or a kernel,
the monitor writes a text progress line while the query runs and a text summary at the end.

Progress compares the rows the scans have read (produced, or dropped by a join's dynamic
filter) with what the sources' statistics say they hold (``DataSourceExec.estimated_rows``);
a query that reads less (a LIMIT, row groups skipped by statistics) says so instead of
jumping to 100%. While the query runs, that scan is one phase of equal weight with each
blocking operator (sort, aggregate, window, merge), so a sort still working after the scan
keeps the bar below 100% and the text names it ("sorting (SortExec #3)").

Memory consumers are named ``"<Exec>[<partition>]"``: a consumer belongs to the only
operator of that name, else to the one of that name still running.

Cancel button: a click reaches a kernel whose main shell is busy only when the front end
sends widget messages on a kernel subshell (JEP 91: ipykernel >= 7, JupyterLab >= 4.4, which
opens one subshell per comm target). The monitor shows the button once the kernel has a
subshell; elsewhere it says to interrupt the kernel, which cancels the same way.
"""

from __future__ import annotations

import html
import re
import sys
import threading
import time
from collections import deque
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
    TaskFinished,
)
from plansight.engine.exec.memory_pool import format_bytes
from plansight.engine.exec.metrics import format_metric
from plansight.engine.physical.plan import displayed_operators, operator_label, referenced_ids
from plansight.engine.physical.scan import DataSourceExec
from plansight.errors import Cancelled
from plansight.widgets.plan_graph import render_plan_svg
from plansight.widgets.worker_view import (
    WorkerState,
    busiest,
    worker_lines,
    worker_table_html,
)

_CONSUMER = re.compile(r"([A-Za-z]+)")  # a memory consumer's operator name prefix
MAX_SKEW_PARTITIONS = 32  # partitions drawn per repartition; the rest are summarised
SKEW_FACTOR = 4  # a repartition is flagged as skewed when max >= SKEW_FACTOR x median rows


@dataclass
class OperatorState:
    """What the monitor has seen of one operator, summed over its partitions."""

    output_rows: int = 0
    output_batches: int = 0
    started: dict[int, float] = field(default_factory=dict)  # partition -> start time
    finished: dict[int, float] = field(default_factory=dict)  # partition -> end time
    compute: float = 0.0  # own compute seconds (children excluded), all partitions
    run_compute: dict[int, float] = field(default_factory=dict)  # partition -> live run's
    partition_compute: dict[int, float] = field(default_factory=dict)  # partition -> own s
    consumers: dict[str, int] = field(default_factory=dict)  # memory consumer -> bytes now
    memory_peak: int = 0  # the largest sum of its consumers seen
    spill_count: int = 0
    spilled_rows: int = 0
    spilled_bytes: int = 0

    @property
    def memory(self) -> int:
        """Bytes its memory consumers hold now."""
        return sum(self.consumers.values())

    def elapsed(self, now: float) -> float:
        """Wall time from the first partition start to the last end (or now)."""
        if not self.started:
            return 0.0
        running = len(self.finished) < len(self.started)
        end = now if running else max(self.finished.values())
        return max(0.0, end - min(self.started.values()))

    def copy(self) -> OperatorState:
        return replace(self, started=dict(self.started), finished=dict(self.finished),
                       consumers=dict(self.consumers), run_compute=dict(self.run_compute),
                       partition_compute=dict(self.partition_compute))


@dataclass(frozen=True)
class SpillEntry:
    """One line of the spill feed: seconds since the query started, who spilled what."""

    at: float
    operator_id: int
    operator: str
    partition: int
    rows: int
    bytes: int


@dataclass(frozen=True)
class Phase:
    """One weighted step of the progress: the scans, then each blocking operator."""

    name: str  # "scan", "SortExec #7", ...
    fraction: float  # 0..1 of this phase done
    running: bool  # started and not done


#: Operators that take in all (or a large part) of their input before they can emit; the
#: progress gives each its own phase, so it is not 100% while one still works.
BLOCKING = {"SortExec": "sorting", "AggregateExec": "aggregating",
            "WindowAggExec": "computing windows", "BoundedWindowAggExec": "computing windows",
            "HashWindowAggExec": "computing windows", "SortPreservingMergeExec": "merging"}
MAX_SPILL_FEED = 100  # spill feed lines kept (the newest); counts stay exact


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
    rows_scanned: int = 0  # output rows of the plan's scans so far
    rows_estimated: int | None = None  # what the scans' sources hold (None: no scan)
    memory_limit: int | None = None  # the pool's limit (None: unlimited)
    spill_feed: tuple[SpillEntry, ...] = ()  # newest last, at most MAX_SPILL_FEED
    phases: tuple[Phase, ...] = ()  # scan first, then blocking operators (bottom up)
    repartition_bytes: dict[int, tuple[int, ...]] = field(default_factory=dict)
    repartitions_done: frozenset[int] = frozenset()  # repartitions whose inputs all ended
    # per repartition, own compute seconds per output partition of the operators that
    # consume it (up to the next exchange): the work each partition's rows caused
    repartition_times: dict[int, tuple[float, ...]] = field(default_factory=dict)
    # every metric each operator recorded so far (totals over partitions): EXPLAIN
    # ANALYZE's numbers, shown in the table's metrics column under --analyze
    metrics: dict[int, dict[str, float]] = field(default_factory=dict)
    # on a cluster: what each worker's tasks did (empty for a local run)
    workers: dict[str, WorkerState] = field(default_factory=dict)


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
                 show: bool = True, observers=(), cancel_button: bool | None = None,
                 progress_stream=None, detail: bool = False):
        self.query = query
        # the full plan at the end (--analyze): never collapsed, the whole table in text
        self.detail = detail
        self.observers = list(observers)  # more engine observers (e.g. a profiler)
        self.min_interval = min_interval
        self.live = _widgets_available() if live is None else live
        self.show = show
        # None: offer the button once the front end can deliver clicks to the busy kernel
        self.cancel_button_wanted = cancel_button
        self.progress_stream = progress_stream  # text progress without widgets (default stderr)
        self.widget = None  # the HTML view of the snapshot
        self.view = None  # what is displayed: the Cancel button above the HTML view
        self.cancel_button = None
        self.cancel_requested = False
        self._cancel_before_start = False
        self.refresh_count = 0
        self._scan_estimates = {op.operator_id: op.estimated_rows()
                                for _, op in plan_rows(query.physical)
                                if isinstance(op, DataSourceExec)}
        operators = [op for _, op in query.physical.walk()] if query.physical else []
        self._ids_by_name: dict[str, list[int]] = {}
        for op in operators:
            self._ids_by_name.setdefault(op.name, []).append(op.operator_id)
        # (id, name, its input's id, partitions), deepest first: the order they work in
        self._blocking = [(op.operator_id, op.name, op.children()[0].operator_id,
                           op.output_partitioning().count)
                          for op in reversed(operators) if op.name in BLOCKING and op.children()]
        config = getattr(query, "config", None)
        self._memory_limit = getattr(config, "memory_limit", None)
        self._owners: dict[str, int] = {}  # memory consumer -> operator id, while it holds
        self._spill_feed: deque[SpillEntry] = deque(maxlen=MAX_SPILL_FEED)
        self._repartition_bytes: dict[int, tuple[int, ...]] = {}
        self._workers: dict[str, WorkerState] = {}
        self._repartitions_done: set[int] = set()
        self._consumers_of = consumers_of_exchanges(query.physical)
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
                state.output_batches += event.batches  # the batches since the previous event
                state.compute += event.compute
                state.run_compute[event.partition] = (
                    state.run_compute.get(event.partition, 0.0) + event.compute)
                state.partition_compute[event.partition] = (
                    state.partition_compute.get(event.partition, 0.0) + event.compute)
            elif isinstance(event, OperatorStarted):
                self._operator(event.operator_id).started[event.partition] = event.time
            elif isinstance(event, OperatorFinished):
                state = self._operator(event.operator_id)
                state.finished[event.partition] = event.time
                # the run's own time after its last batch (a final pull, a cleanup)
                rest = max(0.0, event.compute - state.run_compute.pop(event.partition, 0.0))
                state.compute += rest
                state.partition_compute[event.partition] = (
                    state.partition_compute.get(event.partition, 0.0) + rest)
            elif isinstance(event, ReservationChanged):
                self._pool_total = event.pool_total
                self._pool_peak = max(self._pool_peak, event.pool_peak, event.pool_total)
                self._reserved(event.consumer, event.size)
            elif isinstance(event, SpillWritten):
                self._spill_count += 1
                self._spilled_rows += event.rows
                self._spilled_bytes += event.bytes
                owner = event.operator_id or self._owner_of(event.operator)
                if owner is not None:
                    state = self._operator(owner)
                    state.spill_count += 1
                    state.spilled_rows += event.rows
                    state.spilled_bytes += event.bytes
                start = self._start if self._start is not None else event.time
                self._spill_feed.append(SpillEntry(event.time - start, owner or 0,
                                                   event.operator, event.partition,
                                                   event.rows, event.bytes))
            elif isinstance(event, RepartitionOutput):
                if event.operator_id not in self._repartitions_done:  # a late live one
                    self._repartitions[event.operator_id] = tuple(event.rows_per_partition)
                    self._repartition_bytes[event.operator_id] = tuple(
                        event.bytes_per_partition)
                if event.final:
                    self._repartitions_done.add(event.operator_id)
            elif isinstance(event, TaskFinished):
                self._workers.setdefault(event.worker, WorkerState()).add(event)
            elif isinstance(event, QueryStarted):
                self._status, self._start = "running", event.time
            elif isinstance(event, QueryFinished):
                self._status, self._end, self._result_rows = "finished", event.time, event.rows
            elif isinstance(event, QueryFailed):
                self._status, self._end, self._error = "failed", event.time, event.error
            elif isinstance(event, QueryCancelled):
                self._status, self._end = "cancelled", event.time

    def _reserved(self, consumer: str, size: int) -> None:
        """Attribute a consumer's new size to its operator (``"<Exec>[<partition>]"``)."""
        owner = self._owners.get(consumer)
        if owner is None:
            owner = self._owner_of(consumer)
            if owner is None:
                return
            self._owners[consumer] = owner
        state = self._operator(owner)
        if size:
            state.consumers[consumer] = size
        else:  # freed: another operator of the same name may reuse the consumer name
            state.consumers.pop(consumer, None)
            self._owners.pop(consumer, None)
        state.memory_peak = max(state.memory_peak, state.memory)

    def _owner_of(self, consumer: str) -> int | None:
        """The operator a consumer name belongs to: the only operator of that name, else the
        one of them still running (two sorts of one plan share the name ``SortExec[0]``)."""
        match = _CONSUMER.match(consumer)
        ids = self._ids_by_name.get(match.group(1), []) if match else []
        if len(ids) <= 1:
            return ids[0] if ids else None
        for operator_id in ids:
            state = self._operators.get(operator_id)
            if state is not None and len(state.finished) < len(state.started):
                return operator_id
        return ids[0]

    def _operator(self, operator_id: int) -> OperatorState:
        state = self._operators.get(operator_id)
        if state is None:
            state = self._operators[operator_id] = OperatorState()
        return state

    def snapshot(self) -> MonitorSnapshot:
        now = time.perf_counter()
        with self._lock:
            start = self._start if self._start is not None else now
            scanned = sum(self._operators[i].output_rows for i in self._scan_estimates
                          if i in self._operators)
            if self._status != "pending":
                scanned += self._rows_dropped_in_scans()
            operators = {k: v.copy() for k, v in self._operators.items()}
            metrics = self._live_metrics()
            for operator_id, totals in metrics.items():
                # live metrics count the batches of runs still going; events only ended runs
                state = operators.setdefault(operator_id, OperatorState())
                state.compute = max(state.compute, totals.get("elapsed_compute", 0.0))
            return MonitorSnapshot(
                version=self._version, status=self._status,
                elapsed=(self._end if self._end is not None else now) - start,
                operators=operators,
                pool_total=self._pool_total, pool_peak=self._pool_peak,
                spill_count=self._spill_count, spilled_rows=self._spilled_rows,
                spilled_bytes=self._spilled_bytes, repartitions=dict(self._repartitions),
                result_rows=self._result_rows, error=self._error, now=now,
                rows_scanned=scanned, rows_estimated=sum(self._scan_estimates.values())
                if self._scan_estimates else None,
                memory_limit=self._memory_limit, spill_feed=tuple(self._spill_feed),
                phases=self._phases(operators, scanned),
                repartition_bytes=dict(self._repartition_bytes),
                repartitions_done=frozenset(self._repartitions_done), metrics=metrics,
                workers={name: state.copy() for name, state in self._workers.items()},
                repartition_times={
                    rep: _times_per_partition(operators, self._consumers_of.get(rep, ()),
                                              len(rows))
                    for rep, rows in self._repartitions.items()})

    def _live_metrics(self) -> dict[int, dict[str, float]]:
        ctx = getattr(self.query, "context", None)
        if ctx is None or self._status == "pending":
            return {}
        return ctx.metrics.snapshot(live=True)

    def _phases(self, operators: dict[int, OperatorState], scanned: int) -> tuple[Phase, ...]:
        """The scan phase (rows read over the estimate), then one phase per blocking operator:
        the rows it emitted over the rows its input gave it, once that input ended (an
        aggregate, whose output is smaller, counts finished partitions instead)."""
        done = self._status == "finished"
        phases = []
        if self._scan_estimates:
            estimate = sum(self._scan_estimates.values())
            scans = [operators.get(i) for i in self._scan_estimates]
            ended = all(s is not None and s.started and len(s.finished) == len(s.started)
                        for s in scans)
            fraction = 1.0 if done or ended else min(1.0, scanned / estimate) if estimate else 0.0
            phases.append(Phase("scan", fraction, fraction < 1.0 and self._status == "running"))
        for operator_id, name, input_id, partitions in self._blocking:
            state = operators.get(operator_id, OperatorState())
            source = operators.get(input_id, OperatorState())
            if done or len(state.finished) >= partitions:
                fraction = 1.0
            elif name == "AggregateExec":
                fraction = 0.9 * len(state.finished) / partitions
            else:
                input_ended = source.started and len(source.finished) == len(source.started)
                fraction = (0.9 * min(1.0, state.output_rows / source.output_rows)
                            if input_ended and source.output_rows else 0.0)
            running = bool(state.started) and fraction < 1.0 and self._status == "running"
            phases.append(Phase(f"{name} #{operator_id}", fraction, running))
        return tuple(phases)

    def _rows_dropped_in_scans(self) -> int:
        """Rows the scans read but dropped (a join's dynamic filter): scanned, yet no event
        counts them. Read from the run's live metrics, which engine threads only add to."""
        ctx = self.query.context
        if ctx is None:
            return 0
        return int(sum(ctx.metrics.total(i, "rows_skipped_dynamic")
                       for i in self._scan_estimates))

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
        rendered, rendered_at = -1, 0.0
        try:
            while worker.is_alive():
                worker.join(self.min_interval)
                if not worker.is_alive():
                    break
                if self._cancel_before_start and self._status != "pending":
                    self._cancel_before_start = False  # Query.execute cleared that click
                    self.query.cancel()
                self._update_cancel_button()
                snap = self.snapshot()
                # new events, or the elapsed time (once a second) while nothing else moves
                if snap.version != rendered or snap.now - rendered_at >= 1.0:
                    self._refresh(snap)
                    rendered, rendered_at = snap.version, snap.now
        except KeyboardInterrupt:
            self.query.cancel()
            while worker.is_alive():
                worker.join(0.1)
            with self._lock:
                self._status = "cancelled"
            self._close_view(handle, self.snapshot())
            raise Cancelled("query cancelled") from None
        self._settle(outcome)
        self._close_view(handle, self.snapshot())
        if "error" in outcome:
            raise outcome["error"]
        return outcome["run"]

    def _settle(self, outcome: dict) -> None:
        """The final status from how the run ended, whatever events were delivered (a
        cancel can cut the bus's last flush short)."""
        error = outcome.get("error")
        with self._lock:
            if isinstance(error, Cancelled):
                self._status = "cancelled"
            elif self._status in ("pending", "running"):
                if error is not None:
                    self._status, self._error = "failed", str(error)
                else:
                    self._status = "finished"
                    self._result_rows = outcome["run"].result.num_rows
            if self._end is None:
                self._end = time.perf_counter()

    # -- cancelling -----------------------------------------------------------------
    def _on_cancel_click(self, _button=None) -> None:
        """Runs where the front end's click is handled (a subshell thread): cancel, no widget
        update; the cell thread shows "cancelling" at its next refresh."""
        self._cancel_before_start = self._status == "pending"
        self.cancel_requested = True
        self.query.cancel()

    def _update_cancel_button(self) -> None:
        button = self.cancel_button
        if button is None:
            return
        if self.cancel_requested and not button.disabled:
            with button.hold_sync():  # one message for both traits
                button.disabled, button.description = True, "cancelling…"
        if button.layout.display == "none" and (self.cancel_button_wanted is True or (
                self.cancel_button_wanted is None and clicks_reach_busy_kernel())):
            button.layout.display = None  # the hint below disappears with the next refresh

    @property
    def cancel_button_shown(self) -> bool:
        return self.cancel_button is not None and self.cancel_button.layout.display != "none"

    # -- the view ---------------------------------------------------------------------
    def _html(self, snap: MonitorSnapshot) -> str:
        return render_html(snap, self.query.physical, cancel_hint=not self.cancel_button_shown,
                           detail=self.detail)

    def _open_view(self):
        if not self.live:
            self._text_progress = self.show and _wants_text_progress(self._progress_stream())
            return None
        import ipywidgets

        self._text_progress = False
        self.widget = ipywidgets.HTML(value=self._html(self.snapshot()))
        if self.cancel_button_wanted is not False:
            self.cancel_button = ipywidgets.Button(
                description="Cancel", icon="stop", button_style="warning",
                tooltip="cancel the query (it stops within one batch)",
                layout=ipywidgets.Layout(display="none", width="8em"))
            self.cancel_button.add_class("plansight-cancel")
            self.cancel_button.on_click(self._on_cancel_click)
            _handle_messages_where_sent(self.cancel_button)
            self._update_cancel_button()
            self.view = ipywidgets.VBox([self.cancel_button, self.widget])
        else:
            self.view = self.widget
        if self.show:
            from IPython.display import display

            return display(self.view, display_id=True)
        return None

    def _progress_stream(self):
        return self.progress_stream if self.progress_stream is not None else sys.stderr

    def _refresh(self, snap: MonitorSnapshot) -> None:
        if self.widget is not None:
            self.widget.value = self._html(snap)
            self.refresh_count += 1
        elif getattr(self, "_text_progress", False):
            stream = self._progress_stream()
            stream.write("\r" + progress_line(snap).ljust(self._progress_width))
            stream.flush()
            self.refresh_count += 1

    _progress_width = 100  # pad each text progress line: a shorter one overwrites a longer

    def _close_view(self, handle, final: MonitorSnapshot) -> None:
        """The final snapshot always lands in the widget; the live view becomes static HTML."""
        if self.cancel_button is not None:
            self.cancel_button.layout.display = "none"
        self._refresh(final)
        if getattr(self, "_text_progress", False):
            self._progress_stream().write("\n")
        frozen = render_frozen_html(final, self.query.physical, detail=self.detail)
        record = getattr(self.query, "last_record", None)
        if record is not None and record.monitor_html is None:
            record.monitor_html = render_html(final, self.query.physical, cancel_hint=False)
        if not self.show:
            return
        if handle is not None:
            from IPython.display import HTML

            handle.update(HTML(frozen))
            self.view.close()
            self.widget.close()
            if self.cancel_button is not None:
                self.cancel_button.close()
        elif not self.live:
            plan = self.query.physical
            print(render_text(final, plan) if self.detail else render_summary_text(final, plan))


def clicks_reach_busy_kernel() -> bool:
    """Whether a widget click can reach this kernel while a cell runs.

    ipykernel >= 7 runs subshells (JEP 91) on their own threads; JupyterLab >= 4.4 opens one
    per comm target and sends widget messages there. A kernel with no subshell has a front
    end that queues clicks behind the running cell (classic tools, VS Code, ipykernel < 7).
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    kernel = getattr(get_ipython(), "kernel", None)
    manager = getattr(getattr(kernel, "shell_channel_thread", None), "manager", None)
    list_subshells = getattr(manager, "list_subshell", None)
    if list_subshells is None:
        return False
    try:
        return bool(list_subshells())
    except Exception:  # noqa: BLE001 -- a kernel shutting down: no button
        return False


def _handle_messages_where_sent(widget) -> None:
    """Let the front end's messages to ``widget`` run on the subshell they were sent on.

    ipykernel routes a comm's incoming messages to the subshell that last sent on that comm,
    so that a cell awaiting a widget's reply gets it. For the Cancel button that is the main
    shell, busy running the query cell: a click would wait for the query to end.
    """
    comm = getattr(widget, "comm", None)
    if comm is not None and hasattr(comm, "_reply_subshell_for"):
        comm._reply_subshell_for = lambda data, default: default


def _wants_text_progress(stream) -> bool:
    """A terminal overwrites the progress line in place; so does a notebook's stream output.
    Anything else (a log file, a pipe) only gets the final summary."""
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):
        return False
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


def _widgets_available() -> bool:
    """Live widgets need ipywidgets and a kernel to talk to (not plain terminal IPython)."""
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


_EXCHANGES = ("RepartitionExec", "CoalescePartitionsExec", "SortPreservingMergeExec")


def consumers_of_exchanges(plan) -> dict[int, tuple[int, ...]]:
    """Repartition id -> the operators above it up to the next exchange: the ones whose
    partition ``i`` works on the rows routed to partition ``i``.

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=2)
        >>> s.register("t", pa.table({"k": [1, 2], "v": [3, 4]}))
        >>> plan = s.sql("SELECT k, sum(v) FROM t GROUP BY k").physical
        >>> names = {op.operator_id: op.name for _, op in plan.walk()}
        >>> [[names[i] for i in ids] for ids in consumers_of_exchanges(plan).values()]
        [['ProjectionExec', 'AggregateExec']]
    """
    found: dict[int, tuple[int, ...]] = {}

    def walk(op, above: tuple[int, ...]) -> None:
        if op.name == "RepartitionExec":
            found[op.operator_id] = above
        below = () if op.name in _EXCHANGES else (*above, op.operator_id)
        for child in op.children():
            walk(child, below)

    if plan is not None:
        walk(plan, ())
    return found


def _times_per_partition(operators: dict[int, OperatorState], consumer_ids, partitions: int
                         ) -> tuple[float, ...]:
    return tuple(sum(operators[i].partition_compute.get(p, 0.0)
                     for i in consumer_ids if i in operators) for p in range(partitions))


# ----------------------------------------------------------------------------- rendering

def plan_rows(plan) -> list[tuple[int, object]]:
    """(depth, operator) in EXPLAIN order: parents before children, the operators EXPLAIN
    shows (an identity projection is not)."""
    return displayed_operators(plan)


def _headline(snap: MonitorSnapshot) -> str:
    text = f"{snap.status} · {snap.elapsed * 1000:.0f} ms"
    if snap.result_rows is not None:
        text += f" · {snap.result_rows:,} rows"
    limit = format_bytes(snap.memory_limit) if snap.memory_limit else "no limit"
    text += (f" · memory {format_bytes(snap.pool_total)} / {limit}"
             f" (peak {format_bytes(snap.pool_peak)})")
    text += f" · spills {snap.spill_count}"
    if snap.spill_count:
        text += f" ({snap.spilled_rows:,} rows, {format_bytes(snap.spilled_bytes)})"
    return text


def self_times(snap: MonitorSnapshot, plan) -> tuple[dict[int, float], int | None]:
    """Each displayed operator's own compute seconds, and the hottest one's id (None when
    nothing computed yet). Hidden operators (identity projections) have no row."""
    times: dict[int, float] = {}
    for _, op in plan_rows(plan):
        times[op.operator_id] = snap.operators.get(op.operator_id, OperatorState()).compute
    hot = max(times, key=times.get, default=None)
    return times, hot if hot is not None and times[hot] > 0 else None


def _memory_text(state: OperatorState) -> str:
    if not state.memory_peak:
        return ""
    return f"{format_bytes(state.memory)} / {format_bytes(state.memory_peak)}"


def _spill_text(state: OperatorState) -> str:
    if not state.spill_count:
        return ""
    return f"{state.spill_count}× {format_bytes(state.spilled_bytes)}"


_IN_COLUMNS = ("output_rows", "output_batches", "elapsed_compute")  # the table's own columns


def other_metrics(totals: dict[str, float]) -> str:
    """An operator's metrics beyond rows, batches and own time, as EXPLAIN ANALYZE prints
    them (``peak_mem=1.0 MiB, spill_count=2``).

    Example:
        >>> other_metrics({"output_rows": 5, "peak_mem": 2048, "spill_count": 2, "x": 0})
        'peak_mem=2.0 KiB, spill_count=2'
    """
    return ", ".join(format_metric(name, totals[name]) for name in sorted(totals)
                     if name not in _IN_COLUMNS and totals[name])


def render_summary_text(snap: MonitorSnapshot, plan) -> str:
    """The terminal's compact ending: the headline, what was read, the hottest operator and
    any skew, in a few lines (the full table is ``render_text``, shown on ``--analyze``).

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.table({"x": [1, 2, 3]}))
        >>> monitor = QueryMonitor(s.sql("SELECT x FROM t ORDER BY x"), live=False, show=False)
        >>> run = monitor.run()
        >>> text = render_summary_text(monitor.snapshot(), run.plan)
        >>> text.startswith("finished ·"), "hottest:" in text, len(text.splitlines())
        (True, True, 3)
    """
    lines = [_headline(snap), progress_text(snap)]
    times, hot = self_times(snap, plan)
    if hot is not None:
        total = sum(times.values()) or 1.0
        name = next(op.name for _, op in plan_rows(plan) if op.operator_id == hot)
        lines.append(f"hottest: {name} #{hot}, {times[hot] * 1000:.1f} ms of own compute "
                     f"({times[hot] / total:.0%})")
    for operator_id, rows in snap.repartitions.items():
        summary = skew_summary(rows)
        if summary["skewed"]:
            lines.append(f"skewed: RepartitionExec #{operator_id} partition "
                         f"{summary['worst']} has {summary['max']:,} rows")
    top, skewed = busiest(snap.workers)
    if skewed:
        lines.append(f"skewed: worker {top} ran {snap.workers[top].busy * 1000:.1f} ms of tasks, "
                     f"≥ {SKEW_FACTOR}× the median worker")
    if snap.error:
        lines.append(f"error: {snap.error}")
    return "\n".join(lines)


def render_text(snap: MonitorSnapshot, plan) -> str:
    """A plain-text summary: headline, progress, then the plan with per-operator counters."""
    lines = [_headline(snap), progress_text(snap)]
    times, hot = self_times(snap, plan)
    for depth, op in plan_rows(plan):
        state = snap.operators.get(op.operator_id, OperatorState())
        extra = ""
        if state.memory_peak:
            extra += f" memory={_memory_text(state)}"
        if state.spill_count:
            extra += f" spilled={_spill_text(state)}"
        if snap.metrics.get(op.operator_id):
            others = other_metrics(snap.metrics[op.operator_id])
            extra += f" metrics=[{others}]" if others else ""
        lines.append(f"{'  ' * depth}{op.name}: rows={state.output_rows:,} "
                     f"batches={state.output_batches:,} "
                     f"self={times[op.operator_id] * 1000:.1f}ms"
                     f"{' (hot)' if op.operator_id == hot else ''} "
                     f"wall={state.elapsed(snap.now) * 1000:.1f}ms{extra}")
    for operator_id, rows in snap.repartitions.items():
        summary = skew_summary(rows)
        flag = (f" -- skewed: partition {summary['worst']} has {summary['max']:,} rows"
                if summary["skewed"] else "")
        lines.append(f"rows per partition (operator {operator_id}): {list(rows)}{flag}")
        times = snap.repartition_times.get(operator_id, ())
        if any(times):
            lines.append(f"  time per partition: {_time_quantiles(times)}")
    lines += worker_lines(snap.workers)
    for entry in snap.spill_feed[-_SPILL_FEED_SHOWN:]:  # the newest; the headline counts all
        lines.append(f"spill at {entry.at:.2f} s: {entry.operator}[{entry.partition}] "
                     f"{format_bytes(entry.bytes)}, {entry.rows:,} rows")
    if snap.error:
        lines.append(f"error: {snap.error}")
    return "\n".join(lines)


_CELL = "padding:1px 8px;line-height:1.35"
_NUMBER = f"style='text-align:right;{_CELL}'"
_CODE = "background:none;padding:0;font-size:11px"


# Where the front end cannot deliver a click during a busy cell (no kernel subshells), the
# interrupt is the way to cancel, and it stops every thread within a batch.
_CANCEL_HINT = ("<div class='plansight-cancel-hint' style='color:#888'>to cancel: interrupt "
                "the kernel (■, or I I); the query stops within one batch and the next cell "
                "works</div>")


def progress_fraction(snap: MonitorSnapshot) -> float | None:
    """While running: the mean of the phases (scan, then each blocking operator), so a sort
    still working keeps it below 100%. Otherwise rows scanned over the estimate, at most 1;
    None without a scan or an empty source.

    Example:
        >>> snap = MonitorSnapshot(1, "running", 1.0, {}, 0, 0, 0, 0, 0, {}, None, None, 0.0,
        ...                        rows_scanned=1000, rows_estimated=1000,
        ...                        phases=(Phase("scan", 1.0, False),
        ...                                Phase("SortExec #2", 0.0, True)))
        >>> progress_fraction(snap), current_phase(snap).name
        (0.5, 'SortExec #2')
    """
    if snap.phases and snap.status == "running":
        return sum(p.fraction for p in snap.phases) / len(snap.phases)
    if not snap.rows_estimated:
        return None
    return min(1.0, snap.rows_scanned / snap.rows_estimated)


def current_phase(snap: MonitorSnapshot) -> Phase | None:
    """The first phase not done: the work under way now (None once all are done)."""
    if snap.status != "running":
        return None
    return next((p for p in snap.phases if p.fraction < 1.0), None)


def _phase_text(phase: Phase) -> str:
    if phase.name == "scan":
        return "scanning"
    return f"{BLOCKING.get(phase.name.split(' #')[0], 'working')} ({phase.name})"


def progress_text(snap: MonitorSnapshot) -> str:
    """``rows scanned n of ~N (p%) · 1.2 s``; a query that needed fewer rows says so.

    Example:
        >>> from dataclasses import replace
        >>> snap = MonitorSnapshot(1, "running", 1.25, {}, 0, 0, 0, 0, 0, {}, None, None, 0.0,
        ...                        rows_scanned=250, rows_estimated=1000)
        >>> progress_text(snap)
        'rows scanned 250 of ~1,000 (25%) · 1.2 s'
        >>> progress_text(replace(snap, status="finished", rows_scanned=30))
        'rows scanned 30 of ~1,000 (3%; the rest was not read) · 1.2 s'
    """
    elapsed = f"{snap.elapsed:.1f} s"
    fraction = progress_fraction(snap)
    if snap.phases and snap.status == "running":  # weighted phases: name the one under way
        phase = current_phase(snap)
        parts = [f"{fraction:.0%} done"]
        if snap.rows_estimated:
            parts = [f"rows scanned {snap.rows_scanned:,} of "
                     f"~{max(snap.rows_estimated, snap.rows_scanned):,} ({fraction:.0%} done)"]
        if phase is not None:
            parts.append(_phase_text(phase))
        return " · ".join([*parts, elapsed])
    if fraction is None:
        return elapsed
    estimate = max(snap.rows_estimated, snap.rows_scanned)  # a guessed size may be exceeded
    note = ("; the rest was not read" if snap.status == "finished"
            and snap.rows_scanned < snap.rows_estimated else "")
    return (f"rows scanned {snap.rows_scanned:,} of ~{estimate:,} "
            f"({fraction:.0%}{note}) · {elapsed}")


def progress_line(snap: MonitorSnapshot, width: int = 24) -> str:
    """The terminal's progress line: a bar of ``width`` characters, then the progress text.

    Example:
        >>> snap = MonitorSnapshot(1, "running", 0.5, {}, 0, 0, 0, 0, 0, {}, None, None, 0.0,
        ...                        rows_scanned=500, rows_estimated=1000)
        >>> progress_line(snap, width=10)
        '[#####.....] running · rows scanned 500 of ~1,000 (50%) · 0.5 s'
    """
    fraction = progress_fraction(snap)
    filled = round(width * fraction) if fraction is not None else 0
    bar = f"[{'#' * filled}{'.' * (width - filled)}] " if fraction is not None else ""
    return f"{bar}{snap.status} · {progress_text(snap)}"


def _progress_html(snap: MonitorSnapshot, colour: str) -> str:
    fraction = progress_fraction(snap)
    bar = ""
    if fraction is not None:
        bar = ("<div style='display:inline-block;width:160px;height:8px;background:#e5e5e5;"
               "margin-right:6px;vertical-align:middle'><div class='plansight-progress-bar' "
               f"style='width:{fraction * 100:.1f}%;height:100%;background:{colour}'></div>"
               "</div>")
    return (f"<div class='plansight-progress' style='margin:2px 0'>{bar}"
            f"<span>{html.escape(progress_text(snap))}</span></div>")


def render_html(snap: MonitorSnapshot, plan, cancel_hint: bool = True,
                detail: bool = False, fold: bool = False) -> str:
    """The monitor's HTML: headline, progress, plan table and graph, per-partition bars after
    repartitions; while running, how to cancel (unless a Cancel button is shown). With
    ``detail`` (``--analyze``) the table ends in a column of every other metric; with
    ``fold`` each exchange's subtree can be folded (``fold_subtrees``)."""
    esc = html.escape
    colour = {"running": "#1f77b4", "finished": "#2ca02c", "failed": "#d62728",
              "cancelled": "#ff7f0e"}.get(snap.status, "#888")
    body = []
    referenced = referenced_ids(plan)
    times, hot = self_times(snap, plan)
    total_time = sum(times.values()) or 1.0
    rows = plan_rows(plan)
    for depth, op in rows:
        state = snap.operators.get(op.operator_id, OperatorState())
        total = op.output_partitioning().count
        done = len(state.finished)
        label = operator_label(op, referenced)
        short = label if len(label) <= 90 else label[:89] + "…"
        running = " ▸" if state.started and done < len(state.started) else ""
        own = times[op.operator_id]
        is_hot = op.operator_id == hot
        spill = ""
        if state.spill_count:
            spill = (f"<span class='plansight-spilled' title='{state.spilled_rows:,} rows "
                     f"spilled' style='color:#d62728'>⛁ {esc(_spill_text(state))}</span>")
        body.append(
            f"<tr data-operator-id='{op.operator_id}'"
            f"{' class=plansight-hot-row' if is_hot else ''}>"
            f"<td style='text-align:left;{_CELL};padding-left:{depth * 1.2 + 0.3:.1f}em' "
            f"title='{esc(label)}'><code style='{_CODE}'>{esc(short)}</code>{running}</td>"
            f"<td {_NUMBER}>{done}/{total}</td><td {_NUMBER}>{state.output_rows:,}</td>"
            f"<td {_NUMBER}>{state.output_batches:,}</td>"
            f"<td style='{_CELL};white-space:nowrap'>{_time_bar(own, total_time, is_hot)}</td>"
            f"<td {_NUMBER}>{state.elapsed(snap.now) * 1000:.1f}</td>"
            f"<td {_NUMBER} class='plansight-memory'>{esc(_memory_text(state))}</td>"
            f"<td {_NUMBER}>{spill}</td>"
            + (f"<td style='{_CELL}' class='plansight-metrics'><code style='{_CODE}'>"
               f"{esc(other_metrics(snap.metrics.get(op.operator_id, {})))}</code></td>"
               if detail else "") + "</tr>")
    columns = (("operator", "left"), ("partitions", "right"), ("output rows", "right"),
               ("batches", "right"), ("self time", "left"), ("wall ms", "right"),
               ("memory now / peak", "right"), ("spills", "right"))
    if detail:
        columns += (("metrics", "left"),)
    header = "".join(f"<th style='text-align:{align};{_CELL}'>{name}</th>"
                     for name, align in columns)
    if fold:
        table = fold_subtrees(snap, rows, body, header, times, hot, detail)
    else:
        table = (f"<table style='border-collapse:collapse;margin:2px 0'><thead><tr>{header}"
                 f"</tr></thead><tbody>{''.join(body)}</tbody></table>")
    # inline styles only: the same look in a live widget and in the static snapshot
    parts = [(f"<div class='plansight-monitor' style='font-size:12px;line-height:1.35'>"
              f"<div style='color:{colour};font-weight:bold'>{esc(_headline(snap))}</div>"),
             _progress_html(snap, colour),
             *([_CANCEL_HINT] if snap.status == "running" and cancel_hint else []),
             # the table and the graph side by side: the table's labels wrap, the graph scales
             (f"<div style='display:flex;gap:12px;align-items:flex-start'><div>{table}</div>"
              f"{render_plan_svg(snap, plan, times, hot)}</div>")]
    for operator_id, rows in snap.repartitions.items():
        parts.append(_skew_html(operator_id, rows, snap.repartition_bytes.get(operator_id, ()),
                                live=operator_id not in snap.repartitions_done,
                                times=snap.repartition_times.get(operator_id, ())))
    if snap.workers:
        parts.append(worker_table_html(snap.workers))
    if snap.spill_feed:
        parts.append(_spill_feed_html(snap))
    if snap.error:
        parts.append(f"<div style='color:#d62728'>{esc(snap.error)}</div>")
    parts.append("</div>")
    return "".join(parts)


SHORT_QUERY_SECONDS = 0.5  # a finished query quicker than this collapses to one line
MANY_OPERATORS = 30  # a frozen plan this large folds its quiet subtrees
# fixed column widths, so that the tables of folded subtrees line up with each other
_WIDTHS = ("32em", "5em", "7em", "5em", "15em", "6em", "9em", "7em", "24em")


def fold_subtrees(snap: MonitorSnapshot, rows, body: list[str], header: str,
                  times: dict[int, float], hot: int | None, detail: bool) -> str:
    """The plan table with each exchange's subtree in a ``<details>`` of its own (its
    summary: operators, own time, rows out, spills), open when it holds the hottest
    operator or a spill, so a plan of 30+ operators reads stage by stage (Spark's stages)
    and the quiet ones fold away. Tables between the folds share fixed column widths."""
    widths = _WIDTHS if detail else _WIDTHS[:-1]
    colgroup = "<colgroup>" + "".join(f"<col style='width:{w}'>" for w in widths) + "</colgroup>"
    table_style = "border-collapse:collapse;margin:0;table-layout:fixed"
    total = sum(times.values()) or 1.0
    out: list[str] = [f"<table style='{table_style}'>{colgroup}<thead><tr>{header}</tr>"
                      f"</thead><tbody>"]
    table_rows = 0
    open_depths: list[int] = []

    def restart_table(before: str) -> None:
        nonlocal table_rows
        out.append("</tbody></table>")
        if not table_rows:  # nothing since the last opening: drop the empty table
            del out[-2:]
        out.append(before)
        out.append(f"<table style='{table_style}'>{colgroup}<tbody>")
        table_rows = 0

    for index, ((depth, op), row) in enumerate(zip(rows, body)):
        while open_depths and depth <= open_depths[-1]:
            open_depths.pop()
            restart_table("</details>")
        if index and op.name in _EXCHANGES:
            end = next((j for j in range(index + 1, len(rows)) if rows[j][0] <= depth),
                       len(rows))
            ids = [o.operator_id for _, o in rows[index:end]]
            own = sum(times.get(i, 0.0) for i in ids)
            spills = sum(snap.operators[i].spill_count for i in ids if i in snap.operators)
            state = snap.operators.get(op.operator_id, OperatorState())
            opened = " open" if hot in ids or spills else ""
            text = (f"{op.name} #{op.operator_id} and the {len(ids) - 1} operators below: "
                    f"{own * 1000:.1f} ms own ({own / total:.0%}), {state.output_rows:,} "
                    f"rows out" + (f", {spills} spills" if spills else ""))
            restart_table(f"<details class='plansight-subtree' data-operator-id="
                          f"'{op.operator_id}'{opened}><summary style='cursor:pointer;"
                          f"color:#555;padding-left:{depth * 1.2:.1f}em'>{html.escape(text)}"
                          f"</summary>")
            open_depths.append(depth)
        out.append(row)
        table_rows += 1
    out.append("</tbody></table>")
    if not table_rows:
        del out[-2:]
    out.extend("</details>" for _ in open_depths)
    return "".join(out)


def render_frozen_html(snap: MonitorSnapshot, plan, detail: bool = False) -> str:
    """The monitor a cell keeps once its query ended. A query that finished in under
    ``SHORT_QUERY_SECONDS`` collapses to its headline (click to open), so a short query
    does not push its result down the notebook; a slow, failed or cancelled one stays open,
    and so does every ``detail`` view (``--analyze``: the metrics column too).
    """
    fold = len(plan_rows(plan)) >= MANY_OPERATORS
    full = render_html(snap, plan, cancel_hint=False, detail=detail, fold=fold)
    if detail or snap.status != "finished" or snap.elapsed >= SHORT_QUERY_SECONDS:
        return full
    return (f"<details class='plansight-collapsed' style='font-size:12px'>"
            f"<summary style='color:#2ca02c;cursor:pointer'>{html.escape(_headline(snap))}"
            f"</summary>{full}</details>")


def _time_bar(seconds: float, total: float, hot: bool) -> str:
    """Own compute as a bar scaled to the query's total own time; the hottest is red."""
    share = seconds / total if total > 0 else 0.0
    colour = "#d62728" if hot else "#1f77b4"
    marker = (" <span class='plansight-hot' style='color:#d62728;font-weight:bold'>hot</span>"
              if hot else "")
    return (f"<div style='display:inline-block;width:80px;height:8px;background:#eee;"
            f"margin-right:4px;vertical-align:middle'><div class='plansight-self-bar' "
            f"style='width:{share * 100:.1f}%;height:100%;background:{colour}'></div></div>"
            f"<span class='plansight-self-ms'>{seconds * 1000:.1f} ms "
            f"({share:.0%})</span>{marker}")


def _spill_feed_html(snap: MonitorSnapshot) -> str:
    """The spill feed, newest first: when, which operator partition, bytes and rows."""
    rows = "".join(
        f"<tr><td {_NUMBER}>{entry.at:.2f} s</td>"
        f"<td style='{_CELL}'>{html.escape(entry.operator)}[{entry.partition}]"
        f"{f' #{entry.operator_id}' if entry.operator_id else ''}</td>"
        f"<td {_NUMBER}>{format_bytes(entry.bytes)}</td><td {_NUMBER}>{entry.rows:,}</td></tr>"
        for entry in reversed(snap.spill_feed[-_SPILL_FEED_SHOWN:]))  # newest first
    more = (f" (newest {_SPILL_FEED_SHOWN} of {snap.spill_count})"
            if snap.spill_count > _SPILL_FEED_SHOWN else "")
    head = "".join(f"<th style='text-align:right;{_CELL}'>{name}</th>"
                   for name in ("time", "operator", "bytes", "rows"))
    return (f"<div class='plansight-spill-feed' style='margin-top:4px'>spills{more}"
            f"<table style='border-collapse:collapse'><thead><tr>{head}</tr></thead>"
            f"<tbody>{rows}</tbody></table></div>")


_SPILL_FEED_SHOWN = 8  # spill feed lines drawn: the widget must stay short


def _time_quantiles(times: tuple[float, ...]) -> str:
    """``min 1.0, median 2.0, max 9.0 ms`` of the work per partition (Spark's task times)."""
    summary = skew_summary(times)
    return (f"min {summary['min'] * 1000:.1f}, median {summary['median'] * 1000:.1f}, "
            f"max {summary['max'] * 1000:.1f} ms")


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


def _skew_html(operator_id: int, rows: tuple[int, ...], sizes: tuple[int, ...] = (),
               live: bool = False, times: tuple[float, ...] = ()) -> str:
    shown = rows[:MAX_SKEW_PARTITIONS]
    top = max(rows, default=0) or 1
    summary = skew_summary(rows)

    def size(i: int) -> str:
        text = f", {format_bytes(sizes[i])}" if i < len(sizes) else ""
        return text + (f", {times[i] * 1000:.1f} ms" if i < len(times) else "")

    bars = "".join(
        f"<div title='partition {i}: {r:,} rows{size(i)}' style='display:inline-block;width:8px;"
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
    if sizes:
        bytes_summary = skew_summary(sizes)
        stats += (f"; bytes min {format_bytes(bytes_summary['min'])}, median "
                  f"{format_bytes(bytes_summary['median'])}, max "
                  f"{format_bytes(bytes_summary['max'])}")
    if any(times):
        stats += f"; time {_time_quantiles(times)}"
    state = (" <span class='plansight-skew-live' style='color:#1f77b4'>(routing…)</span>"
             if live else "")
    return (f"<div class='plansight-skew' style='margin-top:4px'>rows per partition, "
            f"RepartitionExec #{operator_id}{state}{more}: {stats}{flag}"
            f"<div style='height:42px'>{bars}</div></div>")
