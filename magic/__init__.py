"""``%%query`` / ``%query`` IPython magics: SQL cells on the plansight engine."""

from __future__ import annotations

from plansight.magic.extension import (
    get_session,
    load_ipython_extension,
    set_session,
    unload_ipython_extension,
)
from plansight.magic.result import QueryResult

__all__ = [
    "QueryResult",
    "get_session",
    "load_ipython_extension",
    "set_session",
    "unload_ipython_extension",
]
