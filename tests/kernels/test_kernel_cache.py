"""numba stays out of ``import plansight``; the kernel cache falls back to a writable folder
when the package folder (and NUMBA_CACHE_DIR) are read-only."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from plansight.engine.kernels import jit


def _run(code: str, env: dict[str, str] | None = None) -> str:
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                               capture_output=True, text=True, env={**os.environ, **(env or {})},
                               check=False)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_import_plansight_does_not_import_numba():
    out = _run("""
        import sys
        import plansight
        import plansight.engine.physical.joins.hash_join
        import plansight.engine.kernels.hash_table
        print("numba" in sys.modules)
    """)
    assert out.strip() == "False"


def _unwritable(tmp_path: Path) -> Path:
    """A folder nobody can create, root included: its parent is a regular file."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    return blocker / "cache"


def test_cache_location_prefers_configured_then_in_tree_then_fallback(tmp_path):
    bad = _unwritable(tmp_path)
    good = tmp_path / "configured"
    assert jit.cache_location(bad, {"NUMBA_CACHE_DIR": str(good)}) == (True, None)
    assert jit.cache_location(tmp_path / "tree", {"NUMBA_CACHE_DIR": str(bad)}) == (True, None)
    xdg = tmp_path / "xdg"
    assert jit.cache_location(bad, {"NUMBA_CACHE_DIR": str(bad), "XDG_CACHE_HOME": str(xdg)}) \
        == (True, str(xdg / "plansight" / "numba"))


def test_kernels_compile_and_cache_in_the_fallback_when_the_package_dir_is_read_only(tmp_path):
    xdg = tmp_path / "xdg"
    out = _run(f"""
        import pathlib
        import numpy as np
        import pyarrow as pa
        from plansight.engine.kernels import jit
        jit.IN_TREE_CACHE = pathlib.Path({str(_unwritable(tmp_path))!r})
        from plansight.engine.physical.joins.key_index import KeyIndex
        index = KeyIndex([pa.array([3, 1, 3, None])])
        codes, _ = index.probe_codes([pa.array([1, 2, 3])])
        print(sorted(zip(*[a.tolist() for a in index.matches(codes)])))
    """, env={"NUMBA_CACHE_DIR": str(_unwritable(tmp_path)), "XDG_CACHE_HOME": str(xdg)})
    assert out.strip() == "[(0, 1), (2, 0), (2, 2)]"
    cached = list((xdg / "plansight" / "numba").rglob("*.nbi"))
    assert any("hash_table" in path.name for path in cached), cached


def test_a_kernel_is_published_only_once_its_module_globals_are_dispatchers(tmp_path,
                                                                         monkeypatch):
    """Another thread runs a Kernel's dispatcher as soon as it is set, and numba then types
    the kernels it calls from the module's globals: those must be dispatchers by then. Set
    first, a fresh install's first query failed with "Untyped global name 'magnitude'"."""
    import importlib

    (tmp_path / "two_kernels.py").write_text(textwrap.dedent("""
        def inner(x):
            return x + 1

        def outer(x):
            return inner(x) * 2
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("two_kernels")
    seen: list[bool] = []

    class Watched(jit.Kernel):
        def __setattr__(self, name, value):
            if name == "dispatcher" and value is not None:
                seen.append(not any(isinstance(getattr(module, k), jit.Kernel)
                                    for k in ("inner", "outer")))
            super().__setattr__(name, value)

    module.inner, module.outer = Watched(module.inner), Watched(module.outer)
    assert module.outer(3) == 8
    assert seen == [True, True]
