"""plansight: SQL in notebooks on a vectorized Arrow engine, with live plan monitors.

    >>> import plansight as ps
    >>> ps.Session(target_partitions=1).sql("SELECT 1 + 1 AS two").to_arrow().to_pylist()
    [{'two': 2}]
"""

from __future__ import annotations

from plansight.errors import (
    Cancelled,
    ExecutionError,
    InternalError,
    NotSupportedError,
    PlanError,
    PlansightError,
    ResourcesExhausted,
    SqlSyntaxError,
)
from plansight.query import Query, QueryRun
from plansight.query_history import history
from plansight.session import Session

__version__ = "0.1.0"

__all__ = ["Session", "Query", "QueryRun", "PlansightError", "SqlSyntaxError", "PlanError",
           "NotSupportedError", "ExecutionError", "ResourcesExhausted", "Cancelled",
           "InternalError", "history"]


def load_ipython_extension(ipython):  # %load_ext plansight
    from plansight.magic.extension import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython):
    from plansight.magic.extension import unload_ipython_extension as unload

    unload(ipython)
