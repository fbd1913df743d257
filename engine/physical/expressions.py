"""Evaluate bound expressions over a RecordBatch, column at a time, in Arrow kernels."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import InternalError
from plansight.engine.functions.scalar import evaluate_call, evaluate_cast
from plansight.engine.logical.expr import Call, Cast, Column, Expr, Literal


def evaluate(expr: Expr, batch: pa.RecordBatch | pa.Table) -> pa.Array:
    """The value of ``expr`` for every row of ``batch`` (always an array of batch length)."""
    value = _evaluate(expr, batch)
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, batch.num_rows) if value.is_valid else \
            pa.nulls(batch.num_rows, value.type)
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks() if value.num_chunks != 1 else value.chunk(0)
    return value


def evaluate_predicate(expr: Expr, batch: pa.RecordBatch | pa.Table) -> pa.Array:
    """A boolean mask where NULL counts as false (SQL WHERE semantics)."""
    mask = evaluate(expr, batch)
    return pc.fill_null(mask, False) if mask.null_count else mask


def _evaluate(expr: Expr, batch) -> pa.Array | pa.Scalar:
    if isinstance(expr, Column):
        index = batch.schema.get_field_index(expr.field_name)
        if index < 0:
            raise InternalError(f"column {expr.field_name} not in batch {batch.schema.names}")
        return batch.column(index)
    if isinstance(expr, Literal):
        return _scalar(expr)
    if isinstance(expr, Cast):
        return evaluate_cast(_evaluate(expr.expr, batch), expr.type, expr.safe)
    if isinstance(expr, Call):
        if expr.func == "case" and len(expr.args) > 1:
            return _evaluate_case(expr, batch)
        if expr.func == "coalesce" and len(expr.args) > 1:
            return _evaluate_coalesce(expr, batch)
        args = [_evaluate(arg, batch) for arg in expr.args]
        return evaluate_call(expr, args)
    raise InternalError(f"cannot evaluate {type(expr).__name__} {expr} in a physical plan")


_SCALARS: dict[tuple, pa.Scalar] = {}
_MAX_SCALARS = 4096


def _scalar(literal: Literal) -> pa.Scalar:
    """The literal as an Arrow scalar, made once rather than per batch (~25-50 µs each, for
    every literal of every batch). Keyed by the value's repr: 0.0 and -0.0, or 1 and True,
    are equal keys of a dict but different literals."""
    value = literal.value
    key = (literal.type, type(value), repr(value))
    scalar = _SCALARS.get(key)
    if scalar is None:
        scalar = pa.scalar(value, literal.type)
        if len(_SCALARS) >= _MAX_SCALARS:
            _SCALARS.clear()
        _SCALARS[key] = scalar
    return scalar


def _evaluate_case(expr: Call, batch) -> pa.Array:
    """CASE WHEN c1 THEN v1 ... ELSE e END, each branch evaluated only on its own rows.

    SQL evaluates a branch only for the rows that reach it, so ``CASE WHEN d <> 0 THEN n // d
    END`` never divides by zero. Rows are routed with integer indices; the pieces are put back
    in row order with one take. The loop is over branches, never rows.
    """
    *pairs, otherwise = expr.args
    remaining = np.arange(batch.num_rows)
    positions, pieces = [], []

    def value_on(value_expr, rows):
        sub = batch if len(rows) == batch.num_rows else batch.take(pa.array(rows))
        out = evaluate(value_expr, sub)
        return out if out.type == expr.type else evaluate_cast(out, expr.type, False)

    for condition, value in zip(pairs[0::2], pairs[1::2]):
        if not len(remaining):
            break
        sub = batch if len(remaining) == batch.num_rows else batch.take(pa.array(remaining))
        taken = np.asarray(evaluate_predicate(condition, sub).to_numpy(zero_copy_only=False),
                           dtype=bool)
        if taken.any():
            rows = remaining[taken]
            positions.append(rows)
            pieces.append(value_on(value, rows))
            remaining = remaining[~taken]
    if len(remaining):
        positions.append(remaining)
        pieces.append(value_on(otherwise, remaining))
    if len(pieces) == 1 and len(positions[0]) == batch.num_rows:
        return pieces[0]
    if not pieces:
        return pa.nulls(batch.num_rows, expr.type)
    order = np.argsort(np.concatenate(positions), kind="stable")
    return pa.concat_arrays(pieces).take(pa.array(order))



def _evaluate_coalesce(expr: Call, batch) -> pa.Array:
    """COALESCE(a, b, ...), each argument evaluated only on the rows still NULL: like CASE,
    an argument after a non-NULL one is never computed (COALESCE(x, 1 // 0) does not fail
    for a non-NULL x)."""
    result = evaluate(expr.args[0], batch)
    for arg in expr.args[1:]:
        if not result.null_count:
            break
        missing = np.flatnonzero(np.asarray(
            result.is_null().to_numpy(zero_copy_only=False), dtype=bool))
        if len(missing) == batch.num_rows:
            result = evaluate(arg, batch)
            continue
        value = evaluate(arg, batch.take(pa.array(missing)))
        if value.type != result.type:
            value = evaluate_cast(value, result.type, False)
        index = np.arange(batch.num_rows)
        index[missing] = batch.num_rows + np.arange(len(missing))
        result = pa.concat_arrays([result, value]).take(pa.array(index))
    return result
