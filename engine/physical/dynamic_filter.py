"""Dynamic filters: a range (and maybe a key set) on one column, known only while running.

    SortExec TopK(k) ──threshold after each cut──────────────┐
    HashJoinExec build ──min/max of build keys, and the set──┤
                         of keys when it has few distinct,   │
                         a bitmap of them when they are many │
                         integers                            ▼
    DataSourceExec: skip row groups whose min/max statistics fall outside the range or contain
    none of the keys; drop the rows of each batch that fall outside (``pc.is_in`` against the
    key set, a bit test against the bitmap), before anything above sees them.

The bitmap (``KeyBitmap``) is what carries a *reduced* key set into a big scan: Q21's 70K
orders that survive the filtered supplier join, Q8's 1,451 parts of one type. Their range is
nearly the whole key domain, so min/max alone would drop nothing.

Only rows that could never reach the output are dropped: a top-k keeps ties (the bound is
inclusive) and NULLs are never filtered by a top-k bound (they may sort first); a join
filter is attached only to joins that drop unmatched probe rows, and NULL probe keys pass
only for null-safe (INTERSECT/EXCEPT) joins.

A join's filter is complete only when every build side that feeds it has published: one for
a collect-left join, one per partition for a partitioned join (each partition's build holds
only the keys hashed to it; the scan feeds all partitions, so it needs their union). Until
then the filter stays inactive and the scan reads everything.

A multi-column join key gets one filter per column, each with that column's own keys: a row
must match every column, so each column's filter alone drops only rows that cannot match.
Float keys publish only a range: a key set would compare bits (-0.0 is not 0.0, NaN joins NaN).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.kernels.membership import distinct_in_range
from plansight.engine.logical.expr import sql_value
from plansight.engine.physical.key_bitmap import KeyBitmap

#: a key set whose integers span fewer values than this also gets a bitmap (1 MiB, built in
#: ~1.5 ms; Q18's 57 orders of 6M: 0.06 ms per 65,536-row batch, is_in 0.8 ms)
KEY_SET_BITMAP_BITS = 1 << 23


class DynamicFilter:
    """``low <= column <= high`` with bounds that only ever tighten (either may be None)."""

    def __init__(self, origin: str, keep_nulls: bool, max_keys: int = 1024,
                 max_bitmap_bits: int = 0):
        # a build side with at most ``max_keys`` distinct keys publishes them as a set; is_in
        # against a set this small costs about as much as the range comparisons it replaces.
        # More distinct integer keys spanning at most ``max_bitmap_bits`` values publish a
        # bitmap of them (0: never)
        self.origin, self.keep_nulls, self.max_keys = origin, keep_nulls, max_keys
        self.max_bitmap_bits = max_bitmap_bits
        self.low: Any = None
        self.high: Any = None
        self.empty = False  # e.g. an empty join build side: nothing can match
        self.key_set: pa.Array | None = None  # sorted distinct non-NULL keys, when few
        self._sorted_keys: np.ndarray | None = None  # the same as Python values, for stats
        self._cast_keys: dict = {}  # key_set cast to a probe column's type
        self._dense_set = False  # key_set is every integer from low to high
        self.bitmap: KeyBitmap | None = None  # integer keys: too many for a set, or a set's
        self.complete = False  # every build side has published: it never changes this run
        self.run: Any = None  # the TaskContext whose bounds these are
        # reentrant: a commit tightens under the lock that makes publishing atomic
        self._lock = threading.RLock()
        self._builds: dict = {}  # build keys published so far in this run, by build id

    def __getstate__(self) -> dict:
        # bounds belong to one run on one machine: a plan shipped to a worker carries an
        # inactive filter (its scan reads everything until a build there publishes)
        return {"origin": self.origin, "keep_nulls": self.keep_nulls,
                "max_keys": self.max_keys, "max_bitmap_bits": self.max_bitmap_bits}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["origin"], state["keep_nulls"], state["max_keys"],
                      state.get("max_bitmap_bits", 0))

    def start(self, ctx: Any) -> None:
        """Forget bounds from an earlier run of the same plan."""
        with self._lock:
            if self.run is not ctx:
                self.run, self.low, self.high, self.empty = ctx, None, None, False
                self.key_set, self._sorted_keys, self._cast_keys = None, None, {}
                self._dense_set, self.bitmap, self.complete = False, None, False
                self._builds = {}

    def applies_to(self, ctx: Any) -> bool:
        return self.run is ctx and self.active

    @property
    def active(self) -> bool:
        return self.empty or self.low is not None or self.high is not None or \
            self.key_set is not None or self.bitmap is not None

    def publish_build_keys(self, keys: pa.Array, build: int = 0, builds: int = 1) -> None:
        """Build side ``build`` of ``builds`` has these join keys (NULLs included).

        The filter takes effect once all ``builds`` have published, with the union of their
        keys: no range or set from a part of the build side may drop a probe row.
        """
        if self.has_published(build):
            return
        summary = KeySummary(keys.type, self.max_keys, self.max_bitmap_bits)
        summary.add(keys)
        summary = summary.result()
        with self._lock:
            if build in self._builds:
                return  # a collect-left build is published by every probe partition
            self._builds[build] = summary
            if len(self._builds) == builds:
                # under the lock: whoever sees this build published sees the filter complete
                self._commit(list(self._builds.values()), keys.type)

    def install(self, parts: list[dict], key_type: pa.DataType, ctx: Any) -> None:
        """Make this filter complete for run ``ctx`` from ``parts`` (``KeySummary.result``
        of every piece of the build side), summarized elsewhere: on a cluster, by the
        writers of the stage that feeds the join's build side (see distributed.stages)."""
        with self._lock:
            self.start(ctx)
            self._builds = dict(enumerate(parts))
            self._commit(parts, key_type)

    def has_published(self, build: int = 0) -> bool:
        """Whether build side ``build`` has published its keys in this run."""
        with self._lock:
            return build in self._builds

    def _commit(self, parts: list[dict], key_type: pa.DataType) -> None:
        self._fill(parts, key_type)
        self.complete = True

    def _fill(self, parts: list[dict], key_type: pa.DataType) -> None:
        present = [p for p in parts if p["rows"]]
        if not present:
            if self.keep_nulls:  # only NULL probe keys can match (null-safe join)
                self._set_keys(pa.array([], key_type))
            else:
                self.empty = True
            return
        sets = [p["set"] for p in present]
        if all(s is not None for s in sets):
            keys = pc.unique(pa.concat_arrays(sets)) if len(sets) > 1 else sets[0]
            if len(keys) <= self.max_keys:
                self._set_keys(keys)
        if self.key_set is None:
            self._set_bitmap(present)
        try:
            self.tighten(min(p["low"] for p in present), max(p["high"] for p in present))
        except TypeError:
            pass  # incomparable statistics values: the set (if any) still applies

    def _set_bitmap(self, parts: list[dict]) -> None:
        """A bitmap of the union of the parts' keys, when they are integers within reach and
        leave gaps in their range (keys filling it say no more than the range)."""
        keys = [p["set"] if p["set"] is not None else p["integers"] for p in parts]
        if any(k is None or not pa.types.is_integer(k.type) for k in keys):
            return
        low, high = min(p["low"] for p in parts), max(p["high"] for p in parts)
        if high - low + 1 > self.max_bitmap_bits:
            return
        values = np.concatenate([k.to_numpy().astype(np.int64, copy=False) for k in keys])
        # each part's keys are distinct and the parts disjoint (one per hash partition of
        # the build), so as many values as the range has room for fill it
        if len(values) >= high - low + 1:
            return
        self.bitmap = KeyBitmap(values)

    def _set_keys(self, keys: pa.Array) -> None:
        keys = keys.take(pc.sort_indices(keys))
        # distinct integers filling [min, max] (a dimension's 1..n ids): the set says no
        # more than the range, whose test can clear a whole batch by its min/max alone
        dense = pa.types.is_integer(keys.type) and len(keys) > 0 and \
            keys[-1].as_py() - keys[0].as_py() + 1 == len(keys)
        # integer keys test faster against a bitmap of their range than hashed by is_in
        # (Q19's 485 parts of 200K: a bit per part number)
        bitmap = KeyBitmap(keys.to_numpy()) if not dense and len(keys) and \
            pa.types.is_integer(keys.type) and not pa.types.is_uint64(keys.type) and \
            keys[-1].as_py() - keys[0].as_py() < min(self.max_bitmap_bits, KEY_SET_BITMAP_BITS) \
            else None
        with self._lock:
            self._sorted_keys = np.array(keys.to_pylist() + [None], dtype=object)[:-1]
            self.key_set = keys
            self._dense_set = dense
            self.bitmap = bitmap

    def tighten(self, low: Any = None, high: Any = None) -> None:
        with self._lock:
            if low is not None and (self.low is None or low > self.low):
                self.low = low
            if high is not None and (self.high is None or high < self.high):
                self.high = high

    def unit_may_match(self, stats: tuple[Any, Any, int | None] | None) -> bool:
        """False only when row-group statistics prove no row can pass."""
        if self.empty:
            return False
        if stats is None:
            return True
        low, high, nulls = stats
        if (nulls is None or nulls) and self.keep_nulls:
            return True
        if isinstance(low, float) or isinstance(high, float):
            return True  # float statistics leave NaN out, and NaN equals NaN in SQL joins
        try:
            if self.high is not None and low > self.high:
                return False
            if self.low is not None and high < self.low:
                return False
            keys = self._sorted_keys
            if keys is not None:
                # the first key >= low must exist and be <= high
                at = int(np.searchsorted(keys, low, side="left"))
                return at < len(keys) and keys[at] <= high
            if self.bitmap is not None and isinstance(low, int) and isinstance(high, int):
                return self.bitmap.any_between(low, high)
        except TypeError:
            return True
        return True

    def mask(self, column: pa.Array) -> pa.Array | None:
        """Rows of ``column`` that may pass (None: all of them)."""
        if not self.active:
            return None
        if self.empty:
            return pa.repeat(pa.scalar(False), len(column))
        if self.bitmap is not None and pa.types.is_integer(column.type) and \
                not pa.types.is_uint64(column.type):
            return self._bitmap_mask(column)
        if self.key_set is not None and not (self._dense_set and self.low is not None):
            keys = self._keys_as(column.type)
            if keys is not None:
                return self._key_set_mask(column, keys)
        low, high = self.low, self.high
        keep = None
        try:
            if column.null_count == 0 and not pa.types.is_floating(column.type):
                present = pc.min_max(column)
                lo, hi = present["min"].as_py(), present["max"].as_py()
                if lo is not None and (low is None or lo >= low) and \
                        (high is None or hi <= high):
                    return None  # the whole batch is inside: nothing to drop
            if low is not None:
                keep = pc.greater_equal(column, pa.scalar(low, column.type))
            if high is not None:
                upper = pc.less_equal(column, pa.scalar(high, column.type))
                keep = upper if keep is None else pc.and_(keep, upper)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        if keep is None:
            return None
        if pa.types.is_floating(column.type):
            keep = pc.or_(keep, pc.is_nan(column))  # NaN compares false but joins NaN
        return pc.fill_null(keep, self.keep_nulls)

    def _keys_as(self, type: pa.DataType) -> pa.Array | None:
        """The key set as ``type`` (None when it does not cast exactly: the range applies)."""
        keys = self._cast_keys.get(type)
        if keys is None:
            try:
                keys = self.key_set.cast(type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                return None
            self._cast_keys[type] = keys
        return keys

    def _key_set_mask(self, column: pa.Array, keys: pa.Array) -> pa.Array | None:
        """Rows whose key is one of the build keys (and NULLs for null-safe joins)."""
        keep = pc.is_in(column, value_set=keys, skip_nulls=True)
        if self.keep_nulls and column.null_count:
            keep = pc.or_(keep, pc.is_null(column))
        return None if pc.all(keep).as_py() is not False else keep

    def _bitmap_mask(self, column: pa.Array) -> pa.Array | None:
        keep, kept = self.bitmap.contains_counted(column)
        if self.keep_nulls and column.null_count:
            keep = pc.or_(keep, pc.is_null(column))
            kept += column.null_count
        return None if kept == len(column) else keep

    def describe(self) -> str:
        bounds = [f">= {sql_value(self.low)}" if self.low is not None else "",
                  f"<= {sql_value(self.high)}" if self.high is not None else ""]
        if self.key_set is not None:
            bounds.append(f"IN ({len(self.key_set)} keys)")
        elif self.bitmap is not None:
            bounds.append("IN (key bitmap)")
        text = " AND ".join(b for b in bounds if b) or "pending"
        return f"{self.origin}: {'empty' if self.empty else text}"


class KeySummary:
    """What a build side tells its dynamic filter, gathered batch by batch: row count, min,
    max, and its distinct keys while they can still become a key set (at most ``max_keys``)
    or a bitmap (integers spanning at most ``max_bitmap_bits`` values); NULLs left out.

    ``result()`` is one part for ``DynamicFilter`` (the union of all parts is the build
    side's keys). Distinct keys are deduplicated per batch and again whenever they pass
    ``max_keys``, and dropped for good once neither a set nor a bitmap can hold them, so a
    summary never holds more than the filter could use.

    Example:
        >>> summary = KeySummary(pa.int64(), max_keys=2)
        >>> summary.add(pa.array([3, 1, None, 3]))
        >>> summary.add(pa.array([2]))
        >>> part = summary.result()
        >>> part["rows"], part["low"], part["high"], part["set"], part["integers"]
        (4, 1, 3, None, None)
    """

    def __init__(self, key_type: pa.DataType, max_keys: int = 1024, max_bitmap_bits: int = 0):
        self.key_type, self.max_keys, self.max_bitmap_bits = key_type, max_keys, max_bitmap_bits
        self.rows = 0
        self.low: Any = None
        self.high: Any = None
        self.comparable = True
        # distinct keys so far (None: too many for a set or a bitmap, or floats)
        self.distinct: list[pa.Array] | None = \
            None if pa.types.is_floating(key_type) else []
        self.distinct_count = 0

    def add(self, keys: pa.Array) -> None:
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        keys = keys.drop_null()
        if not len(keys):
            return
        self.rows += len(keys)
        bounds = pc.min_max(keys)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        try:
            self.low = low if self.low is None or low < self.low else self.low
            self.high = high if self.high is None or high > self.high else self.high
        except TypeError:
            self.comparable = False
        if self.distinct is None:
            return
        unique = self._distinct_in_range(keys, low, high)
        if unique is None:
            unique = pc.unique(keys)
        self.distinct.append(unique)
        self.distinct_count += len(unique)
        if self.distinct_count > self.max_keys:
            if len(self.distinct) > 1:
                merged = pc.unique(pa.concat_arrays(self.distinct))
                self.distinct, self.distinct_count = [merged], len(merged)
            if self.distinct_count > self.max_keys and not self._bitmap_fits():
                self.distinct = None

    def _distinct_in_range(self, keys: pa.Array, low: Any, high: Any) -> pa.Array | None:
        """The distinct integer ``keys`` (no NULLs, in [low, high]) in order of first
        appearance, as pc.unique gives them, by flags over their range (kernels/
        membership.py), when that range could hold a key bitmap and is at most ~64 values a
        key; else None (hash them). A build side's keys are summarized on one thread before
        its probe starts, and Arrow's hash unique takes ~40 ns a key there (TPC-H Q3's and
        Q7's builds: ~17 ms a query)."""
        t = self.key_type
        if not pa.types.is_integer(t) or pa.types.is_uint64(t) or low is None:
            return None
        span = high - low + 1
        if span > self.max_bitmap_bits or span > 64 * len(keys) + 4096:
            return None
        values = keys.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        distinct = distinct_in_range(values, low, span)
        return pa.array(distinct.astype(t.to_pandas_dtype(), copy=False), t)

    def _bitmap_fits(self) -> bool:
        return self.comparable and pa.types.is_integer(self.key_type) and \
            not pa.types.is_uint64(self.key_type) and self.low is not None and \
            self.high - self.low + 1 <= self.max_bitmap_bits

    def result(self) -> dict:
        """This build side as one part of a dynamic filter (see ``DynamicFilter``)."""
        part = {"rows": self.rows, "low": None, "high": None, "set": None, "integers": None}
        if not self.rows:
            return part
        if self.comparable:
            part["low"], part["high"] = self.low, self.high
        if self.distinct is not None:
            keys = self.distinct[0] if len(self.distinct) == 1 else \
                pc.unique(pa.concat_arrays(self.distinct))
            if len(keys) <= self.max_keys:
                part["set"] = keys
            elif self._bitmap_fits():
                part["integers"] = keys
        return part
