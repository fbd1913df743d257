"""Boolean logic (three-valued AND / OR / NOT) and conditional expressions: CASE, COALESCE,
NULLIF, IFNULL, GREATEST, LEAST.

``case`` calls are flat: ``case(cond1, val1, cond2, val2, ..., else)``, with the ELSE always
present (a typed NULL when the SQL has none). A NULL condition counts as false.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import PlanError
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import can_cast, cast_expr
from plansight.engine.functions.scalar.comparison import comparison_kernel, unify_operands
from plansight.engine.functions.scalar.registry import (
    binder,
    call,
    expect_arity,
    kernel,
    operator,
    operator_error,
)
from plansight.engine.functions.scalar.vector import Value, broadcast, finish
from plansight.engine.logical.expr import Call, Expr, Literal


def as_condition(expr: Expr, context: str) -> Expr:
    """``expr`` as a BOOLEAN (DuckDB also accepts numbers and 'true'/'false' literals)."""
    if T.is_boolean(expr.type):
        return expr
    if T.is_null_type(expr.type):
        return Literal(None, pa.bool_())
    if T.is_numeric(expr.type) or T.is_string_literal(expr):
        return cast_expr(expr, pa.bool_())
    raise PlanError(f"{context} needs a BOOLEAN, got {T.type_name(expr.type)}")


# ----------------------------------------------------------------------------- AND OR NOT

def _logic_binder(func: str):
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        try:
            typed = [as_condition(a, func.upper()) for a in args]
        except PlanError as e:
            raise operator_error(func.upper(), args) from e
        return call(func, typed, pa.bool_())
    return bind


operator("and")(_logic_binder("and"))
operator("or")(_logic_binder("or"))
operator("not")(_logic_binder("not"))


@kernel("and")
def and_kernel(args: list[Value], call_: Call) -> Value:
    return reduce(pc.and_kleene, args)


@kernel("or")
def or_kernel(args: list[Value], call_: Call) -> Value:
    return reduce(pc.or_kleene, args)


@kernel("not")
def not_kernel(args: list[Value], call_: Call) -> Value:
    return pc.invert(args[0])


# ----------------------------------------------------------------------------- CASE

def bind_case(conditions: list[Expr], values: list[Expr], default: Expr | None) -> Expr:
    """A typed ``case`` call from searched-CASE parts (the SQL binder builds ``eq`` conditions
    for a simple CASE)."""
    conditions = [as_condition(c, "CASE WHEN") for c in conditions]
    branches = values + ([default] if default is not None else [])
    if all(T.is_null_type(b.type) for b in branches):  # only NULLs: the NULL type (DuckDB)
        return Literal(None, pa.null())
    typed, target = T.unify(branches, "CASE", cast=cast_expr)
    if T.is_null_type(target):
        target = pa.int32()
        typed = [Literal(None, target) for _ in typed]
    if default is None:
        typed.append(Literal(None, target))
    args: list[Expr] = []
    for cond, value in zip(conditions, typed):
        args += [cond, value]
    args.append(typed[-1])
    return call("case", args, target)


@operator("case")
def bind_case_call(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    if len(args) % 2 == 0:
        raise PlanError("case(cond1, value1, ..., else) takes an odd number of arguments")
    return bind_case(list(args[0:-1:2]), list(args[1:-1:2]), args[-1])


@kernel("case")
def case_kernel(args: list[Value], call_: Call) -> Value:
    arrays, all_scalar = broadcast(args)
    conditions, values = arrays[0:-1:2], arrays[1:-1:2] + [arrays[-1]]
    if not conditions:
        return finish(values[0], all_scalar)
    names = [f"c{i}" for i in range(len(conditions))]
    struct = pa.StructArray.from_arrays(conditions, names=names)
    result = pc.case_when(struct, *values)
    return finish(result, all_scalar)


# ----------------------------------------------------------------------------- COALESCE & co

@binder("coalesce", "ifnull")
def bind_coalesce(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    if not args:
        raise PlanError("coalesce needs at least one argument")
    if all(T.is_null_type(a.type) for a in args):  # only NULLs: the NULL type (DuckDB)
        return Literal(None, pa.null())
    typed, target = T.unify(args, "COALESCE", cast=cast_expr)
    return call("coalesce", typed, target)


@kernel("coalesce")
def coalesce_kernel(args: list[Value], call_: Call) -> Value:
    if len(args) == 1:
        return args[0]
    return pc.coalesce(*args)


@binder("nullif")
def bind_nullif(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("nullif", args, 2)
    a, b = args
    typed, target = unify_operands([a, b], "NULLIF")
    result = call("nullif", typed, target)
    if T.is_null_type(a.type):
        return Literal(None, pa.null())
    return result if a.type == target else cast_expr(result, a.type)


@kernel("nullif")
def nullif_kernel(args: list[Value], call_: Call) -> Value:
    a, b = args
    equal = pc.fill_null(comparison_kernel([a, b], Call("eq", (), pa.bool_())), False)
    return pc.if_else(equal, pa.scalar(None, a.type), a)


def _extreme_binder(func: str):
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        if not args:
            raise PlanError(f"{func} needs at least one argument")
        if all(T.is_null_type(a.type) for a in args):  # only NULLs: the NULL type (DuckDB)
            return Literal(None, pa.null())
        typed, target = T.unify(args, func.upper(), cast=cast_expr)
        if T.is_interval(target) or not (can_cast(target, pa.string())):
            raise PlanError(f"{func} does not support {T.type_name(target)}")
        return call(func, typed, target)
    return bind


binder("greatest")(_extreme_binder("greatest"))
binder("least")(_extreme_binder("least"))


@kernel("greatest", "least")
def extreme_kernel(args: list[Value], call_: Call) -> Value:
    fn = pc.max_element_wise if call_.func == "greatest" else pc.min_element_wise
    if len(args) == 1:
        return args[0]
    if T.is_boolean(call_.type):
        ints = [pc.cast(a, pa.int8()) for a in args]
        return pc.cast(fn(*ints, skip_nulls=True), pa.bool_())
    arrays, all_scalar = broadcast(args)
    result = fn(*arrays, skip_nulls=True)
    if T.is_float(call_.type) and call_.func == "greatest":
        # DuckDB orders NaN above every number; Arrow's max skips NaN
        any_nan = reduce(pc.or_, [pc.fill_null(pc.is_nan(a), False) for a in arrays])
        result = pc.if_else(any_nan, pa.scalar(float("nan"), call_.type), result)
    return finish(result, all_scalar)
