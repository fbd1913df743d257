"""The hash join's build-side index: key groups numbered densely, probed batch by batch.

    build key columns ──per column: factorize (hash table)──▶ codes ─┐
                      ──combine columns (c₁·k₂ + c₂ ...)──▶ one int64 ┤──factorize──▶ group id
    group ids ──counting sort──▶ (starts, counts, order): each group's build rows, chained
    probe key columns ──per column: lookup──▶ codes ──combine──▶ lookup ──▶ group id or -1
                                                                 └──expand──▶ pairs

Keys decide with integers (principle 4). Each key column becomes exact int64 values
(integers, dates, times, decimals up to 18 digits as scaled integers, floats as canonical
bits: -0.0 is 0.0 and every NaN one NaN) or bytes (strings, binary), numbered by a numba
hash table (kernels/hash_table.py) built once per join; the probe looks each batch up in it,
releasing the GIL. Several columns combine arithmetically into one code, renumbered through
another table before the code space could overflow int64. Other key types fall back to
Arrow's ``index_in``, which rebuilds its hash set per call, so the join then probes with
large batches (``needs_large_probes``).

NULL keys never match, except where NULLs are equal (INTERSECT/EXCEPT): NULL is then one
more code.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.kernels.decimal import fits_int64, unscaled
from plansight.engine.kernels.hash_table import (
    bytes_factorize,
    bytes_lookup,
    expand,
    group_rows,
    int_factorize,
    int_lookup,
)

_MAX_CODE = 1 << 62


def _plain(key: pa.Array) -> pa.Array:
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


def _validity(key: pa.Array) -> np.ndarray:
    if key.null_count == 0:
        return np.ones(len(key), dtype=bool)
    return np.asarray(key.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _fixed_width(key: pa.Array, dtype) -> np.ndarray:
    """The value buffer as numpy, zero copy (values under NULLs are arbitrary)."""
    return np.frombuffer(key.buffers()[1], dtype=dtype)[key.offset:key.offset + len(key)]


def int_values(key: pa.Array) -> np.ndarray:
    """An "int" kind key as exact int64 values (arbitrary where NULL)."""
    t = key.type
    if len(key) == 0:
        return np.empty(0, dtype=np.int64)
    if pa.types.is_boolean(t):
        return np.asarray(key.cast(pa.int8()).fill_null(0).to_numpy(), dtype=np.int64)
    if pa.types.is_floating(t):
        values = _fixed_width(key, np.float64 if t.bit_width == 64 else np.float32)
        values = values.astype(np.float64) + 0.0  # -0.0 + 0.0 is 0.0: one key
        values[np.isnan(values)] = np.nan  # one NaN bit pattern
        return values.view(np.int64)
    if pa.types.is_decimal128(t):
        return unscaled(key)  # precision <= 18: the scaled integer
    if pa.types.is_integer(t):
        return _fixed_width(key, t.to_pandas_dtype()).astype(np.int64, copy=False)
    return _fixed_width(key, np.int64 if t.bit_width == 64 else np.int32).astype(
        np.int64, copy=False)


def byte_buffers(key: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A "bytes" kind key as (int64 offsets into data, uint8 data)."""
    if len(key) == 0:
        return np.zeros(1, dtype=np.int64), np.empty(0, np.uint8)
    large = pa.types.is_large_string(key.type) or pa.types.is_large_binary(key.type)
    offsets = np.frombuffer(key.buffers()[1], dtype=np.int64 if large else np.int32)
    offsets = offsets[key.offset:key.offset + len(key) + 1].astype(np.int64)
    data = key.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    return offsets, data


class ColumnLookup:
    """One key column's distinct build values, numbered 0..cardinality-1.

    ``build_codes`` are the build rows' codes (-1: NULL that matches nothing); ``codes``
    maps probe values onto them.
    """

    def __init__(self, key: pa.Array, null_equal: bool):
        key = _plain(key)
        self.type, self.kind = key.type, key_kind(key.type)
        self.needs_large_probes = self.kind == "arrow"
        self.null_code: int | None = None
        if self.kind == "arrow":
            canonical = pc.add(key, 0.0) if pa.types.is_floating(key.type) else key
            self.uniques = pc.unique(canonical.drop_null()) \
                if key.null_count and not null_equal else pc.unique(canonical)
            self.cardinality = len(self.uniques)
            self.build_codes = self._arrow_codes(key)
            return
        valid = _validity(key)
        if self.kind == "int":
            ids, self.table, _ = int_factorize(int_values(key), valid)
        else:
            self.build_buffers = byte_buffers(key)
            self.build_array = key  # keeps the buffers the table refers to alive
            ids, self.slots, self.first, self.hashes = bytes_factorize(*self.build_buffers,
                                                                       valid)
        self.cardinality = int(ids.max()) + 1 if len(ids) else 0
        if null_equal and key.null_count:
            self.null_code = self.cardinality
            self.cardinality += 1
            ids[~valid] = self.null_code
        self.build_codes = ids

    def _arrow_codes(self, key: pa.Array) -> np.ndarray:
        canonical = pc.add(key, 0.0) if pa.types.is_floating(key.type) else key
        c = pc.index_in(canonical, value_set=self.uniques)
        return np.asarray(c.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)

    def lookup(self, key: pa.Array) -> np.ndarray:
        """The build code of each probe value, -1 where it has none."""
        key = _plain(key)
        if key.type != self.type:
            key = key.cast(self.type)  # the binder gives both sides one type; be safe
        if self.kind == "arrow":
            return self._arrow_codes(key)
        valid = _validity(key)
        if self.cardinality == 0:
            return np.full(len(key), -1, dtype=np.int64)
        if self.kind == "int":
            ids = int_lookup(int_values(key), valid, self.table)
        else:
            offsets, data = byte_buffers(key)
            ids = bytes_lookup(offsets, data, valid, self.slots, self.first, self.hashes,
                               *self.build_buffers)
        if self.null_code is not None and key.null_count:
            ids[~valid] = self.null_code
        return ids


