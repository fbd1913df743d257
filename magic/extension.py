"""IPython extension entry points: ``%load_ext plansight`` registers the ``%%query`` magics.

One ``Session`` per kernel, created lazily on first use, so loading the extension is cheap.
"""

from __future__ import annotations

import threading

_session = None
_session_lock = threading.Lock()
_options = None  # the shell's Query configurable, once the extension is loaded


def get_session():
    """The kernel's plansight Session used by ``%%query`` (created on first call).

    Example:
        >>> from plansight.magic import get_session
        >>> get_session() is get_session()
        True
    """
    global _session
    with _session_lock:
        if _session is None:
            import plansight as ps

            _session = ps.Session()
            if _options is not None:
                _options.apply_to(_session)
        return _session


def set_session(session) -> None:
    """Replace the kernel's Session (tests, or a notebook wanting custom defaults)."""
    global _session
    with _session_lock:
        _session = session


def load_ipython_extension(ipython) -> None:
    from plansight.magic.magic import PlansightMagics
    from plansight.magic.options import Query

    global _options
    if _options is None or _options not in ipython.configurables:
        _options = Query(parent=ipython)  # picks up config files and earlier %config
        ipython.configurables.append(_options)
    ipython.register_magics(PlansightMagics)


def unload_ipython_extension(ipython) -> None:
    magics = ipython.magics_manager.magics
    for kind in ("line", "cell"):
        magics[kind].pop("query", None)


def get_options():
    """The ``Query`` configurable of this kernel (None before ``%load_ext plansight``)."""
    return _options
