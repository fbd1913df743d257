"""Typed engine events on a bus that observers (widgets, profilers) subscribe to.

The engine never imports its observers. Publishing with no observer costs one attribute check;
an observer that raises is reported once and detached, never fatal to the query.
"""

from __future__ import annotations

import threading
import time
import warnings
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
    operator_id: int
    operator: str
    partition: int
    rows: int
    elapsed: float


@dataclass(frozen=True)
class BatchProduced(Event):
    operator_id: int
    partition: int
    rows: int
    bytes: int


@dataclass(frozen=True)
class ReservationChanged(Event):
    consumer: str
    size: int
    pool_total: int


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


class EventBus:
    """Synchronous fan-out; observers must be quick (widgets coalesce on their side)."""

    def __init__(self, observers: list[Callable[[Event], None]] | None = None):
        self._observers = list(observers or [])
        self._lock = threading.Lock()
        self.errors: list[BaseException] = []

    @property
    def active(self) -> bool:
        return bool(self._observers)

    def subscribe(self, observer: Callable[[Event], None]) -> None:
        with self._lock:
            self._observers.append(observer)

    def publish(self, event: Event) -> None:
        for observer in self._observers:
            try:
                observer(event)
            except Exception as error:  # an observer bug must not break the query
                with self._lock:
                    if observer in self._observers:
                        self._observers.remove(observer)
                self.errors.append(error)
                warnings.warn(f"plansight: observer {observer!r} raised {error!r}; detached",
                              RuntimeWarning, stacklevel=2)
