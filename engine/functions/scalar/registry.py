"""The scalar function catalogue: SQL name -> binder, call name -> kernel.

A *binder* types a call the way DuckDB does: it receives the bound argument expressions and
the session options and returns a typed expression, usually ``Call(func, args, type)`` with
implicit casts already inserted as ``Cast`` nodes, sometimes a rewrite (``ifnull`` ->
``coalesce``, ``between`` -> ``and(gte, lte)``). A *kernel* evaluates a ``Call`` whose
arguments are Arrow arrays of one length or scalars (constants).

Modules register both with the decorators below; ``engine.functions.scalar`` imports every
module so the tables are complete.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from plansight.engine.errors import NotSupportedError, PlanError, did_you_mean
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import can_cast, cast_expr
from plansight.engine.logical.expr import Call, Expr, Literal

Binder = Callable[[list[Expr], Mapping[str, Any]], Expr]
Kernel = Callable[[list[Any], Call], Any]

BINDERS: dict[str, Binder] = {}
OPERATORS: dict[str, Binder] = {}  # operators and internal calls: not callable by name in SQL
KERNELS: dict[str, Kernel] = {}
# SQL functions DuckDB has that are recognised but not implemented (NotSupportedError)
NOT_SUPPORTED: set[str] = {
    "list_value", "array_agg", "struct_pack", "unnest", "json_extract", "regexp_extract_all",
    "string_split", "str_split", "array_length", "generate_series", "range",
    "to_json", "uuid", "gen_random_uuid", "levenshtein", "jaro_winkler_similarity",
    "sha256", "sha1", "md5", "md5_number", "age", "timezone", "make_timestamp", "make_time",
    "to_date",
}


def binder(*names: str) -> Callable[[Binder], Binder]:
    """Register a binder under SQL function ``names`` (the first is canonical)."""
    def register(fn: Binder) -> Binder:
        for name in names:
            BINDERS[name] = fn
        return fn
    return register


def operator(*names: str) -> Callable[[Binder], Binder]:
    """Register a binder for operator call names (``add``, ``eq``, ``like``, ...)."""
    def register(fn: Binder) -> Binder:
        for name in names:
            OPERATORS[name] = fn
        return fn
    return register


def resolve_operator(name: str, args: Sequence[Expr], options: Mapping[str, Any]) -> Expr:
    """Type operator ``name`` (a canonical call name such as ``add`` or ``like``)."""
    fn = OPERATORS.get(name) or BINDERS.get(name)
    if fn is None:
        raise NotSupportedError(f"operator '{name}' is not supported yet")
    return fn(list(args), options)


def kernel(*funcs: str) -> Callable[[Kernel], Kernel]:
    """Register a kernel for ``Call.func`` values ``funcs``."""
    def register(fn: Kernel) -> Kernel:
        for func in funcs:
            KERNELS[func] = fn
        return fn
    return register


def resolve_function(name: str, args: Sequence[Expr], options: Mapping[str, Any]) -> Expr:
    """Type a call of SQL function ``name`` (case-insensitive) on bound ``args``.

    Example:
        >>> resolve_function("lower", [Literal("A", pa.string())], {})
        Call(func='lower', args=(Literal(value='A', type=DataType(string)),), type=DataType(string))
    """
    key = name.lower()
    fn = BINDERS.get(key)
    if fn is None:
        if key in NOT_SUPPORTED:
            raise NotSupportedError(f"function '{key}' is not supported yet")
        raise PlanError(f"unknown function '{name}'." + did_you_mean(key, BINDERS))
    return fn(list(args), options)


# ----------------------------------------------------------------------------- typing helpers

def signature_error(name: str, args: Sequence[Expr], expected: str = "") -> PlanError:
    types = ", ".join(T.type_name(a.type) for a in args)
    hint = f"; expected {expected}" if expected else ""
    return PlanError(f"no function matches '{name}({types})'{hint}; "
                     f"an explicit CAST may be needed")


def operator_error(symbol: str, args: Sequence[Expr]) -> PlanError:
    types = " and ".join(T.type_name(a.type) for a in args)
    return PlanError(f"cannot apply '{symbol}' to {types}")


def implicit_ok(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether a non-literal of ``source`` converts to ``target`` without an explicit CAST."""
    if source == target or T.is_null_type(source):
        return True
    if T.is_string(source) and T.is_string(target):
        return True
    if T.is_numeric(target) and (T.is_numeric(source) or T.is_boolean(source)):
        return True
    if T.is_timestamp(target) and (T.is_date(source) or T.is_timestamp(source)):
        return True
    if T.is_interval(target) and T.is_duration(source):
        return True
    if pa.types.is_dictionary(source):
        return implicit_ok(source.value_type, target)
    return False


def coerce(expr: Expr, target: pa.DataType, name: str, args: Sequence[Expr],
           expected: str = "") -> Expr:
    """``expr`` implicitly converted to ``target`` for function ``name`` (PlanError if SQL
    would need an explicit CAST). String literals convert to anything they parse as."""
    if expr.type == target:
        return expr
    untyped = isinstance(expr, Literal) and (expr.value is None or T.is_string(expr.type))
    if untyped and can_cast(expr.type, target):
        return cast_expr(expr, target)
    if (isinstance(expr, Literal) and T.is_integer(expr.type) and T.is_integer(target)
            and T.literal_fits(expr.value, target)):
        return Literal(expr.value, target)
    if not implicit_ok(expr.type, target):
        raise signature_error(name, args, expected or T.type_name(target))
    return cast_expr(expr, target)


def call(func: str, args: Sequence[Expr], type: pa.DataType) -> Call:
    return Call(func, tuple(args), type)


def fixed(func: str, params: Sequence[pa.DataType], result: pa.DataType,
          min_args: int | None = None) -> Binder:
    """A binder for a fixed signature: arguments coerced to ``params``."""
    low = len(params) if min_args is None else min_args

    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        if not low <= len(args) <= len(params):
            count = str(len(params)) if low == len(params) else f"{low} to {len(params)}"
            raise PlanError(f"function '{func}' takes {count} arguments, got {len(args)}")
        typed = [coerce(a, p, func, args) for a, p in zip(args, params)]
        return call(func, typed, result)
    return bind


def register_fixed(func: str, params: Sequence[pa.DataType], result: pa.DataType,
                   *aliases: str, min_args: int | None = None) -> None:
    binder(func, *aliases)(fixed(func, params, result, min_args))


def expect_arity(name: str, args: Sequence[Expr], low: int, high: int | None = None) -> None:
    high = low if high is None else high
    if not low <= len(args) <= high:
        count = str(low) if low == high else (f"at least {low}" if high > 99
                                              else f"{low} to {high}")
        raise PlanError(f"function '{name}' takes {count} arguments, got {len(args)}")
