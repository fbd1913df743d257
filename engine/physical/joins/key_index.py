"""The hash join's build-side index: key groups numbered densely, probed batch by batch.

    build key columns ──per column: factorize (hash table)──▶ codes ─┐
                      ──combine columns (c₁·k₂ + c₂ ...)──▶ one int64 ┤──factorize──▶ group id
    group ids ──counting sort──▶ (starts, counts, order): each group's build rows, chained
    probe key columns ──per column: lookup──▶ codes ──combine──▶ lookup ──▶ group id or -1
                                                                 └──expand──▶ pairs

Keys decide with integers (principle 4). Each key column becomes exact int64 values
(integers, dates, times, decimals up to 18 digits as scaled integers, floats as canonical
bits: -0.0 is 0.0 and every NaN one NaN) or bytes (strings, binary), numbered by a numba
hash table (kernels/hash_table.py) built once per join, or by an array indexed by the key
when the keys lie in a narrow range (keys.py: surrogate keys skip hashing); the probe looks
each batch up in it, releasing the GIL. Several columns combine arithmetically into one
code, renumbered through another table before the code space could overflow int64. Other
key types fall back to
Arrow's ``index_in``, which rebuilds its hash set per call, so the join then probes with
large batches (``needs_large_probes``).

NULL keys never match, except where NULLs are equal (INTERSECT/EXCEPT): NULL is then one
more code.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.kernels.hash_table import (
    bytes_factorize,
    bytes_lookup,
    expand,
    group_rows,
    int_factorize,
    int_lookup,
    match_counts,
)
from plansight.engine.kernels.keys import (
    MAX_CODE,
    byte_buffers,
    factorize_ints,
    int_values,
    key_kind,
    lookup_ints,
    plain,
    validity,
)

_MAX_CODE = MAX_CODE  # its own name: tests force the renumbering path by lowering it


class ColumnLookup:
    """One key column's distinct build values, numbered 0..cardinality-1.

    ``build_codes`` are the build rows' codes (-1: NULL that matches nothing; KeyIndex drops
    them once it has grouped the rows); ``codes`` maps probe values onto them.
    """

    def __init__(self, key: pa.Array, null_equal: bool):
        key = plain(key)
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
        valid = validity(key)
        if self.kind == "int":
            ids, self.table, _, self.low = factorize_ints(int_values(key), valid)
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
        key = plain(key)
        if key.type != self.type:
            key = key.cast(self.type)  # the binder gives both sides one type; be safe
        if self.kind == "arrow":
            return self._arrow_codes(key)
        valid = validity(key)
        if self.cardinality == 0:
            return np.full(len(key), -1, dtype=np.int64)
        if self.kind == "int":
            ids = lookup_ints(int_values(key), valid, self.table, self.low)
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
        if len(self.lookups) == 1:
            # one column: its codes are the groups already (-1 exactly where invalid)
            codes = self.lookups[0].build_codes
            valid = codes >= 0
            self._space = max(self.lookups[0].cardinality, 1)
            self.compress.append(None)
        else:
            for lookup in self.lookups:
                c = lookup.build_codes
                valid &= c >= 0
                codes, compress = self._combine(codes, np.maximum(c, 0), valid,
                                                lookup.cardinality)
                self.compress.append(compress)
            codes = np.where(valid, codes, -1) if codes is not None else np.empty(0, np.int64)
        for lookup in self.lookups:
            lookup.build_codes = None  # grouped below; the index holds only what probes need
        self.dense: np.ndarray | None = None  # table numbering the combined codes
        self.dense_low: int | None = None
        if len(keys) > 1:
            # combined codes are sparse in a product space: number the ones that occur
            codes, self.dense, uniques, self.dense_low = factorize_ints(codes, valid)
            groups = len(uniques)
        else:
            groups = self.lookups[0].cardinality if keys else 0
        self.has_null_key = not bool(valid.all())
        self.matchable = bool(valid.any())  # some build row a probe key can equal
        self.num_rows = len(codes)
        self.starts, self.counts, self.order = group_rows(codes, groups)
        del codes
        # every key on one build row (a dimension table's primary key): a probe row has
        # at most one match, found by one gather instead of expanding groups; the group
        # starts and counts (all 1) are not kept: 16 bytes per build row
        self.build_row = self.order if groups and len(self.order) == groups else None
        if self.build_row is not None:
            self.starts = self.counts = None

    def match_counts(self, codes: np.ndarray) -> np.ndarray:
        """The number of build rows each probe row's group code (-1: none) matches."""
        if self.build_row is not None:
            return (codes >= 0).astype(np.int64)
        return match_counts(codes, self.counts)

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
        return lookup_ints(codes, found, self.dense, self.dense_low), null_key
