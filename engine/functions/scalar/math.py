"""Numeric functions: abs, round, floor, ceil, trunc, sqrt, cbrt, power, exp, ln, log, log10,
log2, sign, mod, pi, random, trigonometry, degrees/radians, isnan/isinf/isfinite, gcd/lcm.

Result types follow DuckDB: abs/sign keep integer types (sign is TINYINT), round/floor/ceil
keep DECIMAL (with the scale they round to), transcendental functions return DOUBLE; domain
errors give NaN or ±inf rather than an error (``sqrt(-1)`` is NaN, ``ln(0)`` is -inf).
"""

from __future__ import annotations

import math as pymath
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import ExecutionError
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import cast_expr
from plansight.engine.functions.scalar.registry import (
    binder,
    call,
    coerce,
    expect_arity,
    kernel,
    resolve_operator,
    signature_error,
)
from plansight.engine.functions.scalar.vector import (
    Value,
    broadcast,
    finish,
    from_numpy,
    is_scalar,
    to_numpy,
)
from plansight.engine.logical.expr import Call, Expr, Literal


def _numeric(name: str, args: list[Expr], arg: Expr) -> Expr:
    if T.is_null_type(arg.type):
        # only an untyped NULL is a DOUBLE: CAST(NULL AS DECIMAL(10, 2)) (a typed NULL
        # literal once folded) keeps its type, so ceil() of it is DECIMAL(10, 0) as DuckDB;
        # a column of NULL type (min(NULL), SELECT NULL AS x) converts as the literal does
        return Literal(None, pa.float64()) if isinstance(arg, Literal) else \
            cast_expr(arg, pa.float64())
    if T.is_string_literal(arg):
        return cast_expr(arg, pa.float64())
    if not (T.is_numeric(arg.type) or T.is_boolean(arg.type)):
        raise signature_error(name, args, "a number")
    return arg


def _double(name: str, args: list[Expr]) -> list[Expr]:
    return [coerce(_numeric(name, args, a), pa.float64(), name, args, "a number") for a in args]


# ----------------------------------------------------------------------------- DOUBLE functions

_UNARY_DOUBLE = {
    "sqrt": pc.sqrt, "exp": pc.exp, "ln": pc.ln, "log10": pc.log10, "log2": pc.log2,
    "sin": pc.sin, "cos": pc.cos, "tan": pc.tan, "asin": pc.asin, "acos": pc.acos,
    "atan": pc.atan, "sinh": pc.sinh, "cosh": pc.cosh, "tanh": pc.tanh,
}


def _unary_double_binder(name: str):
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        expect_arity(name, args, 1)
        return call(name, _double(name, args), pa.float64())
    return bind


for _name in (*_UNARY_DOUBLE, "cbrt", "degrees", "radians", "cot"):
    binder(_name)(_unary_double_binder(_name))


def _quiet(fn, *args):
    """Run a float kernel with IEEE results (NaN / inf) for domain errors, like DuckDB."""
    with np.errstate(all="ignore"):
        return fn(*args)


@kernel(*_UNARY_DOUBLE)
def unary_double_kernel(args: list[Value], call_: Call) -> Value:
    # the unchecked Arrow kernels give NaN / -inf on domain errors, as DuckDB does
    return _UNARY_DOUBLE[call_.func](args[0])


@kernel("cbrt", "degrees", "radians", "cot")
def numpy_double_kernel(args: list[Value], call_: Call) -> Value:
    (array,), all_scalar = broadcast(args)
    values = to_numpy(array).astype(np.float64)
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    fn = {"cbrt": np.cbrt, "degrees": np.degrees, "radians": np.radians,
          "cot": lambda v: 1.0 / np.tan(v)}[call_.func]
    return finish(from_numpy(_quiet(fn, values), valid, pa.float64()), all_scalar)


