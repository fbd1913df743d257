"""Sampler: a background thread recording this process's RSS and CPU use while a query runs.

Samples use ``time.perf_counter()``, the clock of the engine's events, so a memory curve
lines up with the operator timeline without any conversion. One sample is taken when the
sampler starts and one when it stops, so even a query shorter than the interval has a curve.

    start() ──sample── wait(interval) ──sample── ... ──sample── stop()
             t0                          t0 + k·interval        t_end
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psutil

DEFAULT_INTERVAL = 0.05  # seconds: 20 samples per second


@dataclass(frozen=True)
class Sample:
    """One measurement: ``time`` (perf_counter seconds), resident bytes, CPU percent.

    ``cpu_percent`` is the process's CPU use since the previous sample; it exceeds 100 when
    several threads run at once (200 = two cores busy).
    """

    time: float
    rss: int
    cpu_percent: float


class Sampler:
    """Sample process RSS and CPU at ``interval`` seconds in a daemon thread.

    Example:
        >>> with Sampler(interval=0.01) as sampler:
        ...     _ = sum(range(100_000))
        >>> len(sampler.samples) >= 2 and all(s.rss > 0 for s in sampler.samples)
        True
    """

    def __init__(self, interval: float = DEFAULT_INTERVAL, pid: int | None = None):
        if not interval > 0:
            raise ValueError(f"interval must be positive, got {interval!r}")
        self.interval = interval
        self._process = psutil.Process(pid)
        self._samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def samples(self) -> list[Sample]:
        """Samples so far, oldest first (a copy: safe to read while sampling)."""
        return list(self._samples)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> Sampler:
        if self.running:
            raise RuntimeError("the sampler is already running")
        self._stop.clear()
        self._process.cpu_percent(None)  # primes the counter: the first reading is since now
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="plansight-sampler",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        """Stop sampling (idempotent); returns all samples, including a final one."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._sample()
        return self.samples

    def __enter__(self) -> Sampler:  # noqa: PYI034 -- typing.Self needs Python 3.11
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        try:
            with self._process.oneshot():
                rss = self._process.memory_info().rss
                cpu = self._process.cpu_percent(None)
        except psutil.Error:  # the process is going away: nothing left to measure
            return
        # list.append is atomic; readers copy the list
        self._samples.append(Sample(time.perf_counter(), int(rss), float(cpu)))
