"""retain_freed_memory: applied once per process by a Session on glibc, opt-out by env."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

_PROBE = ("import pyarrow as pa, plansight as ps; ps.Session(target_partitions=1); "
          "print(pa.default_memory_pool().backend_name)")


def _backend(env: dict[str, str]) -> str:
    result = subprocess.run([sys.executable, "-c", _PROBE], env={**os.environ, **env},
                            capture_output=True, text=True, check=True)
    return result.stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="tunes glibc malloc only")
def test_a_session_makes_arrow_share_the_retaining_system_allocator():
    assert _backend({"PLANSIGHT_RETAIN_MEMORY": "1"}) == "system"


def test_the_environment_opts_out():
    assert _backend({"PLANSIGHT_RETAIN_MEMORY": "0"}) != "system"
