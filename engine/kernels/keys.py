"""Key columns as integers: the encoding shared by hash joins and hash aggregation.

    key column ──int kind: exact int64 values──┐
               ──bytes kind: offsets + data────┴─hash table (hash_table.py)─▶ dense codes
    several columns: codes combined (c₁·k₂ + c₂ ...) ──hash table──▶ one dense id per row

Each key column becomes exact int64 values (integers, dates, times, decimals up to 18 digits
as scaled integers, floats as canonical bits: -0.0 is 0.0 and every NaN one NaN) or bytes
(strings, binary); other types ("arrow" kind) are left to Arrow's own kernels. ``group_ids``
numbers the distinct rows of several key columns, a NULL being a value of its own (GROUP
BY's rule); the join's KeyIndex numbers its build keys the same way and keeps the tables
to probe them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plansight.engine.kernels.decimal import fits_int64, unscaled
from plansight.engine.kernels.dictionary import known_width
from plansight.engine.kernels.hash_table import (
    MAX_PACKED_BYTES,
    MAX_SMALL_RANGE_SLOTS,
    add_joint_codes,
    bytes_factorize,
    common_width,
    int_factorize,
    int_lookup,
    longest_bytes,
    pack_short_bytes,
    range_factorize,
    range_lookup,
    small_range_factorize,
    valid_span,
)

#: combined codes are renumbered before their space could pass this (int64 stays exact)
MAX_CODE = 1 << 62
#: the largest array a range table may take (entries; 4 bytes each)
MAX_RANGE_SLOTS = 1 << 26
#: a range table may take this many slots per row: up to 10 (40 bytes) it costs at most
#: what a hash table takes per distinct key (2 to 4 slots of 16 bytes and an 8-byte unique),
#: and is twice as fast or more. 8 left TPC-H Q18's final aggregate (750K orders over a
#: range of 6M per partition, exactly 8 per key) on either side of the line by chance
RANGE_SLOTS_PER_ROW = 10


def key_range(values: np.ndarray, valid: np.ndarray) -> tuple[int, int] | None:
    """(low, size) when the valid keys span at most ~``RANGE_SLOTS_PER_ROW`` slots per row,
    else None: hash them. Sparse surrogate keys land here: TPC-H's order keys fill a
    quarter of their range, and one hash partition of them an eighth (Q18's final
    aggregate of 750K orders per partition: 45 ms through the range, 95+ ms hashed, where
    every insert misses the cache)."""
    kept = values if valid.all() else values[valid]
    if len(kept) == 0:
        return None
    low, high = int(kept.min()), int(kept.max())
    size = high - low + 1
    if size > RANGE_SLOTS_PER_ROW * len(kept) + 1024 or size > MAX_RANGE_SLOTS:
        return None
    return low, size


def factorize_ints(values: np.ndarray, valid: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int | None]:
    """(id per row or -1, table, uniques, low): ``int_factorize``, or ``range_factorize``
    (then ``low`` is the range's start, else None) when the keys lie in a narrow range."""
    span = key_range(values, valid)
    if span is None:
        ids, table, uniques = int_factorize(values, valid)
        return ids, table, uniques, None
    ids, table, uniques = range_factorize(values, valid, span[0], span[1])
    return ids, table, uniques, span[0]


def lookup_ints(values: np.ndarray, valid: np.ndarray, table: np.ndarray,
                low: int | None) -> np.ndarray:
    """The id of each row's key in a ``factorize_ints`` table, -1 when absent or invalid."""
    if low is None:
        return int_lookup(values, valid, table)
    return range_lookup(values, valid, table, low)


def plain(key: pa.Array) -> pa.Array:
    """Dictionary keys decoded, view and 64-bit-offset-free layouts cast to ones the
    kernels read."""
    if isinstance(key, pa.ChunkedArray):
        key = key.combine_chunks()
    t = key.type
    if pa.types.is_dictionary(t):
        key = key.dictionary_decode()
        t = key.type
    if pa.types.is_string_view(t):
        key = key.cast(pa.large_string())
    elif pa.types.is_binary_view(t):
        key = key.cast(pa.large_binary())
    return key


def _plain_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def key_kind(t: pa.DataType) -> str:
    """"int" (exact int64 values), "bytes" (offsets + data) or "arrow" (Arrow's index_in)."""
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_floating(t) or \
            pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t) or \
            pa.types.is_duration(t):
        return "int" if not pa.types.is_float16(t) else "arrow"
    if fits_int64(t):
        return "int"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or \
            pa.types.is_large_binary(t):
        return "bytes"
    return "arrow"


