"""Lazy numba: kernels are plain Python functions compiled on their first call.

``import plansight`` must stay fast (``%load_ext`` runs it), and importing numba costs about
half a second, so nothing imports numba until a kernel runs. A kernel module marks its
functions with ``@kernel``; the first call of any of them imports numba and swaps every
kernel of that module for its numba dispatcher (``njit(nogil=True, cache=True)``), so
kernels can call each other (numba types a call through the module's globals).

``nogil=True`` matters as much as the speed: partitions run on threads, and a kernel that
holds the GIL would make a second partition wait.

Compiled code is cached on disk (once per machine). numba writes next to the source
(``kernels/__pycache__``) by default; when the installed package is read-only, and
``NUMBA_CACHE_DIR`` is unset or unwritable too, the cache goes to a per-user folder
(``$XDG_CACHE_HOME/plansight/numba``, else the temp dir). With nowhere writable the kernels
still run, compiled per process.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from plansight.engine.errors import InternalError

#: numba's default cache folder for this package's kernels (its "in-tree" locator)
IN_TREE_CACHE = Path(__file__).resolve().parent / "__pycache__"

_lock = threading.RLock()
_state: dict[str, Any] = {}


def writable(directory: Path) -> bool:
    """Whether files can be created in ``directory`` (made if missing). Tries it: a mode
    check is wrong for root and for read-only mounts."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
        return True
    except OSError:
        return False


def fallback_cache_dirs(environ: Mapping[str, str]) -> list[Path]:
    """Where the cache goes when the package folder is read-only, in order of preference."""
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    user = f"{os.getuid()}" if hasattr(os, "getuid") else "user"
    return [Path(base) / "plansight" / "numba",
            Path(tempfile.gettempdir()) / f"plansight-numba-{user}"]


def cache_location(in_tree: Path, environ: Mapping[str, str]) -> tuple[bool, str | None]:
    """(cache at all, NUMBA_CACHE_DIR to set or None to leave numba's own choice).

    Example:
        >>> import tempfile, pathlib
        >>> cache_location(pathlib.Path(tempfile.mkdtemp()), {})
        (True, None)
    """
    configured = environ.get("NUMBA_CACHE_DIR")
    if configured and writable(Path(configured)):
        return True, None
    if writable(in_tree):
        # an unwritable NUMBA_CACHE_DIR is skipped by numba itself, which then uses in_tree
        return True, None
    for candidate in fallback_cache_dirs(environ):
        if writable(candidate):
            return True, str(candidate)
    return False, None


def load_numba():
    """Import numba once, after pointing its cache at a writable folder."""
    with _lock:
        if "numba" not in _state:
            cache, directory = cache_location(IN_TREE_CACHE, os.environ)
            if directory is not None:
                os.environ["NUMBA_CACHE_DIR"] = directory
            try:
                import numba
            except ImportError as e:  # a declared dependency: the install is broken
                raise InternalError("plansight's compiled kernels need numba "
                                    "(pip install numba)") from e
            if directory is not None and "numba.core.config" in sys.modules:
                numba.core.config.reload_config()  # numba was imported before us
            _state["numba"], _state["cache"] = numba, cache
        return _state["numba"]


class Kernel:
    """A Python function that becomes a numba dispatcher on its first call."""

    def __init__(self, function: Callable):
        self.function = function
        self.dispatcher: Callable | None = None
        self.__doc__, self.__name__ = function.__doc__, function.__name__

    def __call__(self, *args):
        if self.dispatcher is None:
            _compile_module(self)
        return self.dispatcher(*args)


def kernel(function: Callable) -> Kernel:
    """Mark ``function`` as a kernel: compiled with numba (nogil, cached) on first use."""
    return Kernel(function)


def _compile_module(first: Kernel) -> None:
    """Give ``first`` and every other Kernel of its module a dispatcher, and put those in
    the module's globals (compilation itself is lazy, per argument types, on each
    dispatcher's first call).

    The globals are swapped before any Kernel's ``dispatcher`` is set: another thread calls
    a Kernel's dispatcher as soon as it sees one, and numba, typing that kernel, must find
    the kernels it calls as dispatchers, not Kernels ("Untyped global name 'magnitude'" on
    a fresh install's first query, two partitions compiling decimal.py at once)."""
    numba = load_numba()
    module_globals = first.function.__globals__
    with _lock:
        kernels = {name: value for name, value in module_globals.items()
                   if isinstance(value, Kernel)}
        every = {id(value): value for value in [*kernels.values(), first]}
        dispatchers = {key: value.dispatcher or
                       numba.njit(nogil=True, cache=_state["cache"])(value.function)
                       for key, value in every.items()}
        for name, value in kernels.items():
            module_globals[name] = dispatchers[id(value)]
        for key, value in every.items():
            value.dispatcher = dispatchers[key]
