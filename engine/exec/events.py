"""Typed engine events on a bus that observers (widgets, profilers) subscribe to.

The contract (what observers, widgets and the profiler may rely on):

- **One delivery thread per observer.** Engine threads never call an observer: publishing
  appends to each observer's queue (no lock), and that observer's thread calls it. A slow
  observer delays only itself; a raising one is reported once (a ``RuntimeWarning`` on the
  query's thread, ``bus.errors``) and detached, never fatal to the query.
- **No per-batch events.** Operators only bump counters: per run of an operator partition,
  a ``RunProgress`` whose ``counts`` (rows, batches, time, the batch) their thread replaces
  after each batch. Each delivery thread *synthesizes* ``BatchProduced`` from those counters: every
  ``TICK`` (20 ms) for each run that moved since the last tick, and once more just before the
  run's ``OperatorFinished``. An event counts the batches since the previous one of its run
  (``batches`` >= 1), so observers see progress while the query runs, and the rows, batches
  and bytes summed over a run's events equal its counters *exactly* (``output_rows`` and
  ``output_batches`` in the metrics).
- **Lifecycle events are never dropped** and arrive in publication order: query
  started/finished/failed/cancelled, operator started/finished, spill written/read,
  repartition output sizes. A run's ``BatchProduced`` come after its ``OperatorStarted`` and
  before its ``OperatorFinished``.
- **ReservationChanged coalesces** while an observer is behind: it gets the latest change per
  consumer, in the order of their last change (so the last ``pool_total`` is current);
  ``pool_peak`` carries the pool's exact peak.
- **Flush at the end.** ``close()`` (``Query.execute`` calls it before it returns, on success,
  failure and cancel) delivers everything published before it, with a final ``BatchProduced``
  for every run that moved, and ends the delivery threads.
- **No observer, no cost:** no thread, no event objects; an operator checks one local flag
  per batch besides its metrics counters.

::

    engine thread ─ per batch ─▶ RunProgress.counts ◀─ read every tick ─┐
                 ─ lifecycle ──▶ incoming (per observer) ─ drain ───────┴▶ delivery thread
                                                                             ─▶ observer

What waits for an observer is bounded by the plan (runs, consumers) and its lifecycle events,
not by the number of batches. The engine never imports its observers.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Event:
    time: float = field(default_factory=time.perf_counter, kw_only=True)


@dataclass(frozen=True)
class QueryStarted(Event):
    sql: str


@dataclass(frozen=True)
class QueryFinished(Event):
    rows: int


@dataclass(frozen=True)
class QueryFailed(Event):
    error: str


@dataclass(frozen=True)
class QueryCancelled(Event):
    pass


@dataclass(frozen=True)
class OperatorStarted(Event):
    operator_id: int
    operator: str
    partition: int


@dataclass(frozen=True)
class OperatorFinished(Event):
    """``elapsed`` is the run's wall time (start to end, children included); ``compute``
    its own compute (``elapsed_compute``: children and waits on other threads excluded)."""

    operator_id: int
    operator: str
    partition: int
    rows: int
    elapsed: float
    compute: float = 0.0


@dataclass(frozen=True)
class BatchProduced(Event):
    """Output of one operator partition run since its previous ``BatchProduced``: ``batches``
    batches of ``rows`` rows in total. Synthesized by the bus from the run's counters, never
    published by the engine. ``bytes`` are Arrow bytes: ``nbytes`` of the latest batch is
    measured for each event, and ``rows`` times the bytes per row measured so far in the run
    is reported (exact for fixed-width columns without nulls). ``time`` is when the run's
    first batch came out for its first event, when the latest batch it counts came out for
    the others: always within the run's span."""

    operator_id: int
    partition: int
    rows: int
    bytes: int
    batches: int = 1
    compute: float = 0.0  # the run's own compute seconds since its previous BatchProduced


@dataclass(frozen=True)
class ReservationChanged(Event):
    """``pool_peak`` is the pool's peak so far: exact even when a slow observer only sees the
    latest change per consumer."""

    consumer: str
    size: int
    pool_total: int
    pool_peak: int = 0


@dataclass(frozen=True)
class SpillWritten(Event):
    operator: str
    rows: int
    bytes: int
    path: str
    operator_id: int = 0
    partition: int = 0


@dataclass(frozen=True)
class SpillRead(Event):
    operator: str
    rows: int
    bytes: int
    path: str
    operator_id: int = 0
    partition: int = 0


