"""Order-preserving bytes of struct, list and map values: ORDER BY and ``<`` on them.

Arrow sorts and compares no nested values, but it compares binary values byte by byte. So a
nested value becomes one byte string whose byte order is DuckDB's order of the values:

    structs    field by field               {'a': 0, 'b': 'z'} < {'a': 1, 'b': 'x'}
    lists      element by element; a prefix first          [] < [0, 5] < [1] < [1, 2]
    NULL inside (field or element)  after every value      [1, 2, 3] < [1, NULL] < [NULL]

Every element is a marker byte (0x01 a value, 0x02 NULL: greater) and the value's bytes; a
list ends with 0x00, below both markers, so a list sorts before its extensions. The bytes
never make one encoding a prefix of another, so DESC is the reverse byte order (a NULL
element then comes first, as in DuckDB). Value bytes: integers, dates and times big-endian
with the sign bit flipped; floats as their IEEE bits made monotonic (-0.0 is 0.0, NaN one
value above +inf); strings with 0x00 escaped as 0x00 0xFF and ended by 0x00 0x00; intervals
by their normalized (months, days, nanoseconds); decimals by their 128-bit integer.
A NULL row stays NULL, so NULLS FIRST / LAST apply to it as to any key.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import NotSupportedError
from plansight.engine.kernels.keys import plain, validity
from plansight.engine.kernels.nested_keys import _list_offsets, _ranges

_VALUE, _NULL, _END = b"\x01", b"\x02", b"\x00"
_SIGN = np.uint64(1 << 63)
_EMPTY = pa.scalar(b"", pa.binary())


def order_bytes(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One binary per row whose byte order is the rows' order (module docstring); NULL rows
    are NULL.

    Example:
        >>> keys = order_bytes(pa.array([[1, None], [1, 2, 3], [], None, [None]]))
        >>> pc.sort_indices(keys).to_pylist()
        [2, 1, 0, 4, 3]
    """
    values = plain(values)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    payload = _payload(values)
    if not values.null_count:
        return payload
    return pc.if_else(values.is_valid(), payload, pa.scalar(None, pa.binary()))


def _element(values: pa.Array) -> pa.Array:
    """Marker and payload of each element (a NULL element is the NULL marker alone)."""
    tagged = pc.binary_join_element_wise(pa.scalar(_VALUE, pa.binary()), _payload(values),
                                         _EMPTY)
    if not values.null_count:
        return tagged
    return pc.if_else(values.is_valid(), tagged, pa.scalar(_NULL, pa.binary()))


def _payload(values: pa.Array) -> pa.Array:
    typ = values.type
    if pa.types.is_struct(typ):
        fields = [_element(plain(f)) for f in values.flatten()]
        if not fields:
            return pa.array([b""] * len(values), pa.binary())
        return pc.binary_join_element_wise(*fields, _EMPTY)
    if (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_map(typ)
            or pa.types.is_fixed_size_list(typ)):
        return _list_payload(values)
    if pa.types.is_null(typ):
        return pa.array([b""] * len(values), pa.binary())
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_binary(typ) \
            or pa.types.is_large_binary(typ):
        data = values.cast(pa.binary())
        escaped = pc.replace_substring(data, b"\x00", b"\x00\xff")
        return pc.binary_join_element_wise(escaped, pa.scalar(b"\x00\x00", pa.binary()),
                                           _EMPTY)
    if pa.types.is_boolean(typ):
        return _big_endian(values.cast(pa.uint8()).fill_null(0).to_numpy().astype(np.uint8))
    if pa.types.is_floating(typ):
        return _big_endian(_float_words(values))
    if pa.types.is_unsigned_integer(typ):
        return _big_endian(values.cast(pa.uint64()).fill_null(0).to_numpy()
                           .astype(np.uint64))
    if pa.types.is_integer(typ) or pa.types.is_temporal(typ) and not pa.types.is_interval(typ):
        return _big_endian(_signed_words(values))
    if typ == pa.month_day_nano_interval():
        return _interval_payload(values)
    if pa.types.is_decimal(typ) and typ.bit_width == 128:
        raw = np.frombuffer(values.buffers()[1], dtype=np.uint64)[
            2 * values.offset:2 * (values.offset + len(values))].reshape(-1, 2)
        high = raw[:, 1] ^ _SIGN
        return _big_endian(np.stack([high, raw[:, 0]], axis=1).reshape(-1), width=16)
    raise NotSupportedError(f"values of type {typ} cannot be ordered inside a struct or list")


def _list_payload(values: pa.Array) -> pa.Array:
    n = len(values)
    offsets = _list_offsets(values)
    low, high = (int(offsets[0]), int(offsets[-1])) if n else (0, 0)
    elements = _element(plain(values.values.slice(low, high - low)))
    lengths = np.diff(offsets)
    if values.null_count:  # a NULL row's offsets may span elements: read as empty
        lengths = np.where(validity(values), lengths, 0)
    starts = np.concatenate([[0], np.cumsum(lengths)]) if n else np.zeros(1, np.int64)
    picked = pc.take(elements, pa.array(_ranges(offsets[:-1] - low, lengths)))
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(starts, pa.int32()), picked),
                            _EMPTY)
    return pc.binary_join_element_wise(joined, pa.scalar(_END, pa.binary()), _EMPTY)


def _signed_words(values: pa.Array) -> np.ndarray:
    typ = values.type
    if pa.types.is_temporal(typ):  # the same bits, read as integers
        values = values.view(pa.int64() if typ.bit_width == 64 else pa.int32())
    ints = values.cast(pa.int64()).fill_null(0).to_numpy().astype(np.int64)
    return ints.view(np.uint64) ^ _SIGN


def _float_words(values: pa.Array) -> np.ndarray:
    doubles = values.cast(pa.float64()).fill_null(0.0).to_numpy().astype(np.float64)
    doubles = np.where(np.isnan(doubles), np.nan, doubles + 0.0)  # one NaN, -0.0 is 0.0
    bits = doubles.view(np.uint64)
    negative = (bits & _SIGN) != 0
    return np.where(negative, ~bits, bits | _SIGN)


def _interval_payload(values: pa.Array) -> pa.Array:
    raw = np.frombuffer(values.buffers()[1], dtype=np.dtype(
        [("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")]))[
            values.offset:values.offset + len(values)]
    day = 86_400 * 1_000_000_000
    days = raw["days"].astype(np.int64) + np.floor_divide(raw["nanos"], day)
    nanos = np.mod(raw["nanos"], day)
    months = raw["months"].astype(np.int64) + np.floor_divide(days, 30)
    words = np.stack([months, np.mod(days, 30), nanos], axis=1).reshape(-1)
    return _big_endian(words.view(np.uint64) ^ _SIGN, width=24)


def _big_endian(words: np.ndarray, width: int | None = None) -> pa.Array:
    """Each row's ``width`` bytes (default: one word's), most significant first."""
    width = width or words.dtype.itemsize
    data = words.astype(words.dtype.newbyteorder(">")).tobytes()
    rows = len(data) // width if width else 0
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), rows,
                                                 [None, pa.py_buffer(data)])
    return fixed.cast(pa.binary())
