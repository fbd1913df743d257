"""Whole-partition aggregates without sorting: group by partition code, then broadcast.

``SUM(v) OVER (PARTITION BY c1)`` is one aggregate per partition, repeated on its rows. With
the partition of every row as an integer code (``permutation.partition_codes``) the rows can
stay in input order::

    codes   2 0 2 1 0          per code (np.bincount / ufunc.at, one pass)
    v       1 5 3 2 4    ──▶   sum[0] = 9, sum[1] = 2, sum[2] = 4   ──▶  sum[codes]
                                                                        4 9 4 2 9

Covered: count(*), count, sum, avg over integers and floats, min and max over integers,
floats, booleans and temporal types; with FILTER. Anything else (DISTINCT, decimals,
strings, ...) returns None and the caller sorts. Results match the sorting kernels
(``aggregates``): NULL for a partition without contributing rows, DuckDB's NaN order for
MIN/MAX, integer sums exact or rejected on overflow. Float sums add in input order, as
DuckDB's plain double sum does.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plansight.engine.functions.capabilities import capabilities
from plansight.engine.functions.window.peers import as_array, validity

_INT64_LIMIT = 2**63


def broadcastable(func: str, arg_types: list[pa.DataType], distinct: bool) -> bool:
    """Whether ``whole_partition_aggregate`` handles ``func`` over these argument types.

    Example:
        >>> broadcastable("sum", [pa.float64()], False), broadcastable("sum", [pa.string()], False)
        (True, False)
    """
    if not capabilities(func).broadcasts or distinct:
        return False
    if func == "count_star":
        return True
    typ = arg_types[0]
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if func == "count":
        return True
    numeric = pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_null(typ)
    if func in ("sum", "avg"):
        return numeric or (func == "sum" and pa.types.is_boolean(typ))
    return numeric or pa.types.is_boolean(typ) or _is_int_temporal(typ)


def whole_partition_aggregate(func: str, args: list[pa.Array], codes: np.ndarray,
                              num_groups: int, *, filter_mask: pa.Array | None,
                              result_type: pa.DataType) -> pa.Array | None:
    """``func`` over each row's whole partition, rows in any order (``codes`` per row).

    None when an integer sum might leave int64: the sorting kernel then decides exactly.

    Example:
        >>> codes = np.array([2, 0, 2, 1, 0])
        >>> whole_partition_aggregate("sum", [pa.array([1, 5, 3, None, 4])], codes, 3,
        ...                           filter_mask=None, result_type=pa.int64()).to_pylist()
        [4, 9, 4, None, 9]
    """
    n = len(codes)
    keep = None
    if filter_mask is not None:
        keep = as_array(filter_mask).fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
    if func == "count_star":
        counts = np.bincount(codes if keep is None else codes[keep], minlength=num_groups)
        return pa.array(counts[codes], type=pa.int64())
    values = as_array(args[0])
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    # the common case - no NULL argument, no FILTER - touches no mask at all
    everyone = keep is None and values.null_count == 0
    contributing = None if everyone else validity(values)
    if keep is not None:
        contributing &= keep
    counts = np.bincount(codes if everyone else codes[contributing], minlength=num_groups)
    if func == "count":
        return pa.array(counts[codes], type=pa.int64())
    empty = counts[codes] == 0 if not counts.all() else None
    if pa.types.is_null(values.type):
        return pa.nulls(n, type=result_type)
    if func in ("sum", "avg"):
        return _sum_avg(func, values, contributing, codes, num_groups, counts, empty,
                        result_type)
    return _extremum(func, values, contributing, codes, num_groups, empty)


def _sum_avg(func: str, values: pa.Array, contributing: np.ndarray | None, codes: np.ndarray,
             num_groups: int, counts: np.ndarray, empty: np.ndarray | None,
             result_type: pa.DataType) -> pa.Array | None:
    """``contributing`` None: every row contributes; ``empty`` None: no partition is empty."""
    typ = values.type
    if pa.types.is_floating(typ):
        if contributing is None:
            numbers = values.cast(pa.float64()).to_numpy()
        else:
            numbers = values.cast(pa.float64()).fill_null(0.0).to_numpy()
            numbers = np.where(contributing, numbers, 0.0)
        sums = np.bincount(codes, weights=numbers, minlength=num_groups)
        if func == "avg":
            with np.errstate(invalid="ignore", divide="ignore"):
                sums = sums / np.maximum(counts, 1)
        return pa.array(sums[codes], type=pa.float64(), mask=empty).cast(result_type)
    if pa.types.is_boolean(typ):
        values = values.cast(pa.int8())
    raw = values.fill_null(0).to_numpy(zero_copy_only=False)
    if raw.dtype == np.uint64 and len(raw) and int(raw.max()) >= _INT64_LIMIT:
        return None
    ints = raw.astype(np.int64, copy=False) if contributing is None else \
        np.where(contributing, raw.astype(np.int64), 0)
    largest = max(abs(int(ints.max())), abs(int(ints.min()))) if len(ints) else 0
    if largest * max(int(counts.max()) if len(counts) else 0, 1) >= _INT64_LIMIT:
        return None  # might overflow: the sorting kernel checks the actual sums
    sums = np.zeros(num_groups, dtype=np.int64)
    np.add.at(sums, codes, ints)
    if func == "avg":
        means = sums.astype(np.float64) / np.maximum(counts, 1)
        return pa.array(means[codes], type=pa.float64(), mask=empty)
    return pa.array(sums[codes], type=pa.int64(), mask=empty).cast(result_type)


def _extremum(func: str, values: pa.Array, contributing: np.ndarray | None, codes: np.ndarray,
              num_groups: int, empty: np.ndarray | None) -> pa.Array:
    typ = values.type
    if contributing is None:
        contributing = np.ones(len(codes), dtype=bool)
    is_min = func == "min"
    if pa.types.is_floating(typ):
        as_float = values.cast(pa.float32()) if pa.types.is_float16(typ) else values
        numbers = as_float.fill_null(0).to_numpy()
        # NaN sorts above every number: MIN ignores it (fmin), MAX returns it (maximum)
        op, identity = (np.fmin, np.nan) if is_min else (np.maximum, -np.inf)
        result = np.full(num_groups, identity, dtype=numbers.dtype)
        with np.errstate(invalid="ignore"):  # a NaN operand is expected, not a warning
            op.at(result, codes, np.where(contributing, numbers, identity))
        return pa.array(result[codes], mask=empty).cast(typ)
    if pa.types.is_boolean(typ):
        storage = pa.uint8()
    elif pa.types.is_integer(typ):
        storage = typ
    else:
        storage = pa.int32() if typ.bit_width == 32 else pa.int64()
    numbers = values.cast(storage) if pa.types.is_boolean(typ) else values.view(storage) \
        if storage != typ else values
    numbers = numbers.fill_null(0).to_numpy()
    info = np.iinfo(numbers.dtype)
    op, identity = (np.minimum, info.max) if is_min else (np.maximum, info.min)
    result = np.full(num_groups, identity, dtype=numbers.dtype)
    op.at(result, codes, np.where(contributing, numbers, identity))
    out = pa.array(result[codes], type=storage, mask=empty)
    if pa.types.is_boolean(typ):
        return out.cast(pa.bool_())
    return out if storage == typ else out.view(typ)


def _is_int_temporal(typ: pa.DataType) -> bool:
    return (pa.types.is_date(typ) or pa.types.is_timestamp(typ) or pa.types.is_time(typ)
            or pa.types.is_duration(typ))
