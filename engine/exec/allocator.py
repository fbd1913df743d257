"""Let freed numpy buffers be reused instead of unmapped, so large temporaries cost no page faults.

numpy allocates through malloc. glibc serves a request above its mmap threshold with a fresh
``mmap`` and returns it with ``munmap`` on free; the threshold adapts upwards to freed sizes,
but never beyond 32 MiB. So an operator whose temporaries are 64 MiB int64 arrays (8M rows)
page-faults and zeroes every page of every temporary again, in the kernel: measured on the
window workload ``large_2m`` at 4x rows (``SUM(v) OVER (... ROWS 100 PRECEDING)``), 1.8 s
of system time on top of 0.9 s of user time, against 0.09 s of system time at 1x rows, whose
16 MiB temporaries stay on the heap. That alone made 4x rows cost 6-8x the time.

``retain_freed_memory`` makes glibc serve every buffer from the heap (no mmap: a worker
thread's arena would otherwise still map any buffer larger than its 64 MiB heap) and trim the
heap only when more than ``limit`` bytes are free at its top, so freed buffers stay for the
next allocation. Measured on that query: CPU per run 0.32 s -> 0.21 s at 1x rows and 1.29 s ->
0.96 s at 4x rows (system time 0.49 s -> 0.07 s). The price is RSS: up to ``limit`` bytes of
freed memory may stay mapped between queries (as in the arenas of engines built on
jemalloc/mimalloc). Only glibc is tuned; elsewhere this is a no-op.

Arrow has two default pools, and both must give memory back. ``pyarrow.set_memory_pool``
(what ``use_returning_arrow_pool`` calls at a Session's start) moves only what Python-facing
calls allocate; Arrow C++'s own default, which its internals use (Parquet decoding, some
kernels), is fixed from ``ARROW_DEFAULT_MEMORY_POOL`` when pyarrow loads, and stayed on
mimalloc, which keeps what it freed: a 1 GiB mimalloc region held 60-70 MiB after TPC-H Q1,
Q18 and Q9, and no release returned it. So ``arrow_pool_before_import`` (run by ``import
plansight``) sets that variable to jemalloc while pyarrow is not loaded yet (and removes it
once pyarrow has read it); a process that loaded pyarrow first gets only the Python-side
switch. jemalloc rather than mimalloc: unlike mimalloc, ``release_unused`` purges its arenas
(the Python side alone, glibc retention off: whole-run peak 803 MiB on mimalloc, 650 on
jemalloc; 575 against 378 MiB resident after the run and a release). Measured over the 22
TPC-H SF 1 queries in one process (whole-run peak RSS, two runs each, interleaved): 609/645
MiB with only the Python side on jemalloc (as before), 540/551 MiB with both, and 511/479
MiB with both on glibc's system pool, which shares the one trimmed arena with numpy; but
wall time rose ~20% at the same CPU time (geomean 0.82/0.63 s jemalloc, 1.01/0.76 s system),
the partitions apparently waiting on that one arena's lock, so the system pool is not used.

History, so nobody repeats it: Arrow on a glibc heap with an arena per thread fragmented
without bound (a 2M-row sort peaked at 3.9 GB instead of 260 MB, a 10M-row sort was killed
by the OOM killer); on the one trimmed arena it did not (243 / 675 MiB), but it was slower,
as above. Whole-run peak RSS over the 22 TPC-H SF 1 queries, from the start: 1,012 MiB on
mimalloc with retention unbounded in time, 735 MiB on jemalloc with a release per query,
625-700 MiB with one arena too (the C++ default still on mimalloc), ~540-550 MiB with
both Arrow defaults on jemalloc.

``release_freed_memory`` bounds the retention in time: a query's freed buffers are reused
within it (where the page faults were measured), and given back when it ends (``malloc_trim``
and Arrow's ``release_unused``), so one large query does not leave its high-water mark
resident for every later one (TPC-H Q18 left ~450 MiB of free heap behind). For that, glibc
keeps a single arena: ``malloc_trim`` returns the free top of the main heap and free pages
inside any heap, but never the free top of a thread's arena (up to 64 MiB each, one per
worker thread that allocated), and those were most of what stayed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
DEFAULT_LIMIT = (1 << 31) - 1  # 2 GiB, the largest value mallopt takes
_applied: int | None = None


def retain_freed_memory(limit: int = DEFAULT_LIMIT) -> bool:
    """Keep up to ``limit`` bytes of freed buffers for reuse (glibc); True if applied.

    Process-wide and idempotent; ``PLANSIGHT_RETAIN_MEMORY=0`` in the environment turns it
    off (the allocator keeps glibc's defaults).

    Example:
        >>> retain_freed_memory() in (True, False)
        True
    """
    global _applied
    if _applied is not None:
        return _applied == limit
    if os.environ.get("PLANSIGHT_RETAIN_MEMORY", "1") == "0" or \
            platform.libc_ver()[0] != "glibc":
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return False
    # mallopt returns 1 on success; a fixed threshold also stops glibc's own adjustment. One
    # arena: malloc_trim gives back the free top of the main heap only, never that of a
    # thread's arena, so what worker threads freed would stay resident after the query
    ok = libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(limit)) == 1 and \
        libc.mallopt(_M_MMAP_MAX, ctypes.c_int(0)) == 1 and \
        libc.mallopt(_M_ARENA_MAX, ctypes.c_int(1)) == 1
    if ok:
        _applied = limit
    return ok


#: Arrow's bundled jemalloc reads its options from this variable when it starts
JEMALLOC_CONF_VARIABLE = "JE_ARROW_MALLOC_CONF"
#: one arena for every thread, not jemalloc's 4 per CPU: each arena keeps what its threads
#: freed for up to a second (its dirty-page decay), and the worker threads' arenas each
#: held their own. Peak RSS of one TPC-H SF 1 query at 2 partitions, fresh process, second
#: run: Q9 496 -> 411 MiB, Q10 470 -> 357, Q18 499 -> 457, Q21 385 -> 339, at the same or
#: lower CPU time; threads still allocate from their own caches (tcache), so they seldom
#: meet at the arena's lock. (A decay of 0 instead cost Q9 +50% CPU in page faults.)
JEMALLOC_CONF = "narenas:1"


def arrow_pool_before_import(environ=None, modules=None) -> str | None:
    """Point Arrow C++'s default pool at jemalloc (``ARROW_DEFAULT_MEMORY_POOL``), with one
    arena (``JEMALLOC_CONF`` unless the user gave jemalloc options), while pyarrow is not
    loaded yet, on Linux (whose pyarrow builds have jemalloc) where no pool was chosen;
    returns the pool set, or None when nothing was set.

    Only the variable is set here: Arrow reads it once, when it loads, and
    ``pyarrow.set_memory_pool`` later cannot move what Arrow C++ allocates internally.

    Example:
        >>> arrow_pool_before_import({}, {"pyarrow": object()}) is None  # loaded: too late
        True
    """
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if "pyarrow" in modules or environ.get("ARROW_DEFAULT_MEMORY_POOL") or \
            not sys.platform.startswith("linux"):
        return None
    environ["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"
    if not environ.get(JEMALLOC_CONF_VARIABLE):
        environ[JEMALLOC_CONF_VARIABLE] = JEMALLOC_CONF
    return "jemalloc"


def restore_arrow_pool_variable(environ=None, modules=None) -> bool:
    """Remove the variables ``arrow_pool_before_import`` set, once pyarrow has loaded and
    read them, so child processes see the user's environment; True if removed.

    Example:
        >>> restore_arrow_pool_variable({"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}, {})
        False
    """
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if "pyarrow" not in modules or environ.get("ARROW_DEFAULT_MEMORY_POOL") != "jemalloc":
        return False
    del environ["ARROW_DEFAULT_MEMORY_POOL"]
    if environ.get(JEMALLOC_CONF_VARIABLE) == JEMALLOC_CONF:
        # jemalloc reads it once, when it starts: make sure it has (one allocation)
        pyarrow = modules["pyarrow"]
        try:
            pyarrow.allocate_buffer(1, memory_pool=pyarrow.jemalloc_memory_pool())
        except (AttributeError, NotImplementedError):  # no jemalloc in this build
            pass
        del environ[JEMALLOC_CONF_VARIABLE]
    return True


_arrow_pool_chosen = False


def use_returning_arrow_pool() -> str:
    """Make jemalloc Arrow's default pool where pyarrow has it; returns the pool's backend.

    Process-wide and idempotent. A pool chosen by the user (``ARROW_DEFAULT_MEMORY_POOL`` in
    the environment, or ``pyarrow.set_memory_pool`` to anything but mimalloc) is kept.
    Buffers already allocated keep their pool: switching is safe at any time.

    Example:
        >>> use_returning_arrow_pool() in ("jemalloc", "mimalloc", "system")
        True
    """
    global _arrow_pool_chosen
    import pyarrow as pa

    if not _arrow_pool_chosen:
        _arrow_pool_chosen = True
        if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL") and \
                pa.default_memory_pool().backend_name == "mimalloc":
            try:
                pa.set_memory_pool(pa.jemalloc_memory_pool())
            except (NotImplementedError, pa.ArrowException):
                pass  # a pyarrow built without jemalloc keeps its default
    return pa.default_memory_pool().backend_name


def release_freed_memory() -> None:
    """Give freed memory back to the OS: glibc's free pages (every arena) and Arrow's pool.

    Called when a query ends; costs well under a millisecond when little is free.

    Example:
        >>> release_freed_memory()
    """
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(ctypes.c_size_t(0))


_LIBC: list = []


def _libc():
    """glibc through ctypes, or None elsewhere (loaded once)."""
    if not _LIBC:
        handle = None
        name = ctypes.util.find_library("c") if platform.libc_ver()[0] == "glibc" else None
        if name is not None:
            try:
                handle = ctypes.CDLL(name)
            except OSError:
                handle = None
        _LIBC.append(handle)
    return _LIBC[0]
