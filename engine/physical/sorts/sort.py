"""SortExec: sorts each input partition (multi-key, ASC/DESC, NULLS FIRST/LAST).

External sort: the buffer grows a spillable reservation; when the pool refuses, the buffer is
sorted and written as a run (a spill file), the reservation is released and buffering goes on.

    input ─▶ buffer ──pool says no──▶ sort ─▶ run 0, run 1, ... (lz4 IPC files)
               │                                   │
               └─ end: sort (in-memory run) ───────┴─▶ merge_sorted ─▶ sorted output
                                                      (in levels of fan-in runs when more)

Memory, per partition: a merge budget (a quarter of the limit, split among the sibling
partitions of a partition-preserving sort) is reserved from the first spill on, and runs are
written in batches small enough for ``fan_in`` of them to merge inside it (the fan-in drops
below FAN_IN before batches shrink below MIN_RUN_BATCH_BYTES). The buffer is capped at the
partition's share of the limit minus that budget, so a greedy sibling cannot starve the
others' merges. Sorting takes the sorted rows a chunk at a time from the buffer, never a
second sorted copy of it; a sort that ends with the pool nearly full writes its last run to
disk too, leaving the memory to whoever consumes its output. With ``headroom`` the buffer
also spills before the pool's free memory drops below it: sorts chained through window
stages (which cannot spill) leave those stages room. Runs are consecutive pieces of the
input and the merge is stable, so the output equals the in-memory sort's, ties included.

With ``fetch`` it runs as top-k and never spills: candidates are cut back to k whenever they
exceed 2k + a batch, so memory stays O(k + batch) instead of O(input).

Top-k over input already sorted on a prefix of the keys (rows sorted by ``a``, ``ORDER BY a, b
LIMIT k``) stops reading early, like DataFusion's common-sort-prefix TopK:

    arrival:  a = 1 1 2 2 2 3 3 | 3 3 4 ...     the k-th row to arrive (k = 7: a = 3) bounds
                          k-th ─┘     └─ a > 3: stop pulling the input
    the prefix: k rows with a <= 3 are in hand, so a row with a > 3 cannot enter; rows with
    a = 3 still can (b breaks the tie) and are read to the end of their run.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.exec.memory_pool import buffer_cap, leaves_headroom, nearly_full
from plansight.engine.logical.expr import SortKey
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.plan import SINGLE_PARTITION, UNSPECIFIED, ExecutionPlan
from plansight.engine.physical.sorts.permutation import sort_indices
from plansight.engine.physical.sorts.sorted_runs import SortedRuns


class SortExec(ExecutionPlan):
    name = "SortExec"

    def __init__(self, keys: list[SortKey], input: ExecutionPlan, fetch: int | None = None,
                 preserve_partitioning: bool = False, headroom: int = 0):
        super().__init__(input.schema)
        self.keys, self.input, self.fetch = list(keys), input, fetch
        self.preserve_partitioning = preserve_partitioning
        # bytes of the pool the buffer leaves free for the operators around the sort that
        # cannot spill (a window's partition buffer between two sorts)
        self.headroom = headroom
        # (DynamicFilter, descending) set by push_dynamic_filters: the k-th row's first key
        # bounds what the scan still needs to read
        self.dynamic_filter: tuple | None = None

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return SortExec(self.keys, children[0], self.fetch, self.preserve_partitioning,
                        self.headroom)

    def required_input_distribution(self):
        return [UNSPECIFIED if self.preserve_partitioning else SINGLE_PARTITION]

    def output_partitioning(self):
        return self.input.output_partitioning() if self.preserve_partitioning else \
            super().output_partitioning()

    def output_ordering(self):
        return tuple(self.keys)

    def derived_row_estimate(self):
        rows = self.input.row_estimate
        if rows is None or self.fetch is None:
            return rows
        # top-k keeps fetch rows per partition when it sorts partitions apart
        partitions = self.output_partitioning().count if self.preserve_partitioning else 1
        return min(rows, self.fetch * partitions)

    def display(self) -> str:
        keys = ", ".join(map(str, self.keys))
        head = f"SortExec: TopK(fetch={self.fetch}), " if self.fetch is not None else "SortExec: "
        preserve = str(self.preserve_partitioning).lower()
        return f"{head}expr=[{keys}], preserve_partitioning=[{preserve}]"

    def _execute(self, partition, ctx):
        if self.fetch is not None:
            return self._top_k(partition, ctx)
        return self._external_sort(partition, ctx)

    def sorted_prefix(self) -> list[SortKey]:
        """The leading keys the input partitions are already sorted by (through column
        equivalences); a top-k stops reading once they pass the k-th row's."""
        have = self.input.output_ordering()
        if not have:
            return []
        equivalences = self.input.equivalences()
        have_keys = equivalences.normalize_ordering(have)
        prefix, seen = [], set()
        for key in self.keys:
            normalized = equivalences.normalize_ordering([key])[0]
            if normalized[0] in seen:
                continue  # a repeated class orders nothing more
            if len(seen) >= len(have_keys) or have_keys[len(seen)] != normalized:
                break
            seen.add(normalized[0])
            prefix.append(key)
        return prefix

    def _top_k(self, partition, ctx):
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]", metrics=metrics)
        dynamic = self.dynamic_filter
        if dynamic is not None:
            dynamic[0].start(ctx)
        stream = self.input.execute(partition, ctx)
        try:
            if self.fetch == 0:
                return
            stop = _PrefixStop(self.sorted_prefix(), self.fetch)
            # with a sorted prefix the threshold is published once this partition is done:
            # earlier, the scan would drop the rows past it, which are what tell it to stop
            publish = dynamic is not None and not stop.prefix
            batches, held = [], 0
            limit = 2 * self.fetch + ctx.batch_size
            for batch in stream:
                batch, finished = stop.cut(batch)
                reservation.grow(batch.nbytes)
                batches.append(batch)
                held += batch.num_rows
                if held > limit or (finished and dynamic is not None):
                    table = self._sorted(batches).slice(0, self.fetch)
                    batches, held = table.to_batches(), table.num_rows
                    reservation.resize(table.nbytes)
                    if dynamic is not None and (publish or finished):
                        self._publish_threshold(table, *dynamic)
                if finished:
                    metrics.add("early_stop")
                    break
            stream.close()  # the input's work ends here, not when the output is consumed
            if not batches:
                return
            table = self._sorted(batches).slice(0, self.fetch)
            yield from table.to_batches(max_chunksize=ctx.batch_size)
        finally:
            stream.close()
            reservation.free()

    def _publish_threshold(self, top: pa.Table, dynamic_filter, descending: bool) -> None:
        """Rows beyond the current k-th value of the first key can no longer enter."""
        if top.num_rows < self.fetch:
            return

        value = evaluate(self.keys[0].expr, top.slice(self.fetch - 1, 1))[0]
        if not value.is_valid:
            return
        value = value.as_py()
        if isinstance(value, float) and value != value:
            return  # NaN sorts last: it bounds nothing
        if descending:
            dynamic_filter.tighten(low=value)
        else:
            dynamic_filter.tighten(high=value)

    def _external_sort(self, partition, ctx):
        sort = _ExternalSort(self, partition, ctx)
        try:
            for batch in self.input.execute(partition, ctx):
                if batch.num_rows:
                    sort.insert(batch)
            yield from sort.finish()
        finally:
            sort.close()

    def _sorted(self, batches) -> pa.Table:
        table = pa.Table.from_batches(batches, schema=self.schema)
        return table.take(sort_indices(table, self.keys))


