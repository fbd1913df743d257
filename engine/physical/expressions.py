"""Evaluate bound expressions over a RecordBatch, column at a time, in Arrow kernels."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import ExecutionError, InternalError, ResourcesExhausted, WorkerLost
from plansight.engine.functions.scalar import evaluate_call, evaluate_cast
from plansight.engine.logical.expr import Call, Cast, Column, Expr, Literal, split_conjunction


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
    """A boolean mask where NULL counts as false (SQL WHERE semantics).

    A conjunction that raises is evaluated again in its written order: each conjunct on the
    rows the ones before it keep (TRUE; a NULL rejects the row as FALSE does, as in DuckDB's
    filters), and the error stands only if it comes from one of them.
    """
    try:
        mask = evaluate(expr, batch)
    except (ResourcesExhausted, WorkerLost):
        raise
    except ExecutionError:  # overflow, conversion, ...: perhaps on a rejected row
        conjuncts = split_conjunction(expr)
        if len(conjuncts) == 1:
            raise
        return _kept_in_written_order(conjuncts, batch)
    return pc.fill_null(mask, False) if mask.null_count else mask


def _kept_in_written_order(conjuncts: list[Expr], batch) -> pa.Array:
    kept = np.zeros(batch.num_rows, dtype=bool)
    positions = pa.array(np.arange(batch.num_rows, dtype=np.int64))
    for conjunct in conjuncts:
        mask = evaluate_predicate(conjunct, batch)
        batch, positions = batch.filter(mask), positions.filter(mask)
        if not len(positions):
            break
    kept[positions.to_numpy()] = True
    return pa.array(kept)


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
        if expr.func in ("and", "or") and len(expr.args) == 2:
            return _evaluate_logic(expr, batch)
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



def _evaluate_logic(expr: Call, batch) -> pa.Array | pa.Scalar:
    """``a AND b`` / ``a OR b``, ``b`` counting only on the rows ``a`` does not decide (FALSE
    for AND, TRUE for OR), as DuckDB evaluates them: ``x < 3 AND CAST(x AS INTEGER) *
    1000000000 > 0`` does not overflow on x = 3. Both sides run over the whole batch (one
    vectorized pass); only when ``b`` raises is it evaluated again on the undecided rows, and
    the error stands if it comes from one of them. A conjunction is left-deep, so each
    conjunct counts on the rows all the ones written before it keep."""
    left = _evaluate(expr.args[0], batch)
    try:
        right = _evaluate(expr.args[1], batch)
    except (ResourcesExhausted, WorkerLost):
        raise
    except ExecutionError:  # overflow, conversion, ...: perhaps on a decided row
        decisive = expr.func == "or"
        left = evaluate(expr.args[0], batch) if isinstance(left, pa.Scalar) else \
            (left.combine_chunks() if isinstance(left, pa.ChunkedArray) else left)
        decided = np.zeros(batch.num_rows, dtype=bool) if pa.types.is_null(left.type) else \
            np.asarray(pc.fill_null(pc.equal(left, decisive), False), dtype=bool)
        rows = np.flatnonzero(~decided)
        if len(rows) == batch.num_rows:
            raise
        # on decided rows ``b`` is any value: a AND b / a OR b is ``a`` there
        values = np.full(batch.num_rows, decisive)
        valid = np.ones(batch.num_rows, dtype=bool)
        if len(rows):
            sub = evaluate(expr.args[1], batch.take(pa.array(rows)))
            values[rows] = np.asarray(pc.fill_null(sub, decisive), dtype=bool)
            valid[rows] = np.asarray(sub.is_valid(), dtype=bool)
        right = pa.array(values, pa.bool_(), mask=~valid)
    return evaluate_call(expr, [left, right])


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
