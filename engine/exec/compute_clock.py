"""Per-thread accounting that makes ``elapsed_compute`` an operator's *own* time.

An operator's ``next()`` runs its children's ``next()`` inside it, on the same thread, so the
time around it is inclusive. Every instrumented pull therefore reads ``nested`` -- the
seconds this thread has spent in nested pulls and in waits -- before and after, charges
itself only the difference, and then replaces what its nested pulls added with its own
inclusive time, so that its parent subtracts it exactly once::

    parent pull  ├──────────────────────────────┤   own = total - (child)
    child pull       ├──────────────────┤           own = total - (grandchild)
    grandchild           ├──────┤                   own = total

Children that run on other threads (a repartition's producers, a merge's prefetchers) are
not nested: their consumer only waits on a queue. ``waiting`` adds such waits to ``nested``,
so a queue read is nobody's compute. Subtracting children's totals at the reader instead
is wrong as soon as a child runs on another thread or partitions run in parallel.

A pull in progress has not charged anything yet: a sort consuming its whole input inside
its first pull would show no own time until it emits. So each thread also keeps a stack of
its open pulls, ``(metrics, start, nested at start)``, outermost first, readable from other
threads: ``open_pulls`` charges the innermost pull with the time since it started (less
what its finished children took) and each outer one with its time before the next inner
pull began, which is what they will be charged when they end.
"""

from __future__ import annotations

import threading
import time
import weakref


class ThreadTime:
    """One thread's accounting, in a plain object so that other threads can read it."""

    __slots__ = ("nested", "open", "__weakref__")

    def __init__(self):
        self.nested = 0.0  # seconds of nested pulls and waits so far
        self.open: list[tuple] = []  # (metrics, start, nested at start), outermost first
        _THREADS.add(self)


_THREADS: weakref.WeakSet[ThreadTime] = weakref.WeakSet()  # a dead thread's drops out


class _ThreadClock(threading.local):
    def __init__(self):
        self.state = ThreadTime()


CLOCK = _ThreadClock()  # CLOCK.state: this thread's ThreadTime


class waiting:
    """``with waiting(): queue.get()`` -- the time inside is a wait on another thread's work,
    nobody's compute; while it lasts it is an open entry of no operator, so that live
    readers do not charge it to the pull that waits."""

    __slots__ = ("state", "start")

    def __enter__(self) -> None:
        self.state = CLOCK.state
        self.start = time.perf_counter()
        self.state.open.append((None, self.start, self.state.nested))

    def __exit__(self, *exc) -> None:
        self.state.open.pop()
        self.state.nested += time.perf_counter() - self.start


def open_pulls(now: float) -> list[tuple[object, float]]:
    """(metrics, own seconds so far) of every pull in progress on any thread.

    Example:
        >>> state = CLOCK.state
        >>> state.open.append(("outer", 10.0, 0.0))
        >>> state.open.append(("inner", 12.0, 0.5))
        >>> state.nested = 1.0  # the inner pull's finished children took 0.5 s
        >>> sorted((m, own) for m, own in open_pulls(now=15.0) if m in ("outer", "inner"))
        [('inner', 2.5), ('outer', 1.5)]
        >>> del state.open[-2:]; state.nested = 0.0
    """
    found = []
    for state in list(_THREADS):
        stack, nested_now = list(state.open), state.nested  # a copy: the thread goes on
        inner_start, inner_nested = now, nested_now
        for metrics, start, nested in reversed(stack):
            if metrics is not None:  # None: a wait (``waiting``), nobody's compute
                found.append((metrics,
                              max(0.0, (inner_start - start) - (inner_nested - nested))))
            inner_start, inner_nested = start, nested
    return found
