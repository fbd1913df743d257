"""Evaluate bound expressions over a RecordBatch, column at a time, in Arrow kernels."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.logical.expr import Call, Cast, Column, Expr, Literal
from plansight.errors import InternalError


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
    # imported here: the scalar layer imports the IR, not the other way round
    from plansight.engine.functions.scalar import evaluate_call, evaluate_cast

    if isinstance(expr, Column):
        index = batch.schema.get_field_index(expr.field_name)
        if index < 0:
            raise InternalError(f"column {expr.field_name} not in batch {batch.schema.names}")
        return batch.column(index)
    if isinstance(expr, Literal):
        return pa.scalar(expr.value, expr.type)
    if isinstance(expr, Cast):
        return evaluate_cast(_evaluate(expr.expr, batch), expr.type, expr.safe)
    if isinstance(expr, Call):
        args = [_evaluate(arg, batch) for arg in expr.args]
        return evaluate_call(expr, args)
    raise InternalError(f"cannot evaluate {type(expr).__name__} {expr} in a physical plan")


def is_constant(expr: Expr) -> bool:
    return isinstance(expr, Literal)
