"""HashJoinExec: equi-join by integer key codes (collect-left: build on the left child).

    build (left, collected)              probe (right, streamed batch by batch)
    key columns ──factorize──▶ codes      key columns ──index into build's uniques──▶ codes
    argsort(codes) → groups (start,count)          │
                          └──────── expand_matches ┘──▶ (probe row, build row) pairs
                                                        └─▶ JoinAssembler
                                                            (filter, outer, semi, anti)

Keys decide with integers (principle 4): each key column is factorized against the build
side's distinct values (``pc.index_in``), multi-column keys are combined arithmetically and
re-densified when the code space would overflow. NULL keys never match.

A build side the pool refuses (or that outgrows its share of the pool) spills: the join
becomes a grace hash join, both sides split into hash buckets joined one at a time
(join_spill). In collect-left mode the shared build spills its buckets once; each probe
partition splits its own probe rows and reads every build bucket under its own reservation.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.exec.spill import spill_manager
from plansight.engine.logical.expr import Expr
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.joins.build import SharedBuild
from plansight.engine.physical.joins.output import JoinAssembler, expand_matches, join_schema
from plansight.engine.physical.joins.spill import GraceHashJoin, SpilledBuild, collect_build
from plansight.engine.physical.plan import (
    SINGLE_PARTITION,
    UNSPECIFIED,
    ExecutionPlan,
    Partitioning,
    hash_distribution,
)
from plansight.engine.physical.vocabulary import JoinType

_MAX_CODE = 1 << 62


def _canonical(key: pa.Array) -> pa.Array:
    """-0.0 and 0.0 are one key (SQL equality); Arrow's hashing tells their bits apart."""
    return pc.add(key, 0.0) if pa.types.is_floating(key.type) else key