def validity(key: pa.Array) -> np.ndarray:
    if key.null_count == 0:
        return np.ones(len(key), dtype=bool)
    return np.asarray(key.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def fixed_width(key: pa.Array, dtype) -> np.ndarray:
    """The value buffer as numpy, zero copy (values under NULLs are arbitrary)."""
    return np.frombuffer(key.buffers()[1], dtype=dtype)[key.offset:key.offset + len(key)]


def one_byte_values(key: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """Each row's byte (uint8; zero copy for one chunk) when every value of a string or
    binary key without NULLs is one byte long, else None.

    One-letter flags (TPC-H's l_returnflag, l_linestatus, o_orderstatus) then number as
    small integers straight from their data buffers: packing them into int64 read and
    wrote 9 bytes a row per column, after combining the chunked strings (Q1 at one
    partition, cProfile: 15 ms packing, 4 combining). A NULL has no bytes in Arrow, so a
    key with NULLs takes the packed path."""
    if key.null_count:
        return None
    chunks = key.chunks if isinstance(key, pa.ChunkedArray) else [key]
    pieces = []
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        if key_kind(chunk.type) != "bytes":
            return None  # dictionary-encoded: decoded by the packed path
        offsets, data = byte_buffers(chunk, widen=False)
        width = known_width(chunk)  # as the scan decoded it: no pass over the offsets
        if (width if width is not None else common_width(offsets)) != 1:
            return None
        pieces.append(data[offsets[0]:offsets[0] + len(chunk)])
    if not pieces:
        return np.empty(0, np.uint8)
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


def _integer_key(key: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray] | None:
    """(integer values, validity) of an "int" kind key or a "bytes" one whose values are all
    short enough to pack (one-byte values as uint8, others int64); None for longer bytes."""
    if key_kind(_plain_type(key.type)) == "bytes":
        flags = one_byte_values(key)
        if flags is not None:
            return flags, np.ones(len(flags), dtype=bool)
    key = plain(key)
    valid = validity(key)
    if key_kind(key.type) == "int":
        return int_values(key), valid
    packed, short = pack_short_bytes(*byte_buffers(key, widen=False), valid)
    return (packed, valid) if short else None


def _joint_range_codes(keys: list) -> tuple[np.ndarray, int] | None:
    """(one int64 per row over several key columns, (v1 - low1) * width2 + (v2 - low2) ...
    (NULL the last value of its column), the codes' span) when every column is integer (or
    short bytes) and the joint span fits a range table (``key_range``); else None. Then the
    rows take one array-indexed numbering instead of one per column and another for the
    combination: TPC-H Q1's two flags. Each column costs its packing (strings), one pass for
    its range and one to add it in (compiled kernels)."""
    n = len(keys[0])
    if n == 0:
        return None
    columns, span = [], 1
    for key in keys:
        if key_kind(_plain_type(key.type)) not in ("int", "bytes"):
            return None
        pair = _integer_key(key)
        if pair is None:
            return None
        values, valid = pair
        if values.dtype == np.uint8:  # one-byte values, never NULL: numpy's SIMD min, max
            low, high, count = int(values.min()), int(values.max()), n
        else:
            low, high, count = valid_span(values, valid)
        width = high - low + 1 + (0 if count == n else 1)
        span *= width
        if span > MAX_RANGE_SLOTS or span > RANGE_SLOTS_PER_ROW * n + 1024:
            return None  # a range table would not take it: numbered column by column
        columns.append((values, valid, low, width))
    combined = np.empty(n, dtype=np.int32)  # below MAX_RANGE_SLOTS: half the bytes of int64
    for i, (values, valid, low, width) in enumerate(columns):
        add_joint_codes(combined, values, valid, low, width, i == 0)
    return combined, span


def int_values(key: pa.Array) -> np.ndarray:
    """An "int" kind key as exact int64 values (arbitrary where NULL)."""
    t = key.type
    if len(key) == 0:
        return np.empty(0, dtype=np.int64)
    if pa.types.is_boolean(t):
        return np.asarray(key.cast(pa.int8()).fill_null(0).to_numpy(), dtype=np.int64)
    if pa.types.is_floating(t):
        values = fixed_width(key, np.float64 if t.bit_width == 64 else np.float32)
        values = values.astype(np.float64) + 0.0  # -0.0 + 0.0 is 0.0: one key
        values[np.isnan(values)] = np.nan  # one NaN bit pattern
        return values.view(np.int64)
    if pa.types.is_decimal128(t):
        return unscaled(key)  # precision <= 18: the scaled integer
    if pa.types.is_integer(t):
        return fixed_width(key, t.to_pandas_dtype()).astype(np.int64, copy=False)
    return fixed_width(key, np.int64 if t.bit_width == 64 else np.int32).astype(
        np.int64, copy=False)


def byte_buffers(key: pa.Array, widen: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """A "bytes" kind key as (int64 offsets into data, uint8 data). ``widen`` False leaves
    a string array's int32 offsets as they are (no copy) for the kernels that only take
    differences of neighbouring offsets (``pack_short_bytes``, ``longest_bytes``): widening
    Q1's two flag columns cost about as much as packing them."""
    if len(key) == 0:
        return np.zeros(1, dtype=np.int64), np.empty(0, np.uint8)
    large = pa.types.is_large_string(key.type) or pa.types.is_large_binary(key.type)
    offsets = np.frombuffer(key.buffers()[1], dtype=np.int64 if large else np.int32)
    offsets = offsets[key.offset:key.offset + len(key) + 1]
    if widen:
        offsets = offsets.astype(np.int64, copy=False)
    data = key.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    return offsets, data


def short_bytes(key: pa.Array | pa.ChunkedArray) -> bool:
    """Whether every value of a "bytes" kind key is at most ``MAX_PACKED_BYTES`` long, so
    ``column_codes`` numbers it as packed integers (no byte hashing). A pass over the
    offsets only."""
    chunks = key.chunks if isinstance(key, pa.ChunkedArray) else [key]
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        if not (pa.types.is_string(chunk.type) or pa.types.is_binary(chunk.type) or
                pa.types.is_large_string(chunk.type) or pa.types.is_large_binary(chunk.type)):
            return False
        width = known_width(chunk)
        if width is not None:
            if width > MAX_PACKED_BYTES:
                return False
            continue
        offsets, _ = byte_buffers(chunk, widen=False)
        if longest_bytes(offsets) > MAX_PACKED_BYTES:
            return False
    return True


def column_codes(key: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """(code per row, number of codes) of an "int" or "bytes" kind key column, codes dense
    in order of first appearance, NULL the last code when present."""
    chunks = key.chunks if isinstance(key, pa.ChunkedArray) else [key]
    if key_kind(_plain_type(key.type)) == "int":
        # one int64 array made chunk by chunk: no combined copy of the column first
        pieces = [plain(chunk) for chunk in chunks]
        values = np.concatenate([int_values(p) for p in pieces]) if pieces else \
            np.empty(0, np.int64)
        valid = np.concatenate([validity(p) for p in pieces]) if pieces else \
            np.empty(0, bool)
        ids, _, uniques, _ = factorize_ints(values, valid)
        cardinality = len(uniques)
    elif (flags := one_byte_values(key)) is not None:  # numbered as small integers
        low = int(flags.min()) if len(flags) else 0
        high = int(flags.max()) if len(flags) else 0
        ids, cardinality = small_range_factorize(flags, low, high - low + 1)
    else:
        key = plain(key)
        valid = validity(key)
        offsets, data = byte_buffers(key, widen=False)
        packed, short = pack_short_bytes(offsets, data, valid)
        if short:  # every key fits an int64: numbered as integers (a range when they can)
            ids, _, uniques, _ = factorize_ints(packed, valid)
            cardinality = len(uniques)
        else:
            ids, _, first, _ = bytes_factorize(offsets.astype(np.int64, copy=False), data,
                                               valid)
            cardinality = len(first)
    if key.null_count:
        ids[~valid] = cardinality
        cardinality += 1
    return ids, cardinality


def group_ids(keys: list[pa.Array]) -> tuple[np.ndarray, int]:
    """(group id per row, number of groups) over the rows of the key columns (each "int"
    or "bytes" kind, equally long, at least one): equal rows share an id, NULLs equal.

    Example:
        >>> ids, groups = group_ids([pa.array([3, None, 3, 5]), pa.array(["a", "b", "a", "a"])])
        >>> ids.tolist(), groups
        ([0, 1, 0, 2], 3)
    """
    if len(keys) > 1:
        joint = _joint_range_codes(keys)
        if joint is not None:  # the codes lie in [0, span): numbered by an array directly
            codes, span = joint
            if span <= MAX_SMALL_RANGE_SLOTS:
                return small_range_factorize(codes, 0, span)
            ids, _, uniques = range_factorize(codes, np.ones(len(codes), dtype=bool), 0, span)
            return ids, len(uniques)
    codes, groups = column_codes(keys[0])
    if len(keys) == 1:
        return codes, groups
    everything = np.ones(len(codes), dtype=bool)
    for key in keys[1:]:
        more, cardinality = column_codes(key)
        if groups * cardinality >= MAX_CODE:  # renumber the occurring combinations first
            codes, _, uniques = int_factorize(codes, everything)
            groups = len(uniques)
        codes = codes * cardinality + more
        groups *= cardinality
    ids, _, uniques, _ = factorize_ints(codes, everything)
    return ids, len(uniques)
