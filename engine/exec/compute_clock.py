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
not nested: their consumer only waits on a queue. ``waited`` adds such waits to ``nested``,
so a queue read is nobody's compute. Subtracting children's totals at the reader instead
is wrong as soon as a child runs on another thread or partitions run in parallel.
"""

from __future__ import annotations

import threading
import time


class _ThreadClock(threading.local):
    nested = 0.0  # the class attribute is each thread's starting value


CLOCK = _ThreadClock()


def waited(since: float) -> None:
    """Count the seconds from ``since`` (a ``perf_counter`` reading) to now as waiting, not
    compute, of whichever operator pull is running on this thread."""
    CLOCK.nested += time.perf_counter() - since
