"""String functions: concatenation, case, trimming, padding, slicing, searching, splitting,
replacing and regular expressions, on Arrow's UTF-8 kernels.

Positions and lengths count characters (code points), 1-based, like DuckDB.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import cast_expr
from plansight.engine.functions.scalar.registry import binder, call, kernel, operator
from plansight.engine.functions.scalar.vector import Value
from plansight.engine.logical.expr import Call, Expr, Literal


def _as_text(expr: Expr) -> Expr:
    if T.is_string(expr.type):
        return expr
    if T.is_null_type(expr.type):
        return Literal(None, pa.string())
    return cast_expr(expr, pa.string())


@operator("concat_operator")
def bind_concat_operator(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    """``a || b``: any types, printed as text; NULL if either side is NULL."""
    return call("concat_strict", [_as_text(a) for a in args], pa.string())


@binder("concat")
def bind_concat(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    """``concat(a, b, ...)``: like ``||`` but NULL arguments count as empty strings."""
    if not args:
        return Literal("", pa.string())
    return call("concat", [_as_text(a) for a in args], pa.string())


@kernel("concat_strict", "concat")
def concat_kernel(args: list[Value], call_: Call) -> Value:
    handling = "emit_null" if call_.func == "concat_strict" else "replace"
    if len(args) == 1:
        return pc.fill_null(args[0], "") if handling == "replace" else args[0]
    return pc.binary_join_element_wise(*args, "", null_handling=handling)
