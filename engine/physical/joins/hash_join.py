"""HashJoinExec: equi-join by integer key codes (collect-left: build on the left child).

    build (left, collected)                    probe (right, streamed batch by batch)
    key columns ──KeyIndex: hash tables──▶ groups    key columns ──lookup──▶ group ids
                  (starts, counts, order)  └──────── expand ─┘──▶ (probe row, build row)
                                                      └─▶ JoinAssembler
                                                          (filter, outer, semi, anti)

Keys decide with integers (principle 4): the build keys are numbered once by compiled hash
tables (key_index.py, kernels/hash_table.py) and every probe batch is looked up in them with
the GIL released, so probe partitions run on all cores. NULL keys never match.

Collect-left joins that emit build rows after the probe (left, full, semi, anti) probe in
parallel too (``parallel_probe``, DataFusion's shared visited bitmap): every probe partition
marks the build rows it matched, and the last one to finish emits the build rows decided by
the union of the marks (build.py). Without it (a plan cut into stages for a cluster, whose
probe partitions may run in different processes) the probe side is merged into one partition.

A build side the pool refuses (or that outgrows its share of the pool) spills: the join
becomes a grace hash join, both sides split into hash buckets joined one at a time
(join_spill). In collect-left mode the shared build spills its buckets once; each probe
partition splits its own probe rows and reads every build bucket under its own reservation
(with ``parallel_probe``, the last partition to split joins every partition's buckets).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plansight.engine.errors import ExecutionError, ResourcesExhausted, WorkerLost
from plansight.engine.exec.spill import spill_manager
from plansight.engine.logical.expr import Expr
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.joins.build import SharedBuild
from plansight.engine.physical.joins.key_index import KeyIndex
from plansight.engine.physical.joins.output import JoinAssembler, join_schema
from plansight.engine.physical.joins.spill import GraceHashJoin, SpilledBuild, collect_build
from plansight.engine.physical.plan import (
    SINGLE_PARTITION,
    UNSPECIFIED,
    ExecutionPlan,
    Partitioning,
    hash_distribution,
)
from plansight.engine.physical.vocabulary import JoinType

#: join types that emit unmatched build rows: which build rows matched is known only after
#: the whole probe side (one probe partition, or all of them with ``parallel_probe``)
SINGLE_PROBE_JOIN_TYPES = frozenset({JoinType.LEFT, JoinType.FULL, JoinType.LEFT_SEMI,
                                     JoinType.LEFT_ANTI})

#: an INTERSECT (a null-equal semi join) with an empty build side never runs its probe side,
#: so nothing computed there can raise: DuckDB skips that pipeline (``x * 3`` overflowing in
#: the left operand of an INTERSECT whose right operand is empty raised in plansight only,
#: seed 9101). Other joins still run their probe side, as DuckDB mostly does (skipping a cross
#: join's other input made errors DuckDB raises disappear, seed 9103)
EMPTY_WITHOUT_BUILD_JOIN_TYPES = frozenset({JoinType.LEFT_SEMI, JoinType.RIGHT_SEMI})


class HashJoinExec(ExecutionPlan):
    name = "HashJoinExec"

    def __init__(self, left: ExecutionPlan, right: ExecutionPlan,
                 on: list[tuple[Expr, Expr]], join_type: str, filter: Expr | None = None,
                 null_aware: bool = False, null_equal: bool = False,
                 partitions: int | None = None, parallel_probe: bool = False):
        super().__init__(join_schema(left.schema, right.schema, join_type))
        self.left, self.right, self.on = left, right, list(on)
        self.join_type, self.filter = JoinType.of(join_type), filter
        self.null_aware = null_aware
        self.null_equal = null_equal
        # None: CollectLeft (one shared build); N: Partitioned (both sides hashed into N)
        self.partitions = partitions
        # collect-left, left/full/semi/anti: probe partitions combine their visited rows
        self.parallel_probe = parallel_probe and partitions is None and not null_aware and \
            self.join_type in SINGLE_PROBE_JOIN_TYPES
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
                            self.null_aware, self.null_equal, self.partitions,
                            self.parallel_probe)

    def required_input_distribution(self):
        if self.partitions is not None:
            return [hash_distribution([left for left, _ in self.on], self.partitions),
                    hash_distribution([right for _, right in self.on], self.partitions)]
        # probe partitions share one build side; joins that must see every probe row
        # before emitting build rows need the probe side in one partition
        needs_all_probe = self.join_type in SINGLE_PROBE_JOIN_TYPES and not self.parallel_probe
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
        if probe.grouping_exprs is not None and \
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
            if self.partitions is None and build.num_rows == 0 and self.null_equal and \
                    self.join_type in EMPTY_WITHOUT_BUILD_JOIN_TYPES:
                # the whole (shared) build side is empty: every probe partition stops here,
                # so no exchange below is left half read
                return
            if self.null_aware and index.has_null_key and self.join_type == "right_anti":
                # x NOT IN (... NULL ...) is never true
                for _ in self.right.execute(partition, ctx):
                    pass
                return
            yield from self._join(build, index, self.right.execute(partition, ctx), ctx,
                                  build_empty=build.num_rows == 0,
                                  shared_visited=self.parallel_probe and
                                  self.output_partitioning().count > 1)
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

        probe_streams = self.output_partitioning().count
        grace = GraceHashJoin(ctx, metrics, reservation, self.left.schema, self.right.schema,
                              self._build_keys, self._probe_keys, self.null_equal,
                              self.join_type, join_bucket, probe_streams=probe_streams)
        combine = None
        if self.parallel_probe and probe_streams > 1:
            def combine(files):
                return self.shared_build.combine_spilled_probes(ctx, files, probe_streams)
        yield from grace.run(build, self.right.execute(partition, ctx),
                             build_owned=self.partitions is not None, combine=combine)

    def _join(self, build: pa.Table, index: KeyIndex, probes, ctx, build_empty: bool,
              shared_visited: bool = False):
        """Probe an in-memory build side with a stream of batches; then the build rows
        that depend on every probe row (outer, semi, anti) — with ``shared_visited``, only
        in the last probe partition to finish, from every partition's matches."""
        assembler = JoinAssembler(build, self.join_type, self.schema, self.filter)
        if index.needs_large_probes:
            # Arrow's index_in rebuilds the build-side hash set per call: probe with
            # batches at least as large as the build side so that cost stays linear
            probes = coalesce_batches(probes, max(ctx.batch_size, build.num_rows))
        # nothing to match (no build row, or only NULL keys where NULL equals nothing): the
        # probe keys are not evaluated (as a nested loop join evaluates no condition), so
        # ``x IN (empty subquery)`` or ``x IN (SELECT NULL ...)`` raises nothing for an x
        # whose computation would fail (-(-2**31) as INTEGER), as in DuckDB
        unmatchable = build_empty or (not self.null_aware and not index.matchable)
        for batch in probes:
            if unmatchable:
                codes, excluded = np.full(batch.num_rows, -1, dtype=np.int64), None
            else:
                codes, null_key = index.probe_codes(self._probe_key_values(batch))
                excluded = null_key if self.null_aware else None
            for probe, lo in _chunks(batch, codes, index, ctx.batch_size * 8):
                probe_idx, build_idx = index.matches(codes[lo:lo + probe.num_rows])
                chunk_excluded = excluded[lo:lo + probe.num_rows] \
                    if excluded is not None else None
                yield from assembler.probe(probe, probe_idx, build_idx, chunk_excluded)
        if shared_visited:
            visited = self.shared_build.combine_visited(
                ctx, assembler.visited, self.output_partitioning().count)
            if visited is None:
                return  # another partition is still probing: it emits the build rows
            assembler.visited = visited
        yield from assembler.finish(self.right.schema, ctx.batch_size)


    def _probe_key_values(self, batch: pa.RecordBatch) -> list[pa.Array]:
        """The probe keys of ``batch``. When one raises (an overflow, a conversion), each key
        is evaluated again only on the rows whose keys before it are all non-NULL: a row
        with a NULL key matches nothing, so its later keys are never needed (a correlated
        ``x IN (...)`` whose correlation key is NULL does not compute x, as in DuckDB)."""
        try:
            return [evaluate(right, batch) for right in self._probe_keys]
        except (ResourcesExhausted, WorkerLost):
            raise
        except ExecutionError:
            if self.null_aware or self.null_equal or len(self._probe_keys) == 1:
                raise
        values, rows = [], np.arange(batch.num_rows)
        for key in self._probe_keys:
            if len(rows) == batch.num_rows:
                value = evaluate(key, batch)
            elif not len(rows):
                value = pa.nulls(batch.num_rows, key.type)
            else:  # the rows' values scattered into an all-NULL column
                sub = evaluate(key, batch.take(pa.array(rows)))
                order = np.full(batch.num_rows, len(rows), dtype=np.int64)
                order[rows] = np.arange(len(rows))
                value = pa.concat_arrays([sub, pa.nulls(1, sub.type)]).take(pa.array(order))
            values.append(value)
            if value.null_count:
                rows = rows[np.asarray(value.is_valid(), dtype=bool)[rows]]
        return values


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
    counts = index.match_counts(codes)
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
