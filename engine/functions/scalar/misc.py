"""Miscellaneous functions: typeof, if/iif, hash; the internal single-row check of scalar
subqueries and the BIGINT check of an integer SUM's exact total.

``typeof`` is decided while binding (the type is known then) and becomes a constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import ExecutionError, NotSupportedError
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.conditional import bind_case
from plansight.engine.functions.scalar.registry import binder, call, expect_arity, kernel
from plansight.engine.functions.scalar.utf8 import _parts as utf8_parts
from plansight.engine.functions.scalar.vector import (
    Value,
    broadcast,
    finish,
    from_numpy,
)
from plansight.engine.kernels.nested_keys import canonical_bytes
from plansight.engine.kernels.order_keys import order_bytes
from plansight.engine.logical.expr import Call, Expr, Literal


@binder("typeof")
def bind_typeof(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("typeof", args, 1)
    return Literal(T.type_name(args[0].type), pa.string())


@binder("if", "iif")
def bind_if(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("if", args, 3)
    return bind_case([args[0]], [args[1]], args[2])


@binder("hash")
def bind_hash(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    """A 64-bit hash of one or more values (not DuckDB's hash values: only equality of
    hashes of equal inputs is meaningful)."""
    if not args:
        raise NotSupportedError("hash() needs at least one argument")
    return call("hash", args, pa.uint64())


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (vectorized)."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


_PRIME = np.uint64(0x100000001B3)


def _string_words(array: pa.Array) -> np.ndarray:
    """Polynomial hash of each row's UTF-8 bytes, mod 2**64, without a loop over rows:
    byte i of a row of length L weighs PRIME**(L-1-i); row sums come from one cumulative sum.
    """
    offsets, data = utf8_parts(array)
    n_bytes = len(data)
    lengths = np.diff(offsets)
    powers = np.ones(max(int(lengths.max(initial=0)), 1), dtype=np.uint64)
    with np.errstate(over="ignore"):
        if len(powers) > 1:
            powers[1:] = np.cumprod(np.full(len(powers) - 1, _PRIME, dtype=np.uint64),
                                    dtype=np.uint64)
        rows = np.repeat(np.arange(len(lengths)), lengths)
        from_end = offsets[1:][rows] - np.arange(n_bytes) - 1
        terms = (data.astype(np.uint64) + np.uint64(1)) * powers[from_end]
        sums = np.concatenate([[np.uint64(0)], np.cumsum(terms, dtype=np.uint64)])
        return (sums[offsets[1:]] - sums[offsets[:-1]]) ^ lengths.astype(np.uint64)


def _value_words(array: pa.Array) -> np.ndarray:
    """One uint64 per row, equal for equal values (in every batch)."""
    t = array.type
    if pa.types.is_dictionary(t):
        array, t = array.cast(t.value_type), t.value_type
    if T.is_string(t):
        return _string_words(array.cast(pa.string()))
    if pa.types.is_binary(t) or T.is_interval(t) or T.is_duration(t) or pa.types.is_time(t):
        return _string_words(array.cast(pa.string()) if not pa.types.is_binary(t)
                             else array.cast(pa.string(), safe=False))
    if T.is_float(t) or T.is_decimal(t):
        values = pc.fill_null(array.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False)
        return (values + 0.0).view(np.uint64)  # + 0.0 folds -0.0 into 0.0
    if T.is_boolean(t):
        return pc.fill_null(array, False).to_numpy(zero_copy_only=False).astype(np.uint64)
    if T.is_date(t):
        array = array.cast(pa.int32())
    elif T.is_timestamp(t):
        array = array.cast(pa.int64())
    ints = pc.fill_null(array.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    return ints.astype(np.int64).view(np.uint64)


@kernel("hash")
def hash_kernel(args: list[Value], call_: Call) -> Value:
    arrays, all_scalar = broadcast(args)
    state = np.zeros(len(arrays[0]), dtype=np.uint64)
    for array in arrays:
        words = _value_words(array)
        nulls = np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        words = np.where(nulls, np.uint64(0x9E3779B97F4A7C15), words)
        state = _mix(state ^ _mix(words))
    return finish(from_numpy(state, None, pa.uint64()), all_scalar)


@kernel("single_row_value")
def single_row_value_kernel(args: list[Value], call_: Call) -> Value:
    """``single_row_value(rows, value)``: a scalar subquery's value (decorrelation counts the
    subquery's rows per outer row); more than one row is an error, as in DuckDB."""
    rows, value = args
    many = pc.greater(rows, 1)
    if pc.any(many).as_py() if isinstance(many, (pa.Array, pa.ChunkedArray)) else many.as_py():
        raise ExecutionError("More than one row returned by a subquery used as an expression: "
                             "a scalar subquery must return at most one row (add LIMIT 1 or "
                             "an aggregate)")
    return value


@kernel("nested_key")
def nested_key_kernel(args: list[Value], call_: Call) -> Value:
    """The canonical bytes of a struct / list / map value (kernels/nested_keys.py): what
    GROUP BY, DISTINCT, joins and comparisons key nested values by."""
    (values,), all_scalar = broadcast(args)
    return finish(canonical_bytes(values), all_scalar)


@kernel("nested_order_key")
def nested_order_key_kernel(args: list[Value], call_: Call) -> Value:
    """The order-preserving bytes of a struct / list / map value (kernels/order_keys.py):
    what ORDER BY and ``<`` sort and compare nested values by."""
    (values,), all_scalar = broadcast(args)
    return finish(order_bytes(values), all_scalar)