@binder("power", "pow")
def bind_power(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("power", args, 2)
    return call("power", _double("power", args), pa.float64())


@kernel("power")
def power_kernel(args: list[Value], call_: Call) -> Value:
    return pc.power(*args)


@binder("atan2")
def bind_atan2(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("atan2", args, 2)
    return call("atan2", _double("atan2", args), pa.float64())


@kernel("atan2")
def atan2_kernel(args: list[Value], call_: Call) -> Value:
    return pc.atan2(*args)


@binder("log")
def bind_log(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    """``log(x)`` is log10 in DuckDB; ``log(b, x)`` is the base-b logarithm."""
    expect_arity("log", args, 1, 2)
    typed = _double("log", args)
    if len(typed) == 1:
        return call("log10", typed, pa.float64())
    return call("log", typed, pa.float64())


@kernel("log")
def log_kernel(args: list[Value], call_: Call) -> Value:
    base, x = args
    return pc.divide(pc.ln(x), pc.ln(base))


@binder("pi")
def bind_pi(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("pi", args, 0)
    return Literal(pymath.pi, pa.float64())


@binder("random")
def bind_random(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("random", args, 0)
    return call("random", [], pa.float64())


@kernel("random")
def random_kernel(args: list[Value], call_: Call, num_rows: int | None = None) -> Value:
    """A scalar unless the evaluator passes ``num_rows`` (then one value per row)."""
    rng = np.random.default_rng()
    if num_rows is None:
        return pa.scalar(rng.random(), pa.float64())
    return pa.array(rng.random(num_rows), pa.float64())


for _name in ("isnan", "isinf", "isfinite"):
    def _bind_test(args: list[Expr], options: Mapping[str, Any], _name: str = _name) -> Expr:
        expect_arity(_name, args, 1)
        return call(_name, _double(_name, args), pa.bool_())
    binder(_name, _name[:2] + "_" + _name[2:])(_bind_test)  # sqlglot spells is_nan


@kernel("isnan", "isinf", "isfinite")
def float_test_kernel(args: list[Value], call_: Call) -> Value:
    fn = {"isnan": pc.is_nan, "isinf": pc.is_inf, "isfinite": pc.is_finite}[call_.func]
    return fn(args[0])


# ----------------------------------------------------------------------------- type-keeping

@binder("abs")
def bind_abs(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("abs", args, 1)
    x = _numeric("abs", args, args[0])
    return call("abs", [x], x.type)


@kernel("abs")
def abs_kernel(args: list[Value], call_: Call) -> Value:
    try:
        return pc.abs_checked(args[0])
    except pa.ArrowInvalid as e:
        raise ExecutionError(f"Overflow in abs of {T.type_name(call_.type)}") from e


@binder("sign")
def bind_sign(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("sign", args, 1)
    x = _numeric("sign", args, args[0])
    if T.is_decimal(x.type):
        x = cast_expr(x, pa.float64())
    return call("sign", [x], pa.int8())


@kernel("sign")
def sign_kernel(args: list[Value], call_: Call) -> Value:
    x = args[0]
    result = pc.sign(x)
    if T.is_float(x.type):  # DuckDB: sign(NaN) = 0, sign(-0.0) = 0
        result = pc.if_else(pc.is_nan(x), pa.scalar(0.0, result.type), result)
    return pc.cast(result, pa.int8())


def _rounding_binder(name: str):
    """floor/ceil/trunc: DECIMAL(p, s) -> DECIMAL(p, 0), integers and floats -> DOUBLE
    (DuckDB casts integers to DOUBLE for floor/ceil, keeps them for trunc)."""
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        expect_arity(name, args, 1, 2)
        if len(args) == 2:
            return _bind_round(name, args)
        x = _numeric(name, args, args[0])
        if T.is_decimal(x.type):
            return call(name, [x], pa.decimal128(x.type.precision, 0))
        if T.is_integer(x.type) and name == "trunc":
            return x
        if not T.is_float(x.type):
            x = cast_expr(x, pa.float64())
        return call(name, [x], x.type)
    return bind


binder("floor")(_rounding_binder("floor"))
binder("ceil", "ceiling")(_rounding_binder("ceil"))
binder("trunc")(_rounding_binder("trunc"))


@kernel("floor", "ceil", "trunc")
def rounding_kernel(args: list[Value], call_: Call) -> Value:
    fn = {"floor": pc.floor, "ceil": pc.ceil, "trunc": pc.trunc}[call_.func]
    if len(args) == 2:
        return _round_to(args, call_, {"floor": "down", "ceil": "up",
                                       "trunc": "towards_zero"}[call_.func])
    x = args[0]
    if T.is_decimal(x.type):  # ceil(0.5::DECIMAL(1, 1)) = 1 needs one more integer digit
        x = pc.cast(x, T.rounding_room(x.type, 0))
    result = fn(x)
    return pc.cast(result, call_.type, safe=False) if result.type != call_.type else result


def _bind_round(name: str, args: list[Expr]) -> Expr:
    x = _numeric(name, args, args[0])
    digits = coerce(args[1], pa.int32(), name, args, "an integer number of digits")
    if T.is_decimal(x.type):
        if not isinstance(digits, Literal):  # a per-row digit count: round in DOUBLE
            return call(name, [cast_expr(x, pa.float64()), digits], pa.float64())
        n = digits.value if digits.value is not None else 0
        scale = max(0, min(n, x.type.scale))
        return call(name, [x, digits], pa.decimal128(x.type.precision, scale))
    if T.is_integer(x.type):
        return call(name, [x, digits], x.type)
    if not T.is_float(x.type):
        x = cast_expr(x, pa.float64())
    return call(name, [x, digits], x.type)


@binder("round")
def bind_round(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("round", args, 1, 2)
    if len(args) == 1:
        args = [args[0], Literal(0, pa.int32())]
    return _bind_round("round", args)


@kernel("round")
def round_kernel(args: list[Value], call_: Call) -> Value:
    return _round_to(args, call_, "half_towards_infinity")


def _round_to(args: list[Value], call_: Call, mode: str) -> Value:
    x, digits = args
    if is_scalar(digits):
        n = digits.as_py()
        if n is None:
            return pa.scalar(None, call_.type) if is_scalar(x) else pa.nulls(len(x), call_.type)
        if T.is_integer(x.type):
            if n >= 0:
                return x
            rounded = pc.round(pc.cast(x, pa.float64()), n, round_mode=mode)
            return pc.cast(rounded, call_.type)
        if T.is_decimal(x.type):
            x = pc.cast(x, T.rounding_room(x.type, n))
        rounded = pc.round(x, n, round_mode=mode)
        return pc.cast(rounded, call_.type, safe=False) if rounded.type != call_.type \
            else rounded
    # a digit count per row: group rows by digit count (few distinct values)
    (values, counts), all_scalar = broadcast([x, digits])
    n_values = to_numpy(counts).astype(np.int64)
    valid = np.asarray(pc.and_(values.is_valid(), counts.is_valid())
                       .to_numpy(zero_copy_only=False), dtype=bool)
    result = pa.nulls(len(values), call_.type)
    for n in np.unique(n_values[valid]):
        mask = pa.array(valid & (n_values == n))
        part = _round_to([values, pa.scalar(int(n), pa.int32())], call_, mode)
        result = pc.if_else(mask, part, result)
    return finish(result, all_scalar)


# ----------------------------------------------------------------------------- integers

@binder("mod")
def bind_mod(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("mod", args, 2)
    return resolve_operator("modulo", args, options)


for _name in ("gcd", "lcm"):
    def _bind_int2(args: list[Expr], options: Mapping[str, Any], _name: str = _name) -> Expr:
        expect_arity(_name, args, 2)
        typed = [coerce(a, pa.int64(), _name, args, "an integer") for a in args]
        if not all(T.is_integer(a.type) for a in typed):
            raise signature_error(_name, args, "integers")
        return call(_name, typed, pa.int64())
    binder(_name)(_bind_int2)


@kernel("gcd", "lcm")
def gcd_kernel(args: list[Value], call_: Call) -> Value:
    (a, b), all_scalar = broadcast(args)
    x, y = to_numpy(a).astype(np.int64), to_numpy(b).astype(np.int64)
    valid = np.asarray(pc.and_(a.is_valid(), b.is_valid()).to_numpy(zero_copy_only=False),
                       dtype=bool)
    out = np.gcd(x, y) if call_.func == "gcd" else np.lcm(x, y)
    return finish(from_numpy(out, valid, pa.int64()), all_scalar)

