"""Equality codes of nested values (structs, lists, maps): equal values, equal codes.

Arrow's hash kernels (dictionary_encode, unique, group_by) take no struct or list keys, so
nested values are numbered bottom-up from their leaves::

    leaf column      ──keys.column_codes (int / bytes kinds) or its fixed-width bytes──▶ codes
    struct           field codes combined (c₁·k₂ + c₂ ...) ──hash table──▶ one code per row
    list, map        element codes (int64) read as one byte string per list ──▶ bytes table

A NULL equals only NULL at every level (IS NOT DISTINCT FROM, the rule of DISTINCT), so
{a: NULL} equals {a: NULL}, [NULL] equals [NULL], and a NULL list differs from []. Codes lie
in [0, count) and their order means nothing.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plansight.engine.errors import NotSupportedError
from plansight.engine.kernels.hash_table import bytes_factorize, int_factorize
from plansight.engine.kernels.keys import MAX_CODE, column_codes, key_kind, plain, validity


def nested_codes(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """(code per row, bound on the codes) of any column, nested or not; a NULL row gets a
    code of its own.

    Example:
        >>> codes, count = nested_codes(pa.array([[1, None], [], [1, None], None, []]))
        >>> codes.tolist(), count
        ([0, 1, 0, 2, 1], 3)
    """
    values = plain(values)
    typ = values.type
    if pa.types.is_struct(typ):
        codes, count = _struct_codes(values)
    elif (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_map(typ)
          or pa.types.is_fixed_size_list(typ)):
        codes, count = _list_codes(values)
    elif pa.types.is_null(typ):
        return np.zeros(len(values), dtype=np.int64), min(len(values), 1)
    elif typ == pa.month_day_nano_interval():
        codes, count = _interval_codes(values)
    elif pa.types.is_float16(typ):
        return column_codes(values.cast(pa.float32()))
    elif key_kind(typ) != "arrow":
        return column_codes(values)
    else:
        codes, count = _fixed_width_codes(values)
    if values.null_count:
        codes[~validity(values)] = count
        count += 1
    return codes, count


def _struct_codes(values: pa.StructArray) -> tuple[np.ndarray, int]:
    """Codes of the rows' field tuples (NULL rows arbitrary)."""
    n = len(values)
    codes = np.zeros(n, dtype=np.int64)
    count = 1 if n else 0
    everything = np.ones(n, dtype=bool)
    for field in values.flatten():  # fields sliced like the struct (its NULLs pushed down)
        more, cardinality = nested_codes(field)
        if count * cardinality >= MAX_CODE:  # renumber the occurring combinations first
            codes, _, uniques = int_factorize(codes, everything)
            count = len(uniques)
        codes = codes * cardinality + more
        count *= max(cardinality, 1)
    if n == 0 or values.type.num_fields == 0:
        return codes, count
    codes, _, uniques = int_factorize(codes, everything)
    return codes, len(uniques)


def _list_codes(values: pa.Array) -> tuple[np.ndarray, int]:
    """Codes of the rows' element sequences (NULL rows arbitrary): each list's element codes
    as 8 bytes apiece make one byte string, numbered by the bytes hash table."""
    n = len(values)
    if pa.types.is_fixed_size_list(values.type):
        size = values.type.list_size
        offsets = (np.arange(n + 1, dtype=np.int64) + values.offset) * size
    else:
        offsets = np.asarray(values.offsets, dtype=np.int64)
    low, high = (int(offsets[0]), int(offsets[-1])) if n else (0, 0)
    elements, _ = nested_codes(values.values.slice(low, high - low))
    data = np.ascontiguousarray(elements, dtype=np.int64).view(np.uint8)
    valid = validity(values)
    ids, _, first, _ = bytes_factorize((offsets - low) * 8, data, valid)
    return ids, len(first)


def _interval_codes(values: pa.Array) -> tuple[np.ndarray, int]:
    """Codes of intervals by their normalized value (a day is 24 hours, a month 30 days, as
    DuckDB compares them): 1 month equals 30 days."""
    raw = np.frombuffer(values.buffers()[1], dtype=np.dtype(
        [("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")]))[values.offset:
                                                                   values.offset + len(values)]
    day = 86_400 * 1_000_000_000
    days = raw["days"].astype(np.int64) + np.floor_divide(raw["nanos"], day)
    nanos = np.mod(raw["nanos"], day)
    months = raw["months"].astype(np.int64) + np.floor_divide(days, 30)
    days = np.mod(days, 30)
    # (months, days) and the nanos of a day would overflow one int64: number each, combine
    everything = np.ones(len(values), dtype=bool)
    head, _, _ = int_factorize(months * 30 + days, everything)
    tail, _, tails = int_factorize(nanos, everything)
    codes, _, uniques = int_factorize(head * len(tails) + tail, everything)
    return codes, len(uniques)


def _fixed_width_codes(values: pa.Array) -> tuple[np.ndarray, int]:
    """Codes of a fixed-width type the key kinds do not read (intervals, wide decimals,
    fixed-size binary): its value bytes, which are equal exactly for equal values."""
    typ = values.type
    width = typ.byte_width if pa.types.is_fixed_size_binary(typ) else typ.bit_width // 8
    try:
        exact = typ.bit_width % 8 == 0
    except ValueError:
        exact = False
    if not exact or width == 0:
        raise NotSupportedError(f"values of type {typ} cannot be compared for equality here")
    n = len(values)
    buffer = values.buffers()[1]
    data = np.frombuffer(buffer, dtype=np.uint8)[values.offset * width:
                                                  (values.offset + n) * width]
    offsets = np.arange(n + 1, dtype=np.int64) * width
    ids, _, first, _ = bytes_factorize(offsets, data, validity(values))
    return ids, len(first)
