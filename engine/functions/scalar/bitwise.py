"""Bitwise operators on integers, typed and checked like DuckDB.

    a & b, a | b, xor(a, b), a << b, a >> b -> both operands brought to one integer type, as
                                               for +  (SMALLINT & TINYINT is SMALLINT,
                                               UTINYINT & TINYINT BIGINT; a literal that fits
                                               keeps a column's type), NULL & NULL BIGINT
    ~a                                      -> a's type (an untyped NULL: BIGINT)

``<<`` refuses what DuckDB refuses (a negative value or shift, a shift of the type's width or
more, a result that does not fit); ``>>`` shifts arithmetically and a shift outside
[0, width) gives 0. Floats, decimals and booleans are refused at planning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import ExecutionError, NotSupportedError
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import cast_expr
from plansight.engine.functions.scalar.registry import call, kernel, operator, operator_error
from plansight.engine.functions.scalar.vector import broadcast, finish, from_numpy, to_numpy
from plansight.engine.logical.expr import Expr, Literal

SYMBOLS = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "xor", "shift_left": "<<",
           "shift_right": ">>", "bitwise_not": "~"}
_ARROW = {"bitwise_and": pc.bit_wise_and, "bitwise_or": pc.bit_wise_or,
          "bitwise_xor": pc.bit_wise_xor}


def _integer_operand(x: Expr) -> bool:
    return T.is_integer(x.type) or T.is_null_type(x.type) or T.is_string_literal(x)


def _binder(op: str):
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        a, b = args
        if not (_integer_operand(a) and _integer_operand(b)):
            raise operator_error(SYMBOLS[op], [a, b])
        if T.is_null_type(a.type) and T.is_null_type(b.type):
            return Literal(None, pa.int64())
        unified, target = T.unify([a, b], f"operator '{SYMBOLS[op]}'", cast=cast_expr)
        if not T.is_integer(target):
            raise operator_error(SYMBOLS[op], [a, b])
        mixed = _mixed_sign_type(a, b)
        if mixed is not None:
            target = mixed
            unified = [cast_expr(x, target) for x in (a, b)]
        return call(op, unified, target)
    return bind


def _mixed_sign_type(a: Expr, b: Expr) -> pa.DataType | None:
    """T.mixed_sign_operator_type; a signed integer beside a UBIGINT (a HUGEINT in DuckDB)
    is refused rather than typed BIGINT and failing on large values."""
    columns = [x.type for x in (a, b) if T.is_integer(x.type)
               and not (isinstance(x, Literal) and x.value is not None)]
    if pa.uint64() in columns and any(pa.types.is_signed_integer(t) for t in columns):
        raise NotSupportedError("bitwise operators on a signed integer and a UBIGINT (a HUGEINT "
                                "in DuckDB) are not supported yet")
    return T.mixed_sign_operator_type(a, b)


for _op in ("bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"):
    operator(_op)(_binder(_op))


@operator("bitwise_not")
def bind_bitwise_not(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    (a,) = args
    if T.is_null_type(a.type):
        return Literal(None, pa.int64())
    if not T.is_integer(a.type):
        raise operator_error("~", [a])
    return call("bitwise_not", [a], a.type)


@kernel("bitwise_and", "bitwise_or", "bitwise_xor")
def bitwise_kernel(args, call_):
    return _ARROW[call_.func](*args)


@kernel("bitwise_not")
def bitwise_not_kernel(args, call_):
    return pc.bit_wise_not(args[0])


@kernel("shift_left", "shift_right")
def shift_kernel(args, call_):
    """Shifts in numpy over the operand type's own width; errors only for non-NULL rows."""
    typ = call_.type
    (values, shifts), scalar = broadcast(args)
    valid = np.asarray(pc.and_(values.is_valid(), shifts.is_valid())
                       .to_numpy(zero_copy_only=False), dtype=bool)
    x = to_numpy(values).astype(np.dtype(typ.to_pandas_dtype()), copy=False)
    s = to_numpy(shifts).astype(np.int64)
    width = typ.bit_width
    in_range = (s >= 0) & (s < width)
    s_safe = np.where(in_range, s, 0).astype(x.dtype)
    if call_.func == "shift_right":
        out = np.where(in_range, x >> s_safe, 0).astype(x.dtype)
        return finish(from_numpy(out, valid, typ), scalar)
    _check_left_shift(x, s, in_range, s_safe, valid, width)
    out = np.where(valid, x << s_safe, 0).astype(x.dtype)
    return finish(from_numpy(out, valid, typ), scalar)


def _check_left_shift(x: np.ndarray, s: np.ndarray, in_range: np.ndarray, s_safe: np.ndarray,
                      valid: np.ndarray, width: int) -> None:
    def first(bad: np.ndarray) -> int | None:
        hits = np.flatnonzero(bad & valid)
        return int(hits[0]) if len(hits) else None

    i = first(s < 0)
    if i is not None:
        raise ExecutionError(f"Cannot left-shift by negative number {s[i]}")
    i = first(s >= width)
    if i is not None:
        raise ExecutionError(f"Left-shift value {s[i]} is out of range")
    i = first(x < 0)
    if i is not None:
        raise ExecutionError(f"Cannot left-shift negative number {x[i]}")
    largest = np.iinfo(x.dtype).max
    i = first(in_range & ((np.asarray(largest, x.dtype) >> s_safe) < x))
    if i is not None:
        raise ExecutionError(f"Overflow in left shift ({x[i]} << {s[i]})")
