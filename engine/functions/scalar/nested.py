"""Struct and list values: ``{'a': 1, 'b': x}`` (struct_pack) and ``[1, NULL]`` (list_value).

The elements of a list take their common type, as in ``IN`` lists; a list of NULLs alone
holds INTEGER (DuckDB's type for an untyped NULL). Each row builds its own value, so the
arguments may be columns: ``[a, b + 1]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import cast_expr
from plansight.engine.functions.scalar.registry import binder, call, kernel
from plansight.engine.functions.scalar.vector import Value, broadcast, finish
from plansight.engine.logical.expr import Call, Expr


@binder("list_value", "list_pack")
def bind_list_value(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    if not args:
        return call("list_value", [], pa.list_(pa.int32()))
    typed, element = T.unify(args, "a list value", cast=cast_expr)
    return call("list_value", typed, pa.list_(element))


def resolve_struct(names: Sequence[str], values: Sequence[Expr]) -> Expr:
    """``{name: value, ...}`` as a struct_pack call. An untyped NULL field keeps the NULL
    type, as in DuckDB (``STRUCT(a INTEGER, b "NULL")``), so the struct converts implicitly
    to one whose field has any type: ``{'a': 1, 'b': NULL} = {'a': 1, 'b': 'x'}`` or a UNION
    of the two binds (with an INTEGER field it needed an explicit CAST)."""
    return call("struct_pack", list(values), pa.struct([pa.field(n, v.type)
                                                        for n, v in zip(names, values)]))


@kernel("struct_pack")
def struct_pack_kernel(args: list[Value], call_: Call) -> Value:
    arrays, all_scalar = broadcast(args)
    if not arrays:
        raise ValueError("a struct value needs a field")
    return finish(pa.StructArray.from_arrays(arrays, fields=list(call_.type)), all_scalar)


@kernel("list_value")
def list_value_kernel(args: list[Value], call_: Call) -> Value:
    element = call_.type.value_type
    if not args:
        return pa.scalar([], call_.type)
    arrays, all_scalar = broadcast(args)
    n, k = len(arrays[0]), len(arrays)
    values = pa.concat_arrays([a.cast(element) for a in arrays])
    # row r's elements are arrays[0][r], arrays[1][r], ...: interleave by index
    order = (np.arange(n, dtype=np.int64)[:, None] +
             np.arange(k, dtype=np.int64)[None, :] * n).ravel()
    offsets = pa.array(np.arange(0, n * k + 1, k, dtype=np.int32))
    lists = pa.ListArray.from_arrays(offsets, values.take(pa.array(order)), type=call_.type)
    return finish(lists, all_scalar)