class _PrefixStop:
    """Cuts a top-k's input where its sorted prefix passes the k-th arrived row's prefix."""

    def __init__(self, prefix: list[SortKey], fetch: int):
        self.prefix, self.fetch = prefix, fetch
        self.arrived = 0
        self.bound: list[pa.Scalar] | None = None  # prefix values of the k-th arrived row

    def cut(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, bool]:
        """(the rows of ``batch`` that may still enter the top-k, whether the input is done)."""
        if not self.prefix:
            return batch, False
        start = 0
        if self.bound is None:
            if self.arrived + batch.num_rows < self.fetch:
                self.arrived += batch.num_rows
                return batch, False
            start = self.fetch - 1 - self.arrived
            self.bound = [evaluate(key.expr, batch.slice(start, 1))[0] for key in self.prefix]
        self.arrived += batch.num_rows
        same = None
        for key, value in zip(self.prefix, self.bound):
            equal = _equal_to(evaluate(key.expr, batch.slice(start)), value)
            same = equal if same is None else pc.and_(same, equal)
        past = np.flatnonzero(~same.to_numpy(zero_copy_only=False))
        if not len(past):
            return batch, False
        return batch.slice(0, start + int(past[0])), True


def _equal_to(column: pa.Array, value: pa.Scalar) -> pa.Array:
    """Rows of ``column`` that sort as ``value`` does: NULL with NULL, NaN with NaN."""
    if not value.is_valid:
        return pc.is_null(column)
    if pa.types.is_floating(column.type) and value.as_py() != value.as_py():
        return pc.fill_null(pc.is_nan(column), False)
    return pc.fill_null(pc.equal(column, value), False)


