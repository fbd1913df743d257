"""Helpers shared by the kernels: scalar/array broadcasting and error translation.

Kernels receive arrays of one length or scalars (constants). Arrow kernels broadcast scalars
themselves; numpy-based kernels use ``broadcast`` and ``finish`` so an all-scalar call returns
a scalar.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Value = pa.Array | pa.ChunkedArray | pa.Scalar


def is_scalar(value: Value) -> bool:
    return isinstance(value, pa.Scalar)


def length_of(args: Sequence[Value]) -> int | None:
    """The common array length, or None when every argument is a scalar."""
    for a in args:
        if not is_scalar(a):
            return len(a)
    return None


def to_array(value: Value, length: int) -> pa.Array:
    """``value`` as an array of ``length`` rows (a scalar is repeated)."""
    if is_scalar(value):
        return pa.repeat(value, length) if value.is_valid else pa.nulls(length, value.type)
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks()
    return value


def broadcast(args: Sequence[Value]) -> tuple[list[pa.Array], bool]:
    """Arrays of one length for ``args``; the flag says they were all scalars (length 1)."""
    n = length_of(args)
    all_scalar = n is None
    return [to_array(a, 1 if all_scalar else n) for a in args], all_scalar


def finish(result: pa.Array, all_scalar: bool) -> Value:
    return result[0] if all_scalar else result


def scalar_value(value: Value):
    """The Python value of a constant argument (a scalar, or an array whose rows are equal)."""
    if is_scalar(value):
        return value.as_py()
    return value[0].as_py() if len(value) else None


def validity(arrays: Sequence[pa.Array]) -> np.ndarray:
    """Boolean mask: True where every array is non-null."""
    n = len(arrays[0])
    mask = np.ones(n, dtype=bool)
    for a in arrays:
        if a.null_count:
            mask &= ~np.asarray(a.is_null().to_numpy(zero_copy_only=False))
    return mask


def to_numpy(array: pa.Array, fill=0) -> np.ndarray:
    """A numpy copy of ``array`` with nulls replaced by ``fill``."""
    if array.null_count:
        array = pc.fill_null(array, pa.scalar(fill, array.type))
    return array.to_numpy(zero_copy_only=False)


def from_numpy(values: np.ndarray, mask: np.ndarray | None, type: pa.DataType) -> pa.Array:
    """An Arrow array from numpy ``values``; rows where ``mask`` is False become null."""
    null_mask = None if mask is None or mask.all() else ~mask
    return pa.array(values, type=type, mask=null_mask)


def null_where(value: Value, condition: Value) -> Value:
    """``value`` with rows where ``condition`` is true set to null."""
    return pc.if_else(condition, pa.scalar(None, value.type), value)
