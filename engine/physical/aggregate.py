"""AggregateExec: hash aggregation (GROUP BY) over pre-projected key and argument columns.

The planner projects every group key and aggregate argument into a plain column first, so
this operator only groups columns; the grouping itself runs in Arrow's C++ hash aggregation.

Modes:
    Single   all rows of a group arrive in one partition; aggregate them.
    Partial  per input partition, every ~1M rows: reduce to one state row per group.
    Final    per hash partition of the keys: merge the states, finish (avg = sum / count).

    scan ─▶ Partial ─▶ Repartition(Hash(keys)) ─▶ Final      (only a few rows cross threads)

Input sorted on the group keys (``ordering_mode=Sorted`` in EXPLAIN, any mode): groups arrive
one after another, so they stream out as each completes, without a hash table or a buffer
of the input (sorted_groups.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plansight.engine.functions.aggregate import (
    AggregateSpec,
    aggregate_table,
    finish_merged,
    is_decomposable,
    merge_specs,
    partial_specs,
)
from plansight.engine.exec.memory_pool import AmortizedAccount
from plansight.engine.exec.spill import SpillFile, spill_manager
from plansight.engine.logical.expr import Column, SortKey
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.repartition import hash_rows, split_by_target
from plansight.engine.physical.sorted_groups import RowCarry, StateCarry, comparable
from plansight.engine.physical.plan import (
    SINGLE_PARTITION,
    UNSPECIFIED,
    ExecutionPlan,
    Partitioning,
    hash_distribution,
)


class AggregateExec(ExecutionPlan):
    name = "AggregateExec"

    def __init__(self, input: ExecutionPlan, keys: list[Column], specs: list[AggregateSpec],
                 schema: pa.Schema, mode: str = "Single"):
        super().__init__(schema)
        self.input, self.keys, self.specs, self.mode = input, list(keys), list(specs), mode
        # rows sorted on the group keys arrive group after group: stream, no hash table
        self.sorted_prefix = self._sorted_key_prefix()

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return AggregateExec(children[0], self.keys, self.specs, self.schema, self.mode)

    def required_input_distribution(self):
        if self.mode == "Partial":
            return [UNSPECIFIED]
        if not self.keys:
            return [SINGLE_PARTITION]
        return [hash_distribution(self.keys)]

    def output_partitioning(self):
        part = self.input.output_partitioning()
        if self.mode == "Partial":
            return Partitioning(part.count)
        return Partitioning(part.count, tuple(self.keys) if part.count > 1 else None)

    def _sorted_key_prefix(self) -> tuple[SortKey, ...] | None:
        """The input ordering's leading keys when they are the group keys (any order and
        direction, or columns known equal to them), as key columns; else None."""
        ordering = self.input.output_ordering()
        if not self.keys or not ordering:
            return None
        if not all(comparable(self.input.schema.field(k.field_name).type) for k in self.keys):
            return None
        equivalences = self.input.equivalences()
        classes = {equivalences.representative(k): k for k in self.keys}
        prefix = equivalences.normalize_ordering(ordering)[:len(classes)]
        if {rep for rep, _, _ in prefix} != set(classes):
            return None
        return tuple(SortKey(classes[rep], descending, nulls_first)
                     for rep, descending, nulls_first in prefix)

    def output_ordering(self):
        return self.sorted_prefix

    def display(self) -> str:
        keys = ", ".join(k.name for k in self.keys)
        aggs = ", ".join(
            f"{s.func}({'DISTINCT ' if s.distinct else ''}{s.column.split('#')[0] if s.column else '*'})"
            for s in self.specs)
        ordering = ", ordering_mode=Sorted" if self.sorted_prefix else ""
        return f"AggregateExec: mode={self.mode}{ordering}, gby=[{keys}], aggr=[{aggs}]"

    PARTIAL_CHUNK_ROWS = 1 << 20
    SPILL_BUCKETS = 16

    def _execute(self, partition, ctx):
        if self.sorted_prefix:
            yield from self._execute_sorted(partition, ctx)
            return
        name = f"{self.name}({self.mode})[{partition}]"
        # a partial aggregate never spills: under pressure it flushes its states downstream
        reservation = ctx.memory_pool.register(name, can_spill=self.mode != "Partial" and
                                               bool(self.keys))
        keys = [k.field_name for k in self.keys]
        buckets = None  # spill writers, one per hash bucket of the group keys
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        # a partial aggregate keeps at most a fair share of the pool before it flushes
        limit = ctx.memory_pool.limit
        flush_bytes = limit // (4 * self.output_partitioning().count) if limit else None
        account = AmortizedAccount(reservation)  # a pool grant per chunk, not per batch
        # a global aggregate of decomposable functions folds what it holds into one state
        # row when refused memory: O(1) state, nothing to spill
        folds = self.mode == "Single" and not self.keys and \
            all(is_decomposable(s) for s in self.specs)
        states = []  # folded state rows (global aggregate under pressure)
        try:
            batches, rows = [], 0
            for batch in self.input.execute(partition, ctx):
                if buckets is not None:
                    self._route(batch, buckets)
                    continue
                if not account.try_add(batch.nbytes):
                    metrics.set_max("peak_mem", account.used)
                    if folds:
                        states.append(self._states(batches + [batch], keys))
                        batches, rows = [], 0
                        account.reset()
                        account.add(sum(state.nbytes for state in states))  # a row per fold
                        continue
                    if self.mode == "Partial":
                        # flush what is held; a refused batch held by nobody is aggregated on
                        # the spot, like any streaming operator's batch in flight
                        yield from self._partial(batches + [batch], keys, ctx)
                        batches, rows = [], 0
                        account.reset()
                        continue
                    elif reservation.can_spill:
                        buckets = self._start_spilling(ctx, metrics)
                        for held in batches + [batch]:
                            self._route(held, buckets)
                        batches, rows = [], 0
                        account.reset()
                        continue
                    else:
                        account.add(batch.nbytes)  # raises ResourcesExhausted
                batches.append(batch)
                rows += batch.num_rows
                if self.mode == "Partial" and (rows >= self.PARTIAL_CHUNK_ROWS or (
                        flush_bytes is not None and account.used >= flush_bytes)):
                    metrics.set_max("peak_mem", account.used)
                    yield from self._partial(batches, keys, ctx)
                    batches, rows = [], 0
                    account.reset()
            metrics.set_max("peak_mem", account.used)
            if self.mode == "Partial":
                if batches or not self.keys:
                    yield from self._partial(batches, keys, ctx)
                return
            if buckets is not None:
                yield from self._aggregate_spilled(buckets, keys, reservation, ctx, metrics)
                return
            if states:
                if batches:
                    states.append(self._states(batches, keys))
                result = self._final(pa.concat_tables(states), keys)
                yield from result.to_batches(max_chunksize=ctx.batch_size)
                return
            if not batches and self.keys:
                return
            yield from self._aggregate(pa.Table.from_batches(batches, schema=self.input.schema),
                                       keys, ctx)
        finally:
            if buckets is not None:
                for writer in buckets:
                    if not isinstance(writer, SpillFile):
                        writer.abort()
            reservation.free()

    def _execute_sorted(self, partition, ctx):
        """Emit each group once the next one starts; hold only the open group."""
        reservation = ctx.memory_pool.register(f"{self.name}({self.mode})[{partition}]")
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        keys = [k.field_name for k in self.keys]
        if all(is_decomposable(s) for s in self.specs):
            carry = StateCarry(keys, self.specs, self.schema, input_is_states=self.mode == "Final",
                               finish=self.mode != "Partial")
        else:
            carry = RowCarry(keys, self.specs, self.schema)
        try:
            for batch in self.input.execute(partition, ctx):
                for table in carry.push(batch):
                    yield from table.to_batches(max_chunksize=ctx.batch_size)
                held = carry.held_bytes
                if held > reservation.size:
                    reservation.grow(held - reservation.size)  # one group must fit
                    metrics.set_max("peak_mem", reservation.size)
                else:
                    reservation.resize(held)
            for table in carry.finish():
                yield from table.to_batches(max_chunksize=ctx.batch_size)
        finally:
            reservation.free()

    def _aggregate(self, table: pa.Table, keys: list[str], ctx):
        result = self._final(table, keys) if self.mode == "Final" else \
            aggregate_table(table, keys, self.specs)
        result = pa.Table.from_arrays(result.columns, schema=self.schema)
        yield from result.to_batches(max_chunksize=ctx.batch_size)

    # -- spilling: grace-hash style -------------------------------------------
    #
    #   input ──hash(keys) >> 32 % 16──▶ 16 spill files ──one at a time──▶ aggregate ──▶ out
    #
    # Every group lands in exactly one bucket, so buckets aggregate independently; the high
    # hash bits are used because a hash repartition upstream already fixed the low ones.

    def _start_spilling(self, ctx, metrics):
        manager = spill_manager(ctx)
        return [manager.writer(self.input.schema, metrics) for _ in range(self.SPILL_BUCKETS)]

    def _route(self, batch: pa.RecordBatch, buckets) -> None:
        keys = [evaluate(k, batch) for k in self.keys]
        targets = ((hash_rows(keys) >> np.uint64(32)) % np.uint64(len(buckets))).astype(np.int64)
        for bucket, piece in split_by_target(batch, targets, len(buckets)):
            buckets[bucket].write(piece)

    def _aggregate_spilled(self, buckets, keys, reservation, ctx, metrics):
        manager = spill_manager(ctx)
        for i, writer in enumerate(buckets):
            buckets[i] = writer.finish()
        for file in buckets:
            batches = []
            for batch in manager.read(file, metrics):
                reservation.grow(batch.nbytes)  # a bucket must fit; if not, say so
                batches.append(batch)
            if batches:
                yield from self._aggregate(
                    pa.Table.from_batches(batches, schema=self.input.schema), keys, ctx)
            reservation.resize(0)

    def _partial(self, batches, keys, ctx):
        yield from pa.Table.from_arrays(self._states(batches, keys).columns,
                                        schema=self.schema).to_batches(max_chunksize=ctx.batch_size)

    def _states(self, batches, keys) -> pa.Table:
        """One state row per group of ``batches`` (the columns ``_final`` merges)."""
        table = pa.Table.from_batches(batches, schema=self.input.schema)
        states = [state for spec in self.specs for state in partial_specs(spec)]
        return aggregate_table(table, keys, states)

    def _final(self, table: pa.Table, keys: list[str]) -> pa.Table:
        merges = [m for spec in self.specs for m in merge_specs(spec)]
        merged = aggregate_table(table, keys, merges)
        columns = [merged.column(i) for i in range(len(keys))]
        position = len(keys)
        for spec in self.specs:
            width = len(merge_specs(spec))
            columns.append(finish_merged(spec, [merged.column(position + i)
                                                for i in range(width)]))
            position += width
        return pa.table(columns, names=list(self.schema.names))
