"""Scalar functions and operators: DuckDB-compatible typing and vectorized Arrow evaluation.

Binding (``engine.sql.functions.bind_scalar_node``) turns SQL into typed ``Call`` / ``Cast`` /
``Literal`` nodes through ``resolve_function`` and ``resolve_operator``; implicit conversions
are explicit ``Cast`` nodes, so a kernel receives arguments already of the types it expects.

Evaluation: an expression evaluator maps Column -> batch column, Literal -> ``pa.scalar``,
Cast -> ``evaluate_cast`` and Call -> ``evaluate_call``. Arguments are arrays of one length,
or scalars for constants; an all-scalar call returns a scalar.

Example:
    >>> import pyarrow as pa
    >>> from plansight.engine.logical.expr import Literal
    >>> e = resolve_operator("add", [Literal(1, pa.int32()), Literal(2.5, pa.float64())], {})
    >>> e.type, evaluate_call(e, [pa.scalar(1.0), pa.scalar(2.5)]).as_py()
    (DataType(double), 3.5)
"""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.errors import ExecutionError, InternalError, PlansightError
from plansight.engine.functions.scalar import (  # noqa: F401  (modules register functions)
    arithmetic,
    bitwise,
    comparison,
    conditional,
    math,
    misc,
    nested,
    strings,
    temporal,
)
from plansight.engine.functions.scalar.cast import can_cast, cast_expr, evaluate_cast
from plansight.engine.functions.scalar.registry import (
    BINDERS,
    KERNELS,
    OPERATORS,
    resolve_function,
    resolve_operator,
)
from plansight.engine.functions.scalar.types import common_supertype, number_literal, type_name
from plansight.engine.functions.scalar.vector import Value
from plansight.engine.logical.expr import Call

# kernels that accept the batch length (argument-less functions with a value per row)
ROW_COUNT_KERNELS = frozenset({"random"})

__all__ = [
    "BINDERS",
    "KERNELS",
    "OPERATORS",
    "can_cast",
    "cast_expr",
    "common_supertype",
    "evaluate_call",
    "evaluate_cast",
    "function_names",
    "number_literal",
    "resolve_function",
    "resolve_operator",
    "type_name",
]


def evaluate_call(call: Call, args: list[Value], num_rows: int | None = None) -> Value:
    """Evaluate one ``Call`` on its already-evaluated arguments.

    ``num_rows`` (optional) is the batch length: argument-less volatile functions
    (``random()``) then return one value per row instead of a scalar.
    Raises ExecutionError for data errors (overflow, division by zero, bad conversion).
    """
    fn = KERNELS.get(call.func)
    if fn is None:
        raise InternalError(f"no kernel for scalar function '{call.func}'")
    args = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in args]
    # kernels work on plain arrays: decode dictionary-encoded inputs (e.g. from Parquet)
    args = [a.cast(a.type.value_type) if pa.types.is_dictionary(a.type) else a for a in args]
    try:
        if call.func in ROW_COUNT_KERNELS:
            result = fn(args, call, num_rows=num_rows)
        else:
            result = fn(args, call)
    except PlansightError:
        raise
    except (pa.ArrowInvalid, OverflowError, ValueError) as e:
        raise ExecutionError(f"{call.func}: {e}") from e
    except pa.ArrowNotImplementedError as e:
        raise InternalError(f"{call.func} on "
                            f"{', '.join(str(a.type) for a in args)}: {e}") from e
    if result.type != call.type:
        result = result.cast(call.type)
    return result


def function_names() -> list[str]:
    """SQL function names the catalogue knows (for did-you-mean and documentation)."""
    return sorted(BINDERS)
