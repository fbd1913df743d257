"""retain_freed_memory: applied once per process by a Session on glibc, opt-out by env;
released when a query ends.

Arrow keeps its own pools (jemalloc where pyarrow has it, for Python-facing calls and, set
before pyarrow loads, for Arrow C++'s internals): on glibc with an arena per thread a 2M-row
sort peaked at 3.9 GB and a 10M-row one was OOM-killed; on the one trimmed arena it was
~20% slower in wall time."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

_PROBE = ("import pyarrow as pa, plansight as ps; "
          "from plansight.engine.exec import allocator; ps.Session(target_partitions=1); "
          "print(allocator._applied is not None, pa.default_memory_pool().backend_name)")

_SORT = """
import resource, numpy as np, pyarrow as pa, plansight as ps
x = np.random.default_rng(0).integers(0, 1 << 40, 2_000_000)
s = ps.Session(target_partitions=1)
s.register("t", pa.table({"x": x, "y": np.arange(len(x))}))
assert s.sql("SELECT x, y FROM t ORDER BY x").to_arrow().num_rows == len(x)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def _run(code: str, env: dict[str, str]) -> str:
    result = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                            capture_output=True, text=True, check=True)
    return result.stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="tunes glibc malloc only")
def test_a_session_retains_freed_memory_and_arrow_keeps_its_pool():
    applied, backend = _run(_PROBE, {"PLANSIGHT_RETAIN_MEMORY": "1"}).split()
    assert applied == "True" and backend != "system"


def test_the_environment_opts_out():
    applied, _ = _run(_PROBE, {"PLANSIGHT_RETAIN_MEMORY": "0"}).split()
    assert applied == "False"


def test_a_sort_does_not_fragment_the_heap():
    """32 MB of input: the sort's peak RSS stays within a few hundred MB (3.9 GB before)."""
    peak_mib = int(_run(_SORT, {"PLANSIGHT_RETAIN_MEMORY": "1"}))
    assert peak_mib < 1024


_JEMALLOC = ("import pyarrow as pa\n"
             "try:\n    pa.jemalloc_memory_pool(); print('yes')\n"
             "except NotImplementedError:\n    print('no')")
_POOL = ("import pyarrow as pa, plansight as ps; ps.Session(); "
         "print(pa.default_memory_pool().backend_name)")


def test_a_session_moves_arrow_onto_jemalloc_unless_the_user_chose_a_pool():
    has_jemalloc = _run(_JEMALLOC, {}) == "yes"
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    chosen = subprocess.run([sys.executable, "-c", _POOL], env=env, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert chosen == ("jemalloc" if has_jemalloc else "mimalloc")
    assert _run(_POOL, {"ARROW_DEFAULT_MEMORY_POOL": "system"}) == "system"


_IMPORT_FIRST = ("import os, plansight, pyarrow as pa; "
                 "print(os.environ.get('ARROW_DEFAULT_MEMORY_POOL'), "
                 "pa.default_memory_pool().backend_name)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="set on Linux only")
def test_importing_plansight_first_puts_arrow_cpp_default_on_jemalloc():
    """No Session yet, so the pool seen is Arrow C++'s own default, fixed when pyarrow loaded:
    what Arrow's internals allocate goes to jemalloc too (it stayed on mimalloc, 60-70 MiB
    resident after TPC-H Q1, Q18, Q9, when only pyarrow.set_memory_pool moved)."""
    if _run(_JEMALLOC, {}) != "yes":
        pytest.skip("this pyarrow has no jemalloc")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    def run(extra):
        return subprocess.run([sys.executable, "-c", _IMPORT_FIRST], env={**env, **extra},
                              capture_output=True, text=True, check=True).stdout.split()
    assert run({}) == ["None", "jemalloc"]  # the variable is gone once read: not inherited
    assert run({"ARROW_DEFAULT_MEMORY_POOL": "system"}) == ["system", "system"]  # the user's


def test_jemalloc_gets_one_arena_unless_the_user_gave_options():
    from plansight.engine.exec.allocator import (
        JEMALLOC_CONF,
        JEMALLOC_CONF_VARIABLE,
        arrow_pool_before_import,
        restore_arrow_pool_variable,
    )
    environ: dict[str, str] = {}
    if not sys.platform.startswith("linux"):
        assert arrow_pool_before_import(environ, {}) is None and environ == {}
        return
    assert arrow_pool_before_import(environ, {}) == "jemalloc"
    assert environ[JEMALLOC_CONF_VARIABLE] == JEMALLOC_CONF == "narenas:1"
    assert restore_arrow_pool_variable(environ, {"pyarrow": object()}) and environ == {}
    users = {JEMALLOC_CONF_VARIABLE: "narenas:4"}
    assert arrow_pool_before_import(users, {}) == "jemalloc"
    assert restore_arrow_pool_variable(users, {"pyarrow": object()})
    assert users == {JEMALLOC_CONF_VARIABLE: "narenas:4"}  # theirs, kept


_CONF_AFTER_IMPORT = ("import os, plansight, pyarrow as pa; "
                      "print(os.environ.get('JE_ARROW_MALLOC_CONF'))")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="set on Linux only")
def test_the_jemalloc_options_are_not_inherited_by_child_processes():
    env = {k: v for k, v in os.environ.items()
           if k not in ("ARROW_DEFAULT_MEMORY_POOL", "JE_ARROW_MALLOC_CONF")}
    def run(extra):
        return subprocess.run([sys.executable, "-c", _CONF_AFTER_IMPORT], env={**env, **extra},
                              capture_output=True, text=True, check=True).stdout.strip()
    assert run({}) == "None"
    assert run({"JE_ARROW_MALLOC_CONF": "narenas:2"}) == "narenas:2"


_RELEASE = """
import threading, numpy as np, plansight as ps
from plansight.engine.exec.allocator import release_freed_memory
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 >> 20
ps.Session(target_partitions=1)
def temporaries():  # as a worker thread's operator: its buffers, then a smaller survivor
    global kept
    parts = [np.ones(4 << 20) for _ in range(8)]  # 8 x 32 MiB
    kept = np.ones(1 << 16)
    del parts
thread = threading.Thread(target=temporaries)
thread.start(); thread.join()
freed = rss()
release_freed_memory()
print(freed, rss())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not os.path.exists("/proc/self/statm"),
                    reason="glibc's malloc_trim, /proc")
def test_freed_memory_is_kept_until_released():
    """256 MiB freed by a worker thread stays resident for reuse (retention) and is given back
    by release_freed_memory, as at the end of every query."""
    freed, released = map(int, _run(_RELEASE, {"PLANSIGHT_RETAIN_MEMORY": "1"}).split())
    assert freed - released > 200, (freed, released)