class KeyIndex:
    """Build-side key groups, and the mapping of probe keys onto them."""

    def __init__(self, keys: list[pa.Array], null_equal: bool = False):
        self.lookups = [ColumnLookup(key, null_equal) for key in keys]
        self.needs_large_probes = any(lk.needs_large_probes for lk in self.lookups)
        self._space = 1  # size of the combined code space so far
        codes = None
        # per combining step: the table that renumbered the combined codes, or None
        self.compress: list[np.ndarray | None] = []
        valid = np.ones(len(keys[0]) if keys else 0, dtype=bool)
        for lookup in self.lookups:
            c = lookup.build_codes
            valid &= c >= 0
            codes, compress = self._combine(codes, np.maximum(c, 0), valid, lookup.cardinality)
            self.compress.append(compress)
        codes = np.where(valid, codes, -1) if codes is not None else np.empty(0, np.int64)
        self.dense: np.ndarray | None = None  # table numbering the combined codes
        if len(keys) > 1:
            # combined codes are sparse in a product space: number the ones that occur
            codes, self.dense, uniques = int_factorize(codes, valid)
            groups = len(uniques)
        else:
            groups = self.lookups[0].cardinality if keys else 0
        self.has_null_key = not bool(valid.all())
        self.num_rows = len(codes)
        self.starts, self.counts, self.order = group_rows(codes, groups)
        # every key on one build row (a dimension table's primary key): a probe row has
        # at most one match, found by one gather instead of expanding groups
        self.build_row = self.order if groups and len(self.order) == groups else None

    def matches(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probe row, build row) pairs for probe rows with these group codes (-1: none)."""
        if self.build_row is None:
            return expand(codes, self.starts, self.counts, self.order)
        hit = codes >= 0
        if hit.all():
            return np.arange(len(codes)), self.build_row[codes]
        probe_idx = np.flatnonzero(hit)
        return probe_idx, self.build_row[codes[probe_idx]]

    def _combine(self, codes, c, valid, card):
        """Fold one more key column's codes into the combined codes, renumbering them
        densely (and keeping the numbering's table) before the space could overflow."""
        if codes is None:
            self._space = max(card, 1)
            return c, None
        combined = codes * card + c
        if self._space * card < _MAX_CODE:
            self._space *= card
            return combined, None
        ids, table, uniques = int_factorize(combined, valid)
        self._space = max(len(uniques), 1)
        return np.maximum(ids, 0), table

    def probe_codes(self, keys: list[pa.Array]) -> tuple[np.ndarray, np.ndarray]:
        """(group code per probe row or -1, mask of probe rows with a NULL key)."""
        n = len(keys[0])
        null_key = np.zeros(n, dtype=bool)
        for key in keys:
            if key.null_count:
                null_key |= np.asarray(key.is_null().to_numpy(zero_copy_only=False), bool)
        if not self.lookups:
            return np.full(n, -1, dtype=np.int64), null_key
        if len(self.lookups) == 1:
            return self.lookups[0].lookup(keys[0]), null_key
        codes = None
        found = np.ones(n, dtype=bool)
        for key, lookup, compress in zip(keys, self.lookups, self.compress):
            c = lookup.lookup(key)
            found &= c >= 0
            c = np.maximum(c, 0)
            if codes is None:
                codes = c
                continue
            codes = codes * lookup.cardinality + c
            if compress is not None:
                ids = int_lookup(codes, found, compress)
                found &= ids >= 0
                codes = np.maximum(ids, 0)
        if self.dense is None or self.num_rows == 0:
            return np.full(n, -1, dtype=np.int64), null_key
        return int_lookup(codes, found, self.dense), null_key