@dataclass(frozen=True)
class TaskFinished(Event):
    """A task of a plan run on a cluster ended well: worker ``worker`` ran partition
    ``partition`` of stage ``stage_id`` (0: the final stage) in ``elapsed`` seconds,
    produced ``rows`` (into shuffle pieces, or the result) and held at most ``peak_memory``
    bytes. Published on the worker, forwarded to the client with the task's other events:
    what the monitor's per-worker view is made of."""

    worker: str
    stage_id: int
    partition: int
    rows: int
    elapsed: float
    peak_memory: int = 0


@dataclass(frozen=True)
class RepartitionOutput(Event):
    """Rows (and Arrow bytes) routed to each output partition so far. ``final=False``:
    published while routing, at most every ~50 ms; the last one, once every input ended, is
    ``final``."""

    operator_id: int
    rows_per_partition: tuple[int, ...]
    bytes_per_partition: tuple[int, ...] = ()
    final: bool = True


class RunProgress:
    """What one run of an operator partition has produced so far.

    Its engine thread replaces ``counts`` -- (rows, batches, time of the latest batch, the
    latest batch) -- after each batch: one attribute store of a new tuple, so a delivery
    thread reading it at any moment sees one consistent state, never the rows of one batch
    with the count of another. ``first`` (when the first batch came out) is set before the
    first ``counts``. Bytes are measured here, on the delivery thread: ``nbytes`` releases
    the GIL, and on an engine thread every release lets another engine thread take it.
    """

    __slots__ = ("compute", "counts", "first", "operator_id", "partition")

    def __init__(self, operator_id: int, partition: int):
        self.operator_id, self.partition = operator_id, partition
        self.counts: tuple = (0, 0, 0.0, None)
        self.first: float | None = None
        # the run's own compute so far, stored before ``counts``; read with a later counts
        # it may be a batch ahead, which only moves time between two adjacent events
        self.compute = 0.0

    def since(self, delivered: tuple) -> tuple[BatchProduced | None, tuple]:
        """The ``BatchProduced`` for what came out after ``delivered`` -- (rows, batches,
        sampled rows, sampled bytes, compute) -- or None when nothing did, and the new
        ``delivered``. The latest batch is measured; the event's bytes are its rows at the
        bytes per row measured so far in the run."""
        rows, batches, last, batch = self.counts
        delivered_rows, delivered_batches, sampled_rows, sampled_bytes, computed = delivered
        if batches == delivered_batches:
            return None, delivered
        compute = self.compute
        sampled_rows += batch.num_rows
        sampled_bytes += batch.nbytes
        new_rows = rows - delivered_rows
        event = BatchProduced(self.operator_id, self.partition, new_rows,
                              new_rows * sampled_bytes // max(sampled_rows, 1),
                              batches - delivered_batches, max(0.0, compute - computed),
                              time=self.first if delivered_batches == 0 else last)
        return event, (rows, batches, sampled_rows, sampled_bytes, max(compute, computed))


_RESERVATIONS = object()  # where the pending reservation changes are delivered
_NOTHING = (0, 0, 0, 0, 0.0)  # what a run has delivered before its first BatchProduced
TICK = 0.02  # seconds between a delivery thread's rounds while runs are live
MAX_INCOMING = 1024  # unmerged events an observer may lag by before publishers merge them


