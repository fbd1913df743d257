"""Typed engine events on a bus that observers (widgets, profilers) subscribe to.

Observers never slow the engine: publishing appends to one queue per observer, and a delivery
thread per observer calls it. When an observer falls behind, high-rate events coalesce in its
queue instead of piling up::

    engine threads ─publish─▶ pending (one per observer) ─drain─▶ delivery thread ─▶ observer
                              lifecycle events: appended, never dropped, order kept
                              BatchProduced: summed per (operator, partition) run
                              ReservationChanged: the latest per consumer

What is pending is bounded by the plan (operators × partitions, consumers) and the lifecycle
events, not by the number of batches. ``close()`` flushes: every event published before it
reaches every observer, and the delivery threads end. Publishing with no observer costs one
attribute check; an observer that raises is reported once (a warning) and detached, never
fatal to the query. The engine never imports its observers.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Self


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
    operator_id: int
    operator: str
    partition: int
    rows: int
    elapsed: float


@dataclass(frozen=True)
class BatchProduced(Event):
    """``bytes`` are Arrow bytes (``nbytes``), measured on one batch in 16 of a stream and
    estimated from the measured bytes per row in between (exact for fixed-width columns
    without nulls). ``batches`` > 1 when a slow observer received several batches as one
    event (``time`` is then the first one's, ``rows`` and ``bytes`` the sums)."""

    operator_id: int
    partition: int
    rows: int
    bytes: int
    batches: int = 1


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
class RepartitionOutput(Event):
    operator_id: int
    rows_per_partition: tuple[int, ...]


_RESERVATIONS = object()  # where the pending reservation changes are delivered
GATHER_INTERVAL = 0.02  # seconds a delivery thread collects events before handing them over
MAX_INCOMING = 1024  # unmerged events an observer may lag by before publishers merge them


class _BatchSum:
    """BatchProduced events of one operator partition run, merged while they wait."""

    __slots__ = ("batches", "bytes", "first", "rows")

    def __init__(self, first: BatchProduced):
        self.first, self.rows, self.bytes, self.batches = (first, first.rows, first.bytes,
                                                           first.batches)

    def add(self, event: BatchProduced) -> None:
        self.rows += event.rows
        self.bytes += event.bytes
        self.batches += event.batches

    def event(self) -> BatchProduced:
        return replace(self.first, rows=self.rows, bytes=self.bytes, batches=self.batches)


class _Delivery:
    """One observer's events and the thread that hands them over.

    Engine threads only append to ``incoming`` (no lock). Each round, the delivery thread
    moves what arrived into ``pending``, merging high-rate events there, then calls the
    observer outside the lock; what arrives meanwhile waits for the next round. When an
    observer lags so far that ``incoming`` passes ``MAX_INCOMING``, the publisher merges
    (under the lock) itself: memory stays bounded by the plan, not by the batches.
    """

    def __init__(self, bus: EventBus, observer: Callable[[Event], None]):
        self.bus, self.observer = bus, observer
        self._incoming: deque[Event] = deque()
        self._lock = threading.Lock()  # guards pending, the merge indexes and the counter
        self._pending: list = []
        self._batch_index: dict[tuple[int, int], int] = {}  # (operator, partition) -> index
        self._reservations: dict[str, ReservationChanged] = {}  # in order of last change
        self._wakeup, self._finished = threading.Event(), threading.Event()
        self._waiting = self._closing = self._stopped = False
        self.ended = False  # set (under the bus's lock) when the thread is about to end
        self.coalesced = 0  # events merged into an earlier one (or superseded)
        # daemon only as a safety net: close() joins it
        self._thread = threading.Thread(target=self._run, name="plansight-events", daemon=True)
        self._thread.start()

    def put(self, event: Event) -> None:
        incoming = self._incoming
        incoming.append(event)
        if len(incoming) > MAX_INCOMING:
            self._absorb()
        if self._waiting:
            self._waiting = False
            self._wakeup.set()

    def _absorb(self) -> None:
        """Move what arrived into ``pending``, in arrival order, merging as it goes."""
        with self._lock:
            incoming, pending = self._incoming, self._pending
            batch_index, reservations = self._batch_index, self._reservations
            while incoming:
                event = incoming.popleft()
                kind = type(event)
                if kind is BatchProduced:
                    key = (event.operator_id, event.partition)
                    index = batch_index.get(key)
                    if index is None:
                        batch_index[key] = len(pending)
                        pending.append(event)
                    else:
                        merged = pending[index]
                        if type(merged) is not _BatchSum:
                            merged = pending[index] = _BatchSum(merged)
                        merged.add(event)
                        self.coalesced += 1
                elif kind is ReservationChanged:
                    if not reservations:
                        pending.append(_RESERVATIONS)
                    elif reservations.pop(event.consumer, None) is not None:
                        self.coalesced += 1
                    reservations[event.consumer] = event  # last: its pool_total is the latest
                else:
                    if kind is OperatorStarted or kind is OperatorFinished:
                        # a new run of this operator partition: its batches count apart
                        batch_index.pop((event.operator_id, event.partition), None)
                    pending.append(event)

    def _run(self) -> None:
        try:
            self._deliver_until_closed()
        finally:
            self.bus._ended(self)

    def _deliver_until_closed(self) -> None:
        while not self._stopped:
            self._wakeup.clear()
            self._waiting = True  # before looking: a publisher that appends now wakes us
            if not (self._incoming or self._closing or self._stopped):
                self._wakeup.wait()
            self._waiting = False
            if not (self._closing or self._stopped):
                # let more arrive: one wake-up per interval, not per event (a thread switch
                # costs the engine more than the event); finish() cuts it short
                self._finished.wait(GATHER_INTERVAL)
            self._absorb()
            with self._lock:
                pending, self._pending = self._pending, []
                reservations, self._reservations = self._reservations, {}
                self._batch_index.clear()
            if not pending and self._closing and not self._incoming:
                return
            observer = self.observer
            for item in pending:
                if item is _RESERVATIONS:
                    events = list(reservations.values())
                elif type(item) is _BatchSum:
                    events = [item.event()]
                else:
                    events = [item]
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
            self._pending, self._reservations = [], {}
            self._batch_index.clear()
        self._finished.set()
        self._wakeup.set()

    def join(self) -> None:
        self._thread.join()


class _InlineDelivery:
    """Calls the observer on the publishing thread (``EventBus(synchronous=True)``)."""

    ended = True

    def __init__(self, bus: EventBus, observer: Callable[[Event], None]):
        self.bus, self.observer = bus, observer
        self._failed = False

    def put(self, event: Event) -> None:
        try:
            self.observer(event)
        except Exception as error:  # noqa: BLE001 -- an observer bug must not break the query
            if not self._failed:
                self._failed = True
                self.bus._detach(self, error)
                self.bus._report()

    def finish(self) -> None:
        pass

    stop = join = finish


class EventBus:
    """Fan-out of engine events, one delivery thread per observer.

    Use it as a context manager, or call ``close()`` at the end of the query: it delivers every
    event published before it and ends the delivery threads. ``synchronous=True`` calls the
    observers inline on the publishing engine thread instead -- only for internal uses that
    must act within the event; a slow synchronous observer slows the query.

    Example:
        >>> seen = []
        >>> with EventBus([seen.append]) as bus:
        ...     for rows in (10, 20, 30):
        ...         bus.publish(BatchProduced(operator_id=1, partition=0, rows=rows, bytes=8))
        >>> sum(e.rows for e in seen), sum(e.batches for e in seen)
        (60, 3)
    """

    def __init__(self, observers: list[Callable[[Event], None]] | None = None,
                 synchronous: bool = False):
        self.synchronous = synchronous
        self.active = False  # the one attribute publishers check before building an event
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
        """Events merged into earlier ones because an observer was behind (all observers)."""
        return sum(getattr(d, "coalesced", 0) for d in self._started)

    def subscribe(self, observer: Callable[[Event], None]) -> None:
        delivery = (_InlineDelivery if self.synchronous else _Delivery)(self, observer)
        with self._lock:
            self._deliveries += (delivery,)
            self._started.append(delivery)
            self.active = True

    def publish(self, event: Event) -> None:
        for delivery in self._deliveries:
            delivery.put(event)

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

    def __enter__(self) -> Self:
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