def _integer_values(key: pa.Array) -> np.ndarray | None:
    """The key as int64 numbers (NULLs as 0) when its type is integer-like, else None."""
    t = key.type
    if pa.types.is_integer(t):
        return np.asarray(key.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    if pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t) or \
            pa.types.is_duration(t):
        as_int = key.view(pa.int64() if t.bit_width == 64 else pa.int32())
        return np.asarray(as_int.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    return None


class ColumnLookup:
    """One key column's distinct build values, built once and probed by every batch.

    Integer-like keys keep the sorted distinct values in numpy and probe with searchsorted;
    other types use Arrow's ``index_in``, which rebuilds its hash set per call, so the join
    coalesces probe batches for them (``needs_large_probes``).
    """

    def __init__(self, key: pa.Array, null_equal: bool):
        key = _canonical(key)
        values = _integer_values(key) if not (null_equal and key.null_count) else None
        self.needs_large_probes = values is None
        self.dense_table: np.ndarray | None = None
        if values is not None:
            valid = np.asarray(key.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            self.sorted = np.unique(values[valid])
            self.cardinality = len(self.sorted)
            if self.cardinality:
                low, span = int(self.sorted[0]), int(self.sorted[-1]) - int(self.sorted[0]) + 1
                if span <= max(4 * self.cardinality, 1 << 16) and span <= 1 << 24:
                    # compact key range: a direct table maps value - low to its code in O(1)
                    self.low = low
                    self.dense_table = np.full(span, -1, dtype=np.int64)
                    self.dense_table[self.sorted - low] = np.arange(self.cardinality)
        else:
            self.uniques = pc.unique(key.drop_null()) if key.null_count and not null_equal \
                else pc.unique(key)
            self.cardinality = len(self.uniques)

    def codes(self, key: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(code per row, mask of rows whose value exists on the build side)."""
        key = _canonical(key)
        if not self.needs_large_probes:
            values = _integer_values(key)
            if self.cardinality == 0:
                return np.zeros(len(key), np.int64), np.zeros(len(key), dtype=bool)
            if self.dense_table is not None:
                offset = values - self.low
                inside = (offset >= 0) & (offset < len(self.dense_table))
                codes = self.dense_table[np.where(inside, offset, 0)]
                found = inside & (codes >= 0)
                if key.null_count:
                    found &= np.asarray(key.is_valid().to_numpy(zero_copy_only=False), bool)
                return np.maximum(codes, 0), found
            position = np.minimum(np.searchsorted(self.sorted, values), self.cardinality - 1)
            found = self.sorted[position] == values
            if key.null_count:
                found &= np.asarray(key.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            return position.astype(np.int64), found
        c = pc.index_in(key, value_set=self.uniques)
        found = np.asarray(c.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        return np.asarray(c.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64), found


class KeyIndex:
    """Build-side key groups, and the mapping of probe keys onto them."""

    def __init__(self, keys: list[pa.Array], null_equal: bool = False):
        self.lookups = [ColumnLookup(key, null_equal) for key in keys]
        self.needs_large_probes = any(lk.needs_large_probes for lk in self.lookups)
        self._space = 1  # size of the combined code space so far
        codes = None
        self.compress: list[np.ndarray | None] = []
        valid = np.ones(len(keys[0]) if keys else 0, dtype=bool)
        for key, lookup in zip(keys, self.lookups):
            c, found = lookup.codes(key)
            valid &= found
            codes, compress = self._combine(codes, c, lookup.cardinality)
            self.compress.append(compress)
        codes = np.where(valid, codes, -1) if codes is not None else np.empty(0, np.int64)
        self.dense: np.ndarray | None = None
        if len(keys) > 1 and len(codes):
            # combined codes are sparse in a product space: renumber the ones that occur
            self.dense, inverse = np.unique(codes[codes >= 0], return_inverse=True)
            dense_codes = np.full(len(codes), -1, dtype=np.int64)
            dense_codes[codes >= 0] = inverse
            codes = dense_codes
        self.has_null_key = not bool(valid.all())
        self.num_rows = len(codes)
        groups = int(codes.max()) + 1 if len(codes) and codes.max() >= 0 else 0
        self.order = np.argsort(codes, kind="stable")
        nulls = int((codes < 0).sum())
        self.counts = np.bincount(codes[codes >= 0], minlength=groups)
        self.starts = nulls + np.cumsum(self.counts) - self.counts
        # every key on one build row (a dimension table's primary key): a probe row has at
        # most one match, found by one gather instead of expand_matches' repeat and cumsum
        self.build_row = self.order[self.starts] if groups and \
            self.counts.min() == 1 and self.counts.max() == 1 else None

    def matches(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probe row, build row) pairs for probe rows with these group codes (-1: none)."""
        if self.build_row is None:
            return expand_matches(codes, self.starts, self.counts, self.order)
        hit = codes >= 0
        if hit.all():
            return np.arange(len(codes)), self.build_row[codes]
        probe_idx = np.flatnonzero(hit)
        return probe_idx, self.build_row[codes[probe_idx]]

    def _combine(self, codes, c, card):
        """Fold one more key column's codes into the combined codes, renumbering them
        densely (and remembering how) before the code space could overflow int64."""
        if codes is None:
            self._space = max(card, 1)
            return c, None
        combined = codes * card + c
        if self._space * card < _MAX_CODE:
            self._space *= card
            return combined, None
        uniq, inverse = np.unique(combined, return_inverse=True)
        self._space = len(uniq)
        return inverse.astype(np.int64), uniq

    def probe_codes(self, keys: list[pa.Array]) -> tuple[np.ndarray, np.ndarray]:
        """(group code per probe row or -1, mask of probe rows with a NULL key)."""
        n = len(keys[0])
        codes = None
        found = np.ones(n, dtype=bool)
        null_key = np.zeros(n, dtype=bool)
        for key, lookup, compress in zip(keys, self.lookups, self.compress):
            if key.null_count:
                null_key |= np.asarray(key.is_null().to_numpy(zero_copy_only=False), bool)
            c, hit = lookup.codes(key)
            found &= hit
            if codes is None:
                codes = c
            else:
                codes = codes * lookup.cardinality + c
                if compress is not None:
                    pos = np.searchsorted(compress, codes)
                    pos = np.minimum(pos, len(compress) - 1)
                    found &= compress[pos] == codes
                    codes = pos
        if codes is None:
            return np.full(n, -1, dtype=np.int64), null_key
        if self.dense is not None and len(self.dense):
            pos = np.minimum(np.searchsorted(self.dense, codes), len(self.dense) - 1)
            found &= self.dense[pos] == codes
            codes = pos
        elif len(keys) > 1:  # empty build side, or no build row without a NULL key
            found[:] = False
        return np.where(found, codes, -1), null_key


class HashJoinExec(ExecutionPlan):
    name = "HashJoinExec"

    def __init__(self, left: ExecutionPlan, right: ExecutionPlan,
                 on: list[tuple[Expr, Expr]], join_type: str, filter: Expr | None = None,
                 null_aware: bool = False, null_equal: bool = False,
                 partitions: int | None = None):
        super().__init__(join_schema(left.schema, right.schema, join_type))
        self.left, self.right, self.on = left, right, list(on)
        self.join_type, self.filter = JoinType.of(join_type), filter
        self.null_aware = null_aware
        self.null_equal = null_equal
        # None: CollectLeft (one shared build); N: Partitioned (both sides hashed into N)
        self.partitions = partitions
        self.dynamic_filters: list = []  # (build key, DynamicFilter) from push_dynamic_filters
        self.shared_build = SharedBuild(left, f"{self.name}[build]",
                                        collect=self._collect_shared, discard=_discard_spilled)

    @property
    def _build_keys(self) -> list[Expr]:
        return [left for left, _ in self.on]

    @property
    def _probe_keys(self) -> list[Expr]:
        return [right for _, right in self.on]

    def _index(self, build: pa.Table) -> KeyIndex:
        return KeyIndex([evaluate(k, build) for k in self._build_keys], self.null_equal)

    def _collect(self, batches, reservation, ctx, metrics) -> pa.Table | SpilledBuild:
        return collect_build(batches, self.left.schema, self._build_keys, self.null_equal,
                             reservation, ctx, metrics, builds=self.partitions or 1)

    def _collect_shared(self, batches, reservation, ctx, metrics):
        build = self._collect(batches, reservation, ctx, metrics)
        return build, self._index(build) if isinstance(build, pa.Table) else None

    def children(self):
        return [self.left, self.right]

    def with_new_children(self, children):
        return HashJoinExec(children[0], children[1], self.on, self.join_type, self.filter,
                            self.null_aware, self.null_equal, self.partitions)

    def required_input_distribution(self):
        if self.partitions is not None:
            return [hash_distribution([left for left, _ in self.on], self.partitions),
                    hash_distribution([right for _, right in self.on], self.partitions)]
        # probe partitions share one build side; joins that must see every probe row
        # before emitting build rows need the probe side in one partition
        needs_all_probe = self.join_type in ("left", "full", "left_semi", "left_anti")
        return [SINGLE_PARTITION, SINGLE_PARTITION if needs_all_probe else UNSPECIFIED]

    def output_partitioning(self):
        probe = self.right.output_partitioning()
        if self.partitions is not None:
            # partition p joins build rows and probe rows whose keys hash to p; a side whose
            # unmatched rows are NULL-extended no longer places rows by its key
            if self.join_type in ("inner", "right", "right_semi", "right_anti"):
                return Partitioning(self.partitions, tuple(right for _, right in self.on))
            if self.join_type in ("left", "left_semi", "left_anti"):
                return Partitioning(self.partitions, tuple(left for left, _ in self.on))
            return Partitioning(self.partitions)
        if probe.hash_exprs is not None and \
                self.join_type in ("inner", "right", "right_semi", "right_anti"):
            return probe  # every probe row stays in its partition
        return Partitioning(probe.count)

    def _compute_equivalences(self):
        left, right = self.left.equivalences(), self.right.equivalences()
        # a NULL-extended side is NULL in the rows without a match: not constant any more
        if self.join_type in ("right", "full"):
            left = left.without_constants()
        if self.join_type in ("left", "full"):
            right = right.without_constants()
        both = left.union(right).restrict(self.schema.names)
        if self.join_type != "inner":
            # an outer join's NULL-extended key is NULL where the other is not; semi and
            # anti joins output one side only
            return both
        return both.with_equal(self.on)

    def maintains_input_order(self):
        return [False, self.join_type in ("inner", "right_semi", "right_anti")]

    def output_ordering(self):
        return self.right.output_ordering() if self.maintains_input_order()[1] and \
            self.join_type in ("right_semi", "right_anti") else None

    def display(self) -> str:
        on = ", ".join(f"({a}, {b})" for a, b in self.on)
        mode = "CollectLeft" if self.partitions is None else "Partitioned"
        text = f"HashJoinExec: mode={mode}, join_type={self.join_type}, on=[{on}]"
        if self.filter is not None:
            text += f", filter={self.filter}"
        if self.null_aware:
            text += ", null_aware=true"
        return text

    def _publish_build_keys(self, build: pa.Table, partition: int) -> None:
        """Tell the probe scan which keys the build side has: rows with others never match.

        A partitioned join's build partition holds only its own keys; the filter combines
        all partitions' keys before it applies.
        """
        part, parts = (0, 1) if self.partitions is None else (partition, self.partitions)
        for build_key, dynamic_filter in self.dynamic_filters:
            if not dynamic_filter.has_published(part):  # collect-left: the first partition
                dynamic_filter.publish_build_keys(evaluate(build_key, build), part, parts)

    def _execute(self, partition, ctx):
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        reservation = None
        try:
            for _, dynamic_filter in self.dynamic_filters:
                dynamic_filter.start(ctx)
            if self.partitions is None:
                build, index = self.shared_build.acquire(ctx, metrics)
            else:
                # partitioned mode: this partition's own share of the build side
                reservation = ctx.memory_pool.register(f"{self.name}[build {partition}]",
                                                       can_spill=True)
                build = self._collect(self.left.execute(partition, ctx), reservation, ctx,
                                      metrics)
                index = self._index(build) if isinstance(build, pa.Table) else None
            if isinstance(build, SpilledBuild):
                if reservation is None:  # buckets of the shared build load under our own
                    reservation = ctx.memory_pool.register(f"{self.name}[{partition}]",
                                                           can_spill=True)
                yield from self._join_spilled(build, reservation, partition, ctx, metrics)
                return
            self._publish_build_keys(build, partition)
            if self.null_aware and index.has_null_key and self.join_type == "right_anti":
                # x NOT IN (... NULL ...) is never true
                for _ in self.right.execute(partition, ctx):
                    pass
                return
            yield from self._join(build, index, self.right.execute(partition, ctx), ctx,
                                  build_empty=build.num_rows == 0)
        finally:
            if self.partitions is None:
                self.shared_build.release(ctx, self.output_partitioning().count)
            if reservation is not None:
                reservation.free()

    def _join_spilled(self, build: SpilledBuild, reservation, partition, ctx, metrics):
        """Grace hash join: the probe side is split into the build's buckets, then each
        bucket is joined in memory (see join_spill)."""
        if self.null_aware and build.has_null_key and self.join_type == "right_anti":
            for _ in self.right.execute(partition, ctx):
                pass
            return

        def join_bucket(table: pa.Table, probes):
            # build_empty: NOT IN drops NULL probe keys unless the *whole* build side is empty
            return self._join(table, self._index(table), probes, ctx, build_empty=False)

        grace = GraceHashJoin(ctx, metrics, reservation, self.left.schema, self.right.schema,
                              self._build_keys, self._probe_keys, self.null_equal,
                              self.join_type, join_bucket,
                              probe_streams=self.output_partitioning().count)
        yield from grace.run(build, self.right.execute(partition, ctx),
                             build_owned=self.partitions is not None)

    def _join(self, build: pa.Table, index: KeyIndex, probes, ctx, build_empty: bool):
        """Probe an in-memory build side with a stream of batches; then the build rows
        that depend on every probe row (outer, semi, anti)."""
        assembler = JoinAssembler(build, self.join_type, self.schema, self.filter)
        if index.needs_large_probes:
            # Arrow's index_in rebuilds the build-side hash set per call: probe with
            # batches at least as large as the build side so that cost stays linear
            probes = coalesce_batches(probes, max(ctx.batch_size, build.num_rows))
        for batch in probes:
            keys = [evaluate(right, batch) for right in self._probe_keys]
            codes, null_key = index.probe_codes(keys)
            excluded = null_key if (self.null_aware and not build_empty) else None
            for probe, lo in _chunks(batch, codes, index, ctx.batch_size * 8):
                probe_idx, build_idx = index.matches(codes[lo:lo + probe.num_rows])
                chunk_excluded = excluded[lo:lo + probe.num_rows] \
                    if excluded is not None else None
                yield from assembler.probe(probe, probe_idx, build_idx, chunk_excluded)
        yield from assembler.finish(self.right.schema, ctx.batch_size)


def _discard_spilled(ctx, build) -> None:
    """Delete a shared build's bucket files once the last probe partition is done."""
    if isinstance(build, SpilledBuild):
        build.delete(spill_manager(ctx))


def coalesce_batches(batches, min_rows: int):
    """Concatenate consecutive batches until each holds at least ``min_rows`` rows."""
    pending, rows = [], 0
    for batch in batches:
        pending.append(batch)
        rows += batch.num_rows
        if rows >= min_rows:
            yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
            pending, rows = [], 0
    if rows:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def _chunks(batch: pa.RecordBatch, codes: np.ndarray, index: KeyIndex, max_pairs: int):
    """Split a probe batch so that no chunk produces more than ~max_pairs pairs."""
    if index.build_row is not None and len(codes) <= max_pairs:
        yield batch, 0  # at most one pair per probe row
        return
    hit = codes >= 0
    counts = np.where(hit, index.counts[np.where(hit, codes, 0)], 0) if len(index.counts) \
        else np.zeros(len(codes), dtype=np.int64)
    total = int(counts.sum())
    if total <= max_pairs:
        yield batch, 0
        return
    cumulative = np.cumsum(counts)
    bounds = np.searchsorted(cumulative, np.arange(max_pairs, total, max_pairs), side="left")
    starts = np.unique(np.concatenate([[0], bounds]))
    ends = np.append(starts[1:], batch.num_rows)
    for lo, hi in zip(starts, ends):
        if hi > lo:
            yield batch.slice(int(lo), int(hi - lo)), int(lo)
