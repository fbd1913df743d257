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
import pyarrow.compute as pc

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


def _list_offsets(values: pa.Array) -> np.ndarray:
    """Each row's start in ``values.values`` and the end, as int64 (fixed-size lists have no
    offsets buffer: theirs follow from the list size and the array's offset)."""
    if pa.types.is_fixed_size_list(values.type):
        size = values.type.list_size
        return (np.arange(len(values) + 1, dtype=np.int64) + values.offset) * size
    return np.asarray(values.offsets, dtype=np.int64)


def _list_codes(values: pa.Array) -> tuple[np.ndarray, int]:
    """Codes of the rows' element sequences (NULL rows arbitrary): each list's element codes
    as 8 bytes apiece make one byte string, numbered by the bytes hash table."""
    n = len(values)
    offsets = _list_offsets(values)
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


# ----------------------------------------------------------------------------- canonical bytes

def canonical_bytes(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One byte string per row, equal exactly for values DuckDB's nested comparison calls
    equal: a NULL element or field equals NULL, -0.0 equals 0.0, NaN equals NaN; a NULL row
    is NULL. Unlike ``nested_codes`` the bytes depend on the value alone, so batches,
    partitions and the two sides of a join agree: GROUP BY, DISTINCT, joins and window
    partitions key nested values by them (optimizer/encode_nested_keys.py).

    Every element is a tag byte (0 NULL, 1 a value) and its bytes: fixed-width values their
    little-endian bytes, strings their length (4 bytes) then their bytes, structs their fields
    in order, lists their length then their elements. Each encoding delimits itself.
    """
    values = plain(values)
    encoded = _encode(values)
    return pc.if_else(values.is_valid(), encoded, pa.scalar(None, pa.binary())) \
        if values.null_count else encoded


def _tagged(values: pa.Array, payload: pa.Array) -> pa.Array:
    """``payload`` behind a tag byte; a NULL row is the tag 0 alone."""
    tagged = pc.binary_join_element_wise(pa.scalar(b"\x01", pa.binary()), payload,
                                         pa.scalar(b"", pa.binary()))
    if not values.null_count:
        return tagged
    return pc.if_else(values.is_valid(), tagged, pa.scalar(b"\x00", pa.binary()))


def _encode(values: pa.Array) -> pa.Array:
    typ = values.type
    if pa.types.is_struct(typ):
        fields = [_encode(plain(f)) for f in values.flatten()]
        if not fields:
            payload = pa.array([b""] * len(values), pa.binary())
        else:
            payload = pc.binary_join_element_wise(*fields, pa.scalar(b"", pa.binary()))
        return _tagged(values, payload)
    if (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_map(typ)
            or pa.types.is_fixed_size_list(typ)):
        return _tagged(values, _list_payload(values))
    if pa.types.is_null(typ):
        return pa.array([b"\x00"] * len(values), pa.binary())
    if pa.types.is_string(typ) or pa.types.is_binary(typ) or pa.types.is_large_string(typ) \
            or pa.types.is_large_binary(typ):
        data = values.cast(pa.binary()) if not pa.types.is_binary(typ) else values
        lengths = pc.binary_length(data).fill_null(0).cast(pa.uint32())
        return _tagged(values, pc.binary_join_element_wise(_fixed_bytes(lengths), data,
                                                           pa.scalar(b"", pa.binary())))
    if pa.types.is_floating(typ):
        # -0.0 + 0.0 is 0.0; every NaN becomes one NaN
        values = values.cast(pa.float64())
        canonical = pc.if_else(pc.is_nan(values), pa.scalar(float("nan")),
                               pc.add(values, 0.0))
        return _tagged(values, _fixed_bytes(canonical))
    if pa.types.is_boolean(typ):
        return _tagged(values, _fixed_bytes(values.cast(pa.uint8())))
    if typ == pa.month_day_nano_interval():
        codes_typ = values  # normalized as DuckDB compares intervals (a month is 30 days)
        raw = np.frombuffer(codes_typ.buffers()[1], dtype=np.dtype(
            [("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")]))[
                values.offset:values.offset + len(values)]
        day = 86_400 * 1_000_000_000
        days = raw["days"].astype(np.int64) + np.floor_divide(raw["nanos"], day)
        nanos = np.mod(raw["nanos"], day)
        months = raw["months"].astype(np.int64) + np.floor_divide(days, 30)
        rows = np.empty(len(values), dtype=[("m", "<i8"), ("d", "<i8"), ("n", "<i8")])
        rows["m"], rows["d"], rows["n"] = months, np.mod(days, 30), nanos
        payload = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(24), len(values), [None, pa.py_buffer(rows.tobytes())])
        return _tagged(values, payload.cast(pa.binary()))
    return _tagged(values, _fixed_bytes(values))


def _fixed_bytes(values: pa.Array) -> pa.Array:
    """The value bytes of a fixed-width array, one binary per row (NULL rows arbitrary)."""
    typ = values.type
    try:
        width = typ.byte_width
    except ValueError:
        width = 0
    if width <= 0 or typ.bit_width % 8:
        raise NotSupportedError(f"values of type {typ} cannot be compared for equality here")
    data = values.buffers()[1].slice(values.offset * width, len(values) * width)
    as_fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(values),
                                                    [None, data])
    return as_fixed.cast(pa.binary())


def _list_payload(values: pa.Array) -> pa.Array:
    """Each list's length (4 bytes) then its element encodings, joined per list."""
    n = len(values)
    offsets = _list_offsets(values)
    low, high = (int(offsets[0]), int(offsets[-1])) if n else (0, 0)
    elements = _encode(plain(values.values.slice(low, high - low)))
    lengths = np.diff(offsets)
    if values.null_count:  # a NULL row's offsets may span elements: read as empty
        lengths = np.where(validity(values), lengths, 0)
    starts = np.concatenate([[0], np.cumsum(lengths)]) if n else np.zeros(1, np.int64)
    picked = pc.take(elements, pa.array(_ranges(offsets[:-1] - low, lengths)))
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(starts, pa.int32()), picked),
                            pa.scalar(b"", pa.binary()))
    return pc.binary_join_element_wise(_fixed_bytes(pa.array(lengths.astype(np.uint32))),
                                       joined, pa.scalar(b"", pa.binary()))


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``range(start, start + length)`` for each pair, vectorized."""
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    return np.arange(total, dtype=np.int64) + np.repeat(starts - (ends - lengths), lengths)
