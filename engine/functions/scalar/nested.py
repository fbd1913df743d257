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
import pyarrow.compute as pc

from plansight.engine.errors import NotSupportedError, PlanError, did_you_mean
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import cast_expr
from plansight.engine.functions.scalar.registry import binder, call, kernel
from plansight.engine.functions.scalar.vector import Value, broadcast, finish
from plansight.engine.logical.expr import Call, Expr, Literal


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


@binder("struct_extract")
def bind_struct_extract(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    """``struct_extract(s, 'name')``, also written ``s.name`` and ``s['name']``: the field's
    value (case-insensitive name, as DuckDB's identifiers), NULL where the struct is."""
    if len(args) != 2 or not isinstance(args[1], Literal) or \
            not isinstance(args[1].value, str):
        raise PlanError("struct_extract takes a struct and a constant field name")
    struct, name = args
    if not pa.types.is_struct(struct.type):
        raise PlanError(f"struct_extract needs a STRUCT, not {T.type_name(struct.type)}")
    fields = [f.name for f in struct.type]
    matches = [f for f in fields if f.lower() == name.value.lower()]
    if not matches:
        raise PlanError(f"the struct has no field {name.value!r}" +
                        did_you_mean(name.value, fields))
    field = struct.type.field(matches[0])
    return call("struct_extract", [struct, Literal(field.name, pa.string())], field.type)


@kernel("struct_extract")
def struct_extract_kernel(args: list[Value], call_: Call) -> Value:
    (structs, _), all_scalar = broadcast(args)
    values = structs.field(call_.args[1].value)
    if structs.null_count:  # a field of a NULL struct is NULL, whatever the child holds
        values = pc.if_else(structs.is_valid(), values, pa.nulls(len(values), values.type))
    return finish(values, all_scalar)


@binder("list_extract", "list_element", "array_extract")
def bind_list_extract(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    """``list_extract(l, i)``, also written ``l[i]``: the i-th element, counted from 1 (from
    the end when negative, -1 the last); NULL for 0, past either end, or a NULL list."""
    if len(args) != 2:
        raise PlanError("list_extract takes a list and an index")
    values, index = args
    if pa.types.is_null(values.type):
        return call("list_extract", [cast_expr(values, pa.list_(pa.int32())),
                                     cast_expr(index, pa.int64())], pa.int32())
    if not pa.types.is_list(values.type):
        raise NotSupportedError(f"list_extract on {T.type_name(values.type)} is not supported "
                                "yet (only on lists)")
    if not (T.is_integer(index.type) or pa.types.is_null(index.type)):
        raise PlanError(f"a list index must be an integer, not {T.type_name(index.type)}")
    return call("list_extract", [values, cast_expr(index, pa.int64())],
                values.type.value_type)


@kernel("list_extract")
def list_extract_kernel(args: list[Value], call_: Call) -> Value:
    (lists, index), all_scalar = broadcast(args)
    n = len(lists)
    offsets = np.asarray(lists.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    i = np.asarray(index.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    position = np.where(i > 0, i - 1, lengths + i)
    found = (i != 0) & (position >= 0) & (position < lengths)
    if lists.null_count:
        found &= np.asarray(lists.is_valid(), dtype=bool)
    rows = pa.array(np.where(found, starts + position, 0), pa.int64(), mask=~found)
    element = lists.values.take(rows) if n else pa.array([], call_.type)
    return finish(element, all_scalar)
