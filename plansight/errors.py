"""The one exception hierarchy of plansight, as users import it.

The classes live in :mod:`plansight.engine.errors` (the engine raises them and must not import
the facade); this module re-exports them so ``plansight.errors.PlanError`` is the name users see.
"""

from __future__ import annotations

from plansight.engine.errors import (
    Cancelled,
    ExecutionError,
    InternalError,
    NotSupportedError,
    PlanError,
    PlansightError,
    ResourcesExhausted,
    SqlSyntaxError,
    WorkerLost,
    add_caret,
    caret_snippet,
    did_you_mean,
    internal_error,
)

__all__ = [
    "Cancelled", "ExecutionError", "InternalError", "NotSupportedError", "PlanError",
    "PlansightError", "ResourcesExhausted", "SqlSyntaxError", "WorkerLost", "add_caret",
    "caret_snippet", "did_you_mean", "internal_error",
]
