"""Grace hash join: a build side larger than its reservation is joined bucket by bucket.

    build ──pool refuses──▶ hash(keys, seed₀) % 16 ──▶ 16 build files ─┐
    probe ────────────────▶ hash(keys, seed₀) % 16 ──▶ 16 probe files ─┤ for each bucket b:
                                                                       ▼
        read build file b under the reservation ──fits──▶ index it, stream probe file b ──▶ out
                                                 └─refused─▶ split build b and probe b again
                                                             with seed₁ (then seed₂, ...)

Equal keys hash equally on both sides, so every bucket is an independent join: the unmatched
build rows of left/full/semi/anti joins are decided per bucket. The seeds differ from the
hash repartition's, so the rows of one repartitioned partition still spread over all buckets.
Rows with a NULL key never match (unless NULLs are equal, as in INTERSECT/EXCEPT): they are
dealt round robin instead of hashed, so many NULL keys can not make one bucket too large.
A bucket whose non-NULL rows all share one key can not be split: it fails with
ResourcesExhausted naming the consumer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from plansight.engine.errors import ResourcesExhausted
from plansight.engine.exec.context import TaskContext
from plansight.engine.exec.memory_pool import MemoryReservation, build_share, format_bytes
from plansight.engine.exec.metrics import PartitionMetrics
from plansight.engine.exec.spill import SpillFile, SpillManager, spill_manager
from plansight.engine.logical.expr import Expr
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.repartition import hash_rows, split_by_target

SPILL_BUCKETS = 16
#: 16 ** 6 buckets: a bucket still too large after that many splits is hopelessly skewed
MAX_LEVELS = 6


def _seed(level: int) -> int:
    """The hash seed of split level ``level`` (none equals the repartition's seed)."""
    return (0xD6E8FEB86659FD93 * (level + 1) + 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF


class BucketWriters:
    """One spill file per bucket, filled with the rows whose key hashes to that bucket.

    A routed batch leaves ~1/16 of its rows per bucket; each IPC batch costs a fixed
    compression overhead, so pieces are buffered per bucket (under ``reservation``, written
    at once when the pool refuses) and written as batches of about ``batch_rows`` rows.
    """

    def __init__(self, manager: SpillManager, schema: pa.Schema, metrics: PartitionMetrics,
                 keys: list[Expr], level: int, null_equal: bool,
                 reservation: MemoryReservation, batch_rows: int, budget: int | None):
        self.keys, self.level, self.null_equal = keys, level, null_equal
        self.reservation, self.batch_rows = reservation, batch_rows
        self.budget = budget  # most bytes buffered at once (None: what the pool grants)
        self.writers = [manager.writer(schema, metrics) for _ in range(SPILL_BUCKETS)]
        self.pending: list[list[pa.RecordBatch]] = [[] for _ in range(SPILL_BUCKETS)]
        self.pending_rows = [0] * SPILL_BUCKETS
        self.pending_bytes = 0
        self.null_rows = 0  # rows dealt round robin (a NULL key that can not match)
        self.has_null_key = False
        self.low: int | None = None  # range of the key hashes: low == high means one key
        self.high: int | None = None

    def route(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        keys = [evaluate(key, batch) for key in self.keys]
        hashes = hash_rows(keys, _seed(self.level))
        targets = (hashes % np.uint64(SPILL_BUCKETS)).astype(np.int64)
        keyed = hashes
        if any(key.null_count for key in keys):
            self.has_null_key = True
            if not self.null_equal:
                null = np.zeros(len(targets), dtype=bool)
                for key in keys:
                    if key.null_count:
                        null |= np.asarray(key.is_null().to_numpy(zero_copy_only=False), bool)
                count = int(null.sum())
                targets[null] = (self.null_rows + np.arange(count)) % SPILL_BUCKETS
                self.null_rows += count
                keyed = hashes[~null]
        if len(keyed):
            low, high = int(keyed.min()), int(keyed.max())
            self.low = low if self.low is None else min(self.low, low)
            self.high = high if self.high is None else max(self.high, high)
        for bucket, piece in split_by_target(batch, targets, SPILL_BUCKETS):
            if self.pending_rows[bucket] + piece.num_rows < self.batch_rows and \
                    (self.budget is None or self.pending_bytes + piece.nbytes <= self.budget) \
                    and self.reservation.try_grow(piece.nbytes):
                self.pending[bucket].append(piece)
                self.pending_rows[bucket] += piece.num_rows
                self.pending_bytes += piece.nbytes
            else:
                self._flush(bucket, piece)

    def _flush(self, bucket: int, piece: pa.RecordBatch | None = None) -> None:
        pieces = self.pending[bucket] + ([piece] if piece is not None else [])
        if pieces:
            self.writers[bucket].write(pa.concat_batches(pieces) if len(pieces) > 1
                                       else pieces[0])
        self._drop(bucket)

    def _drop(self, bucket: int) -> None:
        released = sum(piece.nbytes for piece in self.pending[bucket])
        self.pending[bucket], self.pending_rows[bucket] = [], 0
        self.pending_bytes -= released
        self.reservation.shrink(released)

    @property
    def single_key(self) -> bool:
        """Every row has the same key (up to 64-bit hash collisions): no split can help."""
        return self.null_rows == 0 and self.low is not None and self.low == self.high

    def finish(self) -> list[SpillFile]:
        files = []
        try:
            for bucket in range(SPILL_BUCKETS):
                self._flush(bucket)
            for writer in self.writers:
                files.append(writer.finish())
        except BaseException:
            self.abort()
            raise
        self.writers = files
        return files

    def abort(self) -> None:
        """Delete the unfinished files (error or cancellation); finished ones stay theirs."""
        for bucket in range(SPILL_BUCKETS):
            self._drop(bucket)
        for writer in self.writers:
            if not isinstance(writer, SpillFile):
                writer.abort()


@dataclass
class SpilledBuild:
    """A build side that did not fit: its rows in one spill file per bucket."""

    files: list[SpillFile]
    has_null_key: bool  # NOT IN needs to know: x NOT IN (..., NULL) is never true

    def delete(self, manager: SpillManager) -> None:
        for file in self.files:
            manager.delete(file.path)


def collect_build(batches: Iterator[pa.RecordBatch], schema: pa.Schema, keys: list[Expr],
                  null_equal: bool, reservation: MemoryReservation, ctx: TaskContext,
                  metrics: PartitionMetrics, builds: int = 1) -> pa.Table | SpilledBuild:
    """The build side in memory while the pool grants it (and it holds at most its share of
    the pool among ``builds`` concurrent ones), else spilled into hash buckets."""
    held: list[pa.RecordBatch] = []
    buckets: BucketWriters | None = None
    cap = build_share(reservation.pool, builds)
    try:
        for batch in batches:
            if buckets is None:
                if (cap is None or reservation.size + batch.nbytes <= cap) and \
                        reservation.try_grow(batch.nbytes):
                    held.append(batch)
                    metrics.set_max("peak_mem", reservation.size)
                    continue
                buckets = BucketWriters(spill_manager(ctx), schema, metrics, keys, 0,
                                        null_equal, reservation, ctx.batch_size, cap)
                for piece in held:
                    buckets.route(piece)
                    reservation.shrink(piece.nbytes)
                held = []
            buckets.route(batch)
        if buckets is None:
            return pa.Table.from_batches(held, schema=schema).combine_chunks()
        return SpilledBuild(buckets.finish(), buckets.has_null_key)
    except BaseException:
        if buckets is not None:
            buckets.abort()
        raise


# join_bucket(build rows of one bucket, probe batches of that bucket) -> output batches
JoinBucket = Callable[[pa.Table, Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
# one probe partition's bucket files -> every partition's, grouped by bucket (None: not last)
CombineProbes = Callable[[list[SpillFile]], list[list[SpillFile]] | None]

# join types whose output is empty for a bucket without build rows / without probe rows
_EMPTY_WITHOUT_BUILD = ("inner", "left", "left_semi", "left_anti", "right_semi")
_EMPTY_WITHOUT_PROBE = ("inner", "right", "right_semi", "right_anti", "left_semi")


class GraceHashJoin:
    """Joins a spilled build side with a probe stream, one bucket in memory at a time."""

    def __init__(self, ctx: TaskContext, metrics: PartitionMetrics,
                 reservation: MemoryReservation, build_schema: pa.Schema,
                 probe_schema: pa.Schema, build_keys: list[Expr], probe_keys: list[Expr],
                 null_equal: bool, join_type: str, join_bucket: JoinBucket,
                 probe_streams: int = 1):
        """``probe_streams``: how many partitions split their probe side at the same time
        (their buffers share what the pool leaves the still running probe children)."""
        self.ctx, self.metrics, self.reservation = ctx, metrics, reservation
        self.budget = build_share(reservation.pool, probe_streams)
        self.manager = spill_manager(ctx)
        self.build_schema, self.probe_schema = build_schema, probe_schema
        self.build_keys, self.probe_keys = build_keys, probe_keys
        self.null_equal, self.join_type, self.join_bucket = null_equal, join_type, join_bucket
        self._open: list[BucketWriters] = []  # writers to abort if the join stops early

    def run(self, build: SpilledBuild, probes: Iterator[pa.RecordBatch],
            build_owned: bool, combine: CombineProbes | None = None
            ) -> Iterator[pa.RecordBatch]:
        """``build_owned``: this join may delete the build files (a shared build's are
        read by every probe partition and deleted by the last one). ``combine``: for a join
        whose unmatched build rows depend on every probe partition, it gathers the
        partitions' probe buckets; only the last partition to split (it gets them all back,
        grouped by bucket) joins the buckets, so each bucket sees all of its probe rows."""
        try:
            probe_files = self._split(probes, self.probe_schema, self.probe_keys, 0)
            if combine is None:
                groups = [[file] for file in probe_files]
            else:
                groups = combine(probe_files)
                if groups is None:
                    return
            yield from self._join_buckets(build.files, build_owned, groups, 0)
        finally:
            for writers in self._open:
                writers.abort()

    def _split(self, batches, schema, keys, level) -> list[SpillFile]:
        writers = BucketWriters(self.manager, schema, self.metrics, keys, level, self.null_equal,
                                self.reservation, self.ctx.batch_size, self.budget)
        self._open.append(writers)
        for batch in batches:
            writers.route(batch)
        files = writers.finish()
        self._open.remove(writers)
        return files

    def _join_buckets(self, build_files, build_owned, probe_groups, level):
        """``probe_groups[b]``: the probe files of bucket b (one per probe partition)."""
        remaining = list(zip(build_files, probe_groups))
        try:
            while remaining:
                build_file, probe_files = remaining.pop(0)
                yield from self._join_bucket(build_file, build_owned, probe_files, level)
        finally:
            for build_file, probe_files in remaining:  # stopped early: delete what is left
                if build_owned:
                    self.manager.delete(build_file.path)
                for probe_file in probe_files:
                    self.manager.delete(probe_file.path)

    def _read_probes(self, probe_files):
        for probe_file in probe_files:
            yield from self.manager.read(probe_file, self.metrics)

    def _join_bucket(self, build_file, build_owned, probe_files, level):
        if (build_file.rows == 0 and self.join_type in _EMPTY_WITHOUT_BUILD) or \
                (sum(f.rows for f in probe_files) == 0 and
                 self.join_type in _EMPTY_WITHOUT_PROBE):
            if build_owned:
                self.manager.delete(build_file.path)
            for probe_file in probe_files:
                self.manager.delete(probe_file.path)
            return
        held: list[pa.RecordBatch] = []
        reader = self.manager.read(build_file, self.metrics, delete=build_owned)
        try:
            for batch in reader:
                if self.reservation.try_grow(batch.nbytes):
                    held.append(batch)
                    self.metrics.set_max("peak_mem", self.reservation.size)
                    continue
                # the bucket does not fit: split it (and its probe rows) one level deeper
                refusal = self.reservation.pool.exhausted_error(self.reservation, batch.nbytes)
                build_files = self._resplit(held, batch, reader, build_file, refusal, level)
                held = []
                reader.close()
                self.reservation.resize(0)
                split = self._split(self._read_probes(probe_files), self.probe_schema,
                                    self.probe_keys, level + 1)
                yield from self._join_buckets(build_files, True, [[f] for f in split],
                                              level + 1)
                return
            reader.close()
            table = pa.Table.from_batches(held, schema=self.build_schema).combine_chunks()
            held = []
            yield from self.join_bucket(table, self._read_probes(probe_files))
        finally:
            reader.close()
            for probe_file in probe_files:
                self.manager.delete(probe_file.path)
            self.reservation.resize(0)

    def _resplit(self, held, refused, reader, build_file, refusal, level) -> list[SpillFile]:
        """Split a bucket's build rows (``held`` under the reservation, the ``refused`` batch
        and the rest of ``reader``) into the buckets of the next level."""
        if level + 1 >= MAX_LEVELS:
            raise self._exhausted(refusal, build_file,
                                  f"it is still too large after {MAX_LEVELS} hash splits")
        writers = BucketWriters(self.manager, self.build_schema, self.metrics,
                                self.build_keys, level + 1, self.null_equal, self.reservation,
                                self.ctx.batch_size, self.budget)
        self._open.append(writers)
        for batch in held:
            writers.route(batch)
            self.reservation.shrink(batch.nbytes)
        writers.route(refused)
        for batch in reader:
            writers.route(batch)
        files = writers.finish()
        self._open.remove(writers)
        if writers.single_key:
            for file in files:
                self.manager.delete(file.path)
            raise self._exhausted(refusal, build_file,
                                  "all its rows share one join key, so it can not be split")
        return files

    def _exhausted(self, refusal: ResourcesExhausted, build_file: SpillFile,
                   why: str) -> ResourcesExhausted:
        return ResourcesExhausted(
            f"{self.reservation.consumer}: a hash join bucket of {build_file.rows} build rows "
            f"({format_bytes(build_file.bytes)} compressed) does not fit in memory and {why}. "
            f"{refusal}")
