"""retain_freed_memory: applied once per process by a Session on glibc, opt-out by env.

Arrow keeps its own pool: moving it onto the retaining glibc heap fragmented without bound
(a 2M-row sort peaked at 3.9 GB; a 10M-row one was OOM-killed)."""

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
