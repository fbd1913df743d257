"""Argument checks and return types of window functions (DuckDB's, DECIMAL(38, 0) for HUGEINT).

    row_number, rank, dense_rank, ntile, count, count_star     int64
    percent_rank, cume_dist, avg, stddev*, var*                 float64
    sum(int / uint / bool)                                      decimal128(38, 0) (HUGEINT)
    sum(float / double)                                         float64
    sum(decimal(p, s))                                          decimal128(38, s)
    min, max, first_value, last_value, nth_value, lag, lead     the argument type
    bool_and, bool_or                                           bool
    bit_and, bit_or, bit_xor, any_value                         the argument type
    corr, covar_*, regr_* (regr_count: uint32)                  float64
    string_agg                                                  string (large_string stays)
"""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.errors import PlanError, did_you_mean
from plansight.engine.functions import comoments
from plansight.engine.functions.comoments import BIVARIATE
from plansight.engine.functions.window.aggregates import AGGREGATE_FUNCTIONS, VARIANCE_FUNCTIONS
from plansight.engine.functions.window.bivariate import BITWISE
from plansight.engine.functions.window.navigation import NAVIGATION_FUNCTIONS
from plansight.engine.functions.window.ranking import RANKING_FUNCTIONS

WINDOW_FUNCTIONS = RANKING_FUNCTIONS + NAVIGATION_FUNCTIONS + AGGREGATE_FUNCTIONS

# (minimum, maximum) number of arguments
_ARITY = {
    "row_number": (0, 0), "rank": (0, 0), "dense_rank": (0, 0), "percent_rank": (0, 0),
    "cume_dist": (0, 0), "ntile": (1, 1), "lag": (1, 3), "lead": (1, 3),
    "first_value": (1, 1), "last_value": (1, 1), "nth_value": (2, 2), "count_star": (0, 0),
    "count": (1, 1), "sum": (1, 1), "avg": (1, 1), "min": (1, 1), "max": (1, 1),
    "bool_and": (1, 1), "bool_or": (1, 1), "string_agg": (1, 2),
    **{name: (1, 1) for name in VARIANCE_FUNCTIONS},
    **{name: (1, 1) for name in BITWISE + ("any_value",)},
    **{name: (2, 2) for name in BIVARIATE},
}


def window_return_type(func: str, arg_types: list[pa.DataType]) -> pa.DataType:
    """The result type of ``func(arg_types...) OVER (...)``; PlanError for unknown functions,
    a wrong number of arguments or unsupported argument types.

    Example:
        >>> window_return_type("sum", [pa.int32()]), window_return_type("lag", [pa.string()])
        (Decimal128Type(decimal128(38, 0)), DataType(string))
    """
    name = func.lower()
    if name not in _ARITY:
        raise PlanError(f"unknown window function {func!r}." + did_you_mean(name, _ARITY))
    low, high = _ARITY[name]
    if not low <= len(arg_types) <= high:
        expected = str(low) if low == high else f"{low} to {high}"
        raise PlanError(f"{name}() takes {expected} argument(s), got {len(arg_types)}")
    types = [t.value_type if pa.types.is_dictionary(t) else t for t in arg_types]
    if name in ("row_number", "rank", "dense_rank", "count", "count_star"):
        return pa.int64()
    if name == "ntile":
        _require_integer(name, types[0], "bucket count")
        return pa.int64()
    if name in ("percent_rank", "cume_dist"):
        return pa.float64()
    if name in ("lag", "lead"):
        if len(types) > 1:
            _require_integer(name, types[1], "offset")
        return types[0]
    if name == "nth_value":
        _require_integer(name, types[1], "n")
        return types[0]
    if name in ("first_value", "last_value", "any_value"):
        return types[0]
    if name in BIVARIATE:
        for arg in types:
            if not (pa.types.is_integer(arg) or pa.types.is_floating(arg)
                    or pa.types.is_decimal(arg) or pa.types.is_null(arg)):
                raise PlanError(f"{name}() needs numeric arguments, got {arg}")
        return comoments.return_type(name)
    arg = types[0]
    if name in BITWISE:
        if not (pa.types.is_integer(arg) or pa.types.is_null(arg)):
            raise PlanError(f"{name}() needs an integer argument, got {arg}")
        return arg
    if name in ("min", "max"):
        if _is_nested(arg):
            raise PlanError(f"{name}() does not support arguments of type {arg}")
        return arg
    if name in ("bool_and", "bool_or"):
        if not (pa.types.is_boolean(arg) or pa.types.is_null(arg)):
            raise PlanError(f"{name}() needs a BOOLEAN argument, got {arg}")
        return pa.bool_()
    if name == "string_agg":
        if _is_nested(arg):
            raise PlanError(f"string_agg() does not support arguments of type {arg}")
        if len(types) > 1 and not (pa.types.is_string(types[1]) or pa.types.is_large_string(
                types[1]) or pa.types.is_null(types[1])):
            raise PlanError(f"string_agg() separator must be a string, got {types[1]}")
        return pa.large_string() if pa.types.is_large_string(arg) else pa.string()
    numeric = (pa.types.is_integer(arg) or pa.types.is_floating(arg)
               or pa.types.is_decimal(arg) or pa.types.is_null(arg))
    if name == "sum":
        if pa.types.is_decimal(arg):
            return pa.decimal128(38, arg.scale)
        if pa.types.is_floating(arg):
            return pa.float64()
        if numeric or pa.types.is_boolean(arg):
            return pa.decimal128(38, 0)  # DuckDB's HUGEINT: exact past BIGINT
        raise PlanError(f"sum() needs a numeric argument, got {arg}")
    if name == "avg" or name in VARIANCE_FUNCTIONS:
        if not numeric:
            raise PlanError(f"{name}() needs a numeric argument, got {arg}")
        return pa.float64()
    raise PlanError(f"unknown window function {func!r}")  # pragma: no cover


def _require_integer(name: str, typ: pa.DataType, what: str) -> None:
    if not (pa.types.is_integer(typ) or pa.types.is_null(typ)):
        raise PlanError(f"{name}() {what} must be an integer, got {typ}")


def _is_nested(typ: pa.DataType) -> bool:
    return pa.types.is_nested(typ) or pa.types.is_union(typ) or pa.types.is_map(typ)