class _Delivery:
    """One observer's events and the thread that hands them over.

    Engine threads only append to ``incoming`` (no lock). Each round -- every ``TICK`` while
    runs are live, else once events arrive (then gathering for a ``TICK``) -- the delivery
    thread moves what arrived into ``pending`` (the latest reservation per consumer), adds a
    ``BatchProduced`` per live run that moved, and calls the observer outside the lock;
    what arrives meanwhile waits for the next round. When an observer lags so far that
    ``incoming`` passes ``MAX_INCOMING`` (reservation changes), the publisher moves it into
    ``pending`` itself, under the lock: memory stays bounded by the plan.
    """

    def __init__(self, bus: EventBus, observer: Callable[[Event], None]):
        self.bus, self.observer = bus, observer
        self._incoming: deque = deque()  # events, and (event, RunProgress) for runs
        self._lock = threading.Lock()  # guards pending, live, reservations and the counter
        self._pending: list = []
        self._live: dict[RunProgress, tuple] = {}  # run -> delivered
        self._reservations: dict[str, ReservationChanged] = {}  # in order of last change
        self._wakeup, self._finished = threading.Event(), threading.Event()
        self._waiting = self._closing = self._stopped = False
        self.ended = False  # set (under the bus's lock) when the thread is about to end
        self.coalesced = 0  # reservation changes superseded by a later one
        # daemon only as a safety net: close() joins it
        self._thread = threading.Thread(target=self._run, name="plansight-events", daemon=True)
        self._thread.start()

    def put(self, item) -> None:
        incoming = self._incoming
        incoming.append(item)
        if len(incoming) > MAX_INCOMING:
            with self._lock:
                self._absorb()
        if self._waiting:
            self._waiting = False
            self._wakeup.set()

    def _absorb(self) -> None:
        """Move what arrived into ``pending``, in arrival order (holding the lock)."""
        incoming, pending = self._incoming, self._pending
        live, reservations = self._live, self._reservations
        while incoming:
            item = incoming.popleft()
            kind = type(item)
            if kind is tuple:
                event, run = item
                if type(event) is OperatorStarted:
                    live[run] = _NOTHING
                else:  # its finish: the run's last batches first
                    last, _ = run.since(live.pop(run, _NOTHING))
                    if last is not None:
                        pending.append(last)
                pending.append(event)
            elif kind is ReservationChanged:
                if not reservations:
                    pending.append(_RESERVATIONS)
                elif reservations.pop(item.consumer, None) is not None:
                    self.coalesced += 1
                reservations[item.consumer] = item  # last: its pool_total is the latest
            else:
                pending.append(item)

    def _round(self) -> list:
        """What to hand over now: what arrived, then the progress of every live run."""
        with self._lock:
            self._absorb()
            pending, live = self._pending, self._live
            for run, delivered in live.items():
                event, live[run] = run.since(delivered)
                if event is not None:
                    pending.append(event)
            reservations, self._reservations, self._pending = self._reservations, {}, []
        if _RESERVATIONS in pending:
            at = pending.index(_RESERVATIONS)
            pending[at:at + 1] = reservations.values()
        return pending

    def _run(self) -> None:
        try:
            self._deliver_until_closed()
        finally:
            self.bus._ended(self)

    def _deliver_until_closed(self) -> None:
        while not self._stopped:
            if not (self._closing or self._live):
                self._wakeup.clear()
                self._waiting = True  # before looking: a publisher that appends now wakes us
                if not (self._incoming or self._closing or self._stopped):
                    self._wakeup.wait()
                self._waiting = False
            if not (self._closing or self._stopped):
                # one round per tick, not per event (a thread switch costs the engine more
                # than the event); finish() cuts it short
                self._finished.wait(TICK)
            events = self._round()
            if not events and self._closing and not self._incoming:
                return
            observer = self.observer
            for event in events:
                if self._stopped:
                    return
                try:
                    observer(event)
                except BaseException as error:  # noqa: BLE001 -- not fatal to the query
                    self.stop()
                    self.bus._detach(self, error)
                    return

    def finish(self) -> None:
        """No more events: deliver what is pending, then let the thread end."""
        self._closing = True
        self._finished.set()
        self._wakeup.set()

    def stop(self) -> None:
        """Drop what is pending; the thread ends once the observer's current call returns."""
        self._stopped = True
        with self._lock:
            self._incoming.clear()
            self._pending, self._reservations, self._live = [], {}, {}
        self._finished.set()
        self._wakeup.set()

    def join(self) -> None:
        self._thread.join()


class _InlineDelivery:
    """Calls the observer on the publishing thread (``EventBus(synchronous=True)``); a run's
    batches arrive as one ``BatchProduced`` just before its ``OperatorFinished``."""

    ended = True

    def __init__(self, bus: EventBus, observer: Callable[[Event], None]):
        self.bus, self.observer = bus, observer
        self._failed = False

    def put(self, item) -> None:
        events = [item]
        if type(item) is tuple:
            event, run = item
            events = [event]
            if type(event) is OperatorFinished:
                last, _ = run.since(_NOTHING)
                events = [last, event] if last is not None else events
        for event in events:
            if self._failed:
                return
            try:
                self.observer(event)
            except Exception as error:  # noqa: BLE001 -- an observer bug must not break the query
                self._failed = True
                self.bus._detach(self, error)
                self.bus._report()

    def finish(self) -> None:
        pass

    stop = join = finish


