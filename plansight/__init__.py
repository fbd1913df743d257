"""plansight: SQL in notebooks on a vectorized Arrow engine, with live plan monitors.

    >>> import plansight as ps
    >>> ps.Session(target_partitions=1).sql("SELECT 1 + 1 AS two").to_arrow().to_pylist()
    [{'two': 2}]
"""

from __future__ import annotations

from plansight.engine.exec.allocator import (
    arrow_pool_before_import,
    restore_arrow_pool_variable,
)

# before anything loads pyarrow: Arrow C++ reads its default pool once, when it loads
_arrow_pool = arrow_pool_before_import()

from plansight.errors import (  # noqa: E402 (all after the pool is chosen)
    Cancelled,
    ExecutionError,
    InternalError,
    NotSupportedError,
    PlanError,
    PlansightError,
    ResourcesExhausted,
    SqlSyntaxError,
)
from plansight.query import Query, QueryRun  # noqa: E402
from plansight.query_history import history  # noqa: E402
from plansight.session import Session  # noqa: E402

if _arrow_pool is not None:
    # read by now (pyarrow is loaded): child processes keep the user's environment
    restore_arrow_pool_variable()

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