class _ExternalSort:
    """The state of one partition's sort: the in-memory buffer; the runs are ``SortedRuns``."""

    def __init__(self, plan: SortExec, partition: int, ctx):
        self.plan, self.ctx = plan, ctx
        self.metrics = ctx.metrics.for_partition(plan.operator_id, plan.name, partition)
        self.reservation = ctx.memory_pool.register(f"{plan.name}[{partition}]", can_spill=True)
        self.batches: list[pa.RecordBatch] = []
        self.runs = SortedRuns(ctx, plan.keys, plan.schema, self.metrics,
                               f"{plan.name}[{partition}]", self._siblings())
        # a partition's buffer leaves room for its merge and its siblings' shares: a greedy
        # sibling must not starve the others' merges
        self.buffer_cap = buffer_cap(ctx.memory_pool, self._siblings(), self.runs.merge_budget())

    def insert(self, batch: pa.RecordBatch) -> None:
        if self.reservation.size + batch.nbytes <= self.buffer_cap and \
                self._leaves_headroom(batch.nbytes) and self.reservation.try_grow(batch.nbytes):
            self.batches.append(batch)
            return
        # the pool said no: sort what is held, write it as a run, release its memory
        if self.batches:
            self.runs.spill(self.batches)
            self.batches = []
            self.reservation.resize(0)
        self.runs.reserve_merge_budget()
        if batch.nbytes <= self.buffer_cap and self._leaves_headroom(batch.nbytes) and \
                self.reservation.try_grow(batch.nbytes):
            self.batches.append(batch)
        else:  # bigger than all the pool has left: a run of its own
            self.runs.spill([batch])
            self.runs.reserve_merge_budget()

    def _leaves_headroom(self, additional: int) -> bool:
        return leaves_headroom(self.ctx.memory_pool, additional, self.plan.headroom)

    def _siblings(self) -> int:
        plan = self.plan
        return plan.input.output_partitioning().count if plan.preserve_partitioning else 1

    def finish(self):
        batches, self.batches = self.batches, []
        runs = self.runs
        if batches and (nearly_full(self.ctx.memory_pool) or
                        runs.runs and len(runs.runs) + 1 > runs.fan_in):
            runs.spill(batches)
            batches = []
            self.reservation.resize(0)
            runs.reserve_merge_budget()
        if not runs.runs:
            if batches:
                for chunk in runs.sorted_chunks(batches, self.ctx.batch_size):
                    yield from chunk.to_batches()
            return
        yield from runs.merged(batches)

    def close(self) -> None:
        self.metrics.set_max("peak_mem", self.reservation.peak + self.runs.merge_peak)
        self.reservation.free()
        self.runs.close()