class EventBus:
    """Fan-out of engine events, one delivery thread per observer.

    Use it as a context manager, or call ``close()`` at the end of the query: it delivers every
    event published before it and ends the delivery threads. An operator partition run is
    published with its ``RunProgress`` (``publish(OperatorStarted(...), run)``, the same for
    its ``OperatorFinished``); its ``BatchProduced`` events come from that. ``synchronous=True``
    calls the observers inline on the publishing engine thread instead -- only for internal
    uses that must act within the event; a slow synchronous observer slows the query.

    Example:
        >>> import pyarrow as pa
        >>> seen = []
        >>> with EventBus([seen.append]) as bus:
        ...     run = RunProgress(operator_id=1, partition=0)
        ...     bus.publish(OperatorStarted(1, "ScanExec", 0), run)
        ...     rows = 0
        ...     for batches, size in enumerate((10, 20, 30), start=1):
        ...         rows += size
        ...         run.first = run.first or 1.0
        ...         run.counts = (rows, batches, 1.0, pa.record_batch({"x": [0] * size}))
        ...     bus.publish(OperatorFinished(1, "ScanExec", 0, rows=60, elapsed=0.1), run)
        >>> batches = [e for e in seen if isinstance(e, BatchProduced)]
        >>> sum(e.rows for e in batches), sum(e.batches for e in batches)
        (60, 3)
    """

    def __init__(self, observers: list[Callable[[Event], None]] | None = None,
                 synchronous: bool = False):
        self.synchronous = synchronous
        self.active = False  # what publishers check before building an event
        self.errors: list[BaseException] = []
        self.flushing = False
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a delivery ended, or abandon()
        self._abandoned = False
        self._deliveries: tuple = ()  # replaced, never mutated: publish iterates without a lock
        self._started: list = []  # every delivery, detached ones too: close() ends them all
        self._unreported: list[tuple[Callable, BaseException]] = []
        for observer in observers or ():
            self.subscribe(observer)

    @property
    def coalesced(self) -> int:
        """Reservation changes superseded before a lagging observer saw them (all observers)."""
        return sum(getattr(d, "coalesced", 0) for d in self._started)

    def subscribe(self, observer: Callable[[Event], None]) -> None:
        """Add an observer; it sees the runs that start from now on."""
        delivery = (_InlineDelivery if self.synchronous else _Delivery)(self, observer)
        with self._lock:
            self._deliveries += (delivery,)
            self._started.append(delivery)
            self.active = True

    def publish(self, event: Event, run: RunProgress | None = None) -> None:
        """Hand ``event`` to every observer; ``run`` with the OperatorStarted and
        OperatorFinished of a run whose batches observers should see."""
        item = event if run is None else (event, run)
        for delivery in self._deliveries:
            delivery.put(item)

    def close(self) -> None:
        """Deliver everything published so far, end the delivery threads, and warn about
        observers that raised. An interrupt while waiting drops what is still pending."""
        with self._lock:
            self.flushing = True
            started = list(self._started)
        for delivery in started:
            delivery.finish()
        try:
            with self._changed:
                while not self._abandoned and not all(d.ended for d in started):
                    self._changed.wait()
        except BaseException:
            self.abandon()
            raise
        finally:
            with self._lock:
                self._deliveries, self.active, self.flushing = (), False, False
            for delivery in started:
                if delivery.ended:  # a thread stuck in its observer stays (a daemon)
                    delivery.join()
            self._report()

    def abandon(self) -> None:
        """Stop delivering: pending events are dropped and ``close()`` stops waiting (a
        cancelled flush, an interrupt). An observer's current call still runs to its end."""
        for delivery in list(self._started):
            delivery.stop()
        with self._changed:
            self._abandoned = True
            self._changed.notify_all()

    def __enter__(self) -> EventBus:  # noqa: PYI034 (typing.Self needs Python 3.11)
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _ended(self, delivery: _Delivery) -> None:
        with self._changed:
            delivery.ended = True
            self._changed.notify_all()

    def _detach(self, delivery, error: BaseException) -> None:
        with self._lock:
            self._deliveries = tuple(d for d in self._deliveries if d is not delivery)
            self.active = bool(self._deliveries)
            self.errors.append(error)
            self._unreported.append((delivery.observer, error))

    def _report(self) -> None:
        """Warn once per observer that raised, on the thread that runs the query."""
        with self._lock:
            unreported, self._unreported = self._unreported, []
        for observer, error in unreported:
            warnings.warn(f"plansight: observer {observer!r} raised {error!r}; detached",
                          RuntimeWarning, stacklevel=3)
