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

Spilling (Single and Final with GROUP BY), DataFusion style: the held input is reduced to one
state row per group, sorted by the group keys and written as a run; memory is freed and
reading goes on. At the end the runs (and the last in-memory states) are merged by key and
re-aggregated by the streaming sorted-group aggregation, which holds one open group at a
time, so memory stays bounded whatever the number of groups or the skew of the keys:

    input ─▶ held rows ──pool says no──▶ states ─▶ sort by keys ─▶ run 0, run 1, ... (files)
                │                                                    │
                └─ end: states (last, in memory) ────────────────────┴─▶ k-way merge (in
                                                         levels when many) ─▶ StateCarry ─▶ out

Aggregates without mergeable states (median, string_agg, DISTINCT, ...) spill their raw rows
sorted by the keys instead and merge into ``RowCarry``, which holds one group's rows: a single
group larger than memory fails with ResourcesExhausted naming the aggregate.
A Partial aggregate never spills: under pressure it flushes its states downstream. A global
aggregate (no GROUP BY) of decomposable functions folds what it holds into one state row.
"""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.exec.memory_pool import (
    AmortizedAccount,
    buffer_cap,
    nearly_full,
    partial_flush_bytes,
)
from plansight.engine.functions.aggregate import (
    AggregateSpec,
    aggregate_table,
    finish_merged,
    is_decomposable,
    merge_specs,
    partial_specs,
)
from plansight.engine.logical.expr import Column, SortKey
from plansight.engine.physical.aggregates.sorted_groups import RowCarry, StateCarry, comparable
from plansight.engine.physical.plan import (
    SINGLE_PARTITION,
    UNSPECIFIED,
    ExecutionPlan,
    Partitioning,
    hash_distribution,
)
from plansight.engine.physical.sorts.sorted_runs import SortedRuns
from plansight.engine.physical.vocabulary import AggregateMode


class AggregateExec(ExecutionPlan):
    name = "AggregateExec"

    def __init__(self, input: ExecutionPlan, keys: list[Column], specs: list[AggregateSpec],
                 schema: pa.Schema, mode: str = "Single"):
        super().__init__(schema)
        self.input, self.keys, self.specs = input, list(keys), list(specs)
        self.mode = AggregateMode.of(mode)
        # rows sorted on the group keys arrive group after group: stream, no hash table
        self.sorted_prefix = self._sorted_key_prefix()

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return AggregateExec(children[0], self.keys, self.specs, self.schema, self.mode)

    def required_input_distribution(self):
        if self.mode is AggregateMode.PARTIAL:
            return [UNSPECIFIED]
        if not self.keys:
            return [SINGLE_PARTITION]
        return [hash_distribution(self.keys)]

    def output_partitioning(self):
        part = self.input.output_partitioning()
        if self.mode is AggregateMode.PARTIAL:
            return Partitioning(part.count)
        if part.count == 1:
            return Partitioning(1)
        equivalences = self.input.equivalences()
        if part.hash_exprs is None or not hash_distribution(self.keys).satisfied_by(
                part, equivalences):
            return Partitioning(part.count, tuple(self.keys))  # what EnsureRequirements adds
        # the input's own hash keys, as group key columns: it may be hashed on fewer columns
        # than the keys (the others constant), and a join above must know the exact ones
        keys = [next((k for k in self.keys if equivalences.same(e, k)), None)
                for e in part.hash_exprs]
        if any(k is None for k in keys):
            return Partitioning(part.count)
        return Partitioning(part.count, tuple(keys))

    def _sorted_key_prefix(self) -> tuple[SortKey, ...] | None:
        """The input ordering's leading keys when they are the group keys (any order and
        direction, or columns known equal to them), as key columns, then the constant keys;
        else None. Constant keys need no ordering: every row has the same value."""
        if not self.keys:
            return None
        if not all(comparable(self.input.schema.field(k.field_name).type) for k in self.keys):
            return None
        equivalences = self.input.equivalences()
        constants = [k for k in self.keys if equivalences.is_constant(k)]
        classes = {equivalences.representative(k): k for k in self.keys
                   if not equivalences.is_constant(k)}
        prefix = equivalences.normalize_ordering(self.input.output_ordering() or ())
        prefix = prefix[:len(classes)]
        if {rep for rep, _, _ in prefix} != set(classes):
            return None
        return tuple(SortKey(classes[rep], descending, nulls_first)
                     for rep, descending, nulls_first in prefix) + \
            tuple(SortKey(k) for k in constants)

    def output_ordering(self):
        return self.sorted_prefix

    def display(self) -> str:
        keys = ", ".join(k.name for k in self.keys)
        aggs = ", ".join(
            f"{s.func}({'DISTINCT ' if s.distinct else ''}"
            f"{s.column.split('#')[0] if s.column else '*'})"
            for s in self.specs)
        ordering = ", ordering_mode=Sorted" if self.sorted_prefix else ""
        return f"AggregateExec: mode={self.mode}{ordering}, gby=[{keys}], aggr=[{aggs}]"

    PARTIAL_CHUNK_ROWS = 1 << 20

    def _execute(self, partition, ctx):
        if self.sorted_prefix:
            yield from self._execute_sorted(partition, ctx)
            return
        name = f"{self.name}({self.mode})[{partition}]"
        # a partial aggregate never spills: under pressure it flushes its states downstream
        spills = self.mode is not AggregateMode.PARTIAL and bool(self.keys) and all(
            comparable(self.input.schema.field(k.field_name).type) for k in self.keys)
        reservation = ctx.memory_pool.register(name, can_spill=spills)
        keys = [k.field_name for k in self.keys]
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        # a partial aggregate keeps at most a fair share of the pool before it flushes
        partitions = self.output_partitioning().count
        flush_bytes = partial_flush_bytes(ctx.memory_pool, partitions)
        account = AmortizedAccount(reservation)  # a pool grant per chunk, not per batch
        runs = SortedRuns(ctx, [SortKey(k) for k in self.keys], self._run_schema(), metrics,
                          name, partitions) if spills else None
        # the held rows leave room for the merge and the siblings' shares: a greedy sibling
        # must not starve the others' merges (as in the external sort)
        cap = buffer_cap(ctx.memory_pool, partitions, runs.merge_budget()) if runs else None
        # a global aggregate of decomposable functions folds what it holds into one state
        # row when refused memory: O(1) state, nothing to spill
        folds = self.mode is AggregateMode.SINGLE and not self.keys and \
            all(is_decomposable(s) for s in self.specs)
        states = []  # folded state rows (global aggregate under pressure)
        try:
            batches, rows = [], 0
            for batch in self.input.execute(partition, ctx):
                if not ((cap is None or account.used + batch.nbytes <= cap) and
                        account.try_add(batch.nbytes)):
                    metrics.set_max("peak_mem", account.used)
                    if folds:
                        states.append(self._states(batches + [batch], keys))
                        batches, rows = [], 0
                        account.reset()
                        account.add(sum(state.nbytes for state in states))  # a row per fold
                        continue
                    if self.mode is AggregateMode.PARTIAL:
                        # flush what is held; a refused batch held by nobody is aggregated on
                        # the spot, like any streaming operator's batch in flight
                        yield from self._partial(batches + [batch], keys, ctx)
                        batches, rows = [], 0
                        account.reset()
                        continue
                    if runs is not None:
                        runs.spill(self._run_batches(batches + [batch], keys))
                        batches, rows = [], 0
                        account.reset()
                        runs.reserve_merge_budget()
                        continue
                    account.add(batch.nbytes)  # raises ResourcesExhausted
                batches.append(batch)
                rows += batch.num_rows
                if self.mode is AggregateMode.PARTIAL and (rows >= self.PARTIAL_CHUNK_ROWS or (
                        flush_bytes is not None and account.used >= flush_bytes)):
                    metrics.set_max("peak_mem", account.used)
                    yield from self._partial(batches, keys, ctx)
                    batches, rows = [], 0
                    account.reset()
            metrics.set_max("peak_mem", account.used)
            if self.mode is AggregateMode.PARTIAL:
                if batches or not self.keys:
                    yield from self._partial(batches, keys, ctx)
                return
            if runs is not None and runs.runs:
                yield from self._merge_runs(runs, batches, keys, account, ctx)
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
            if runs is not None:
                metrics.set_max("peak_mem", reservation.peak + runs.merge_peak)
                runs.close()
            reservation.free()

    def _execute_sorted(self, partition, ctx):
        """Emit each group once the next one starts; hold only the open group."""
        reservation = ctx.memory_pool.register(f"{self.name}({self.mode})[{partition}]")
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        keys = [k.field_name for k in self.keys]
        if all(is_decomposable(s) for s in self.specs):
            carry = StateCarry(keys, self.specs, self.schema,
                               input_is_states=self.mode is AggregateMode.FINAL,
                               finish=self.mode is not AggregateMode.PARTIAL)
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
        result = self._final(table, keys) if self.mode is AggregateMode.FINAL else \
            aggregate_table(table, keys, self.specs)
        result = pa.Table.from_arrays(result.columns, schema=self.schema)
        yield from result.to_batches(max_chunksize=ctx.batch_size)

    # -- spilling: sorted runs of states, merged and re-aggregated by key ---------

    def _mergeable(self) -> bool:
        """Whether runs hold states (merged by StateCarry) rather than raw rows (RowCarry)."""
        return all(is_decomposable(s) for s in self.specs)

    def _run_schema(self) -> pa.Schema:
        if not self._mergeable():
            return self.input.schema
        states = [state for spec in self.specs for state in partial_specs(spec)]
        return pa.schema([self.input.schema.field(k.field_name) for k in self.keys] +
                         [pa.field(state.output, state.type) for state in states])

    def _run_batches(self, batches, keys) -> list[pa.RecordBatch]:
        """What a run holds for ``batches``: one state row per group (merged states in Final
        mode), or the rows themselves when the states are not mergeable."""
        if not self._mergeable():
            return batches
        if self.mode is AggregateMode.FINAL:  # the input holds states already: merge them
            merges = [m for spec in self.specs for m in merge_specs(spec)]
            table = aggregate_table(pa.Table.from_batches(batches, schema=self.input.schema),
                                    keys, merges)
        else:
            table = self._states(batches, keys)
        schema = self._run_schema()
        columns = [column.cast(field.type) if column.type != field.type else column
                   for column, field in zip(table.columns, schema)]
        return pa.Table.from_arrays(columns, schema=schema).to_batches()

    def _merge_runs(self, runs: SortedRuns, batches, keys, account, ctx):
        """Merge the runs and the held rows by key; aggregate the groups as they complete."""
        reservation = account.reservation
        last = self._run_batches(batches, keys) if batches else []
        pressure = nearly_full(ctx.memory_pool)
        account.reset()  # the held rows are reduced: hold only their states
        if last and (pressure or len(runs.runs) + 1 > runs.fan_in or
                     not account.try_add(sum(b.nbytes for b in last))):
            runs.spill(last)
            last = []
            account.reset()
        if self._mergeable():
            carry = StateCarry(keys, self.specs, self.schema, input_is_states=True, finish=True)
        else:
            carry = RowCarry(keys, self.specs, self.schema)
        held = reservation.size  # the last run's; the carry's open group comes on top
        # the merge emits small batches (a round's safe rows); the carry's cost is per batch,
        # so they are gathered to batch_size rows first while the pool allows it
        pending, rows, pending_bytes = [], 0, 0
        for batch in runs.merged(last):
            pending.append(batch)
            rows += batch.num_rows
            pending_bytes += batch.nbytes
            if rows < ctx.batch_size and \
                    reservation.try_resize(held + carry.held_bytes + pending_bytes):
                continue
            for table in carry.push(pa.concat_batches(pending)):
                yield from table.to_batches(max_chunksize=ctx.batch_size)
            pending, rows, pending_bytes = [], 0, 0
            reservation.resize(held + carry.held_bytes)  # one group must fit; if not, say so
        if pending:
            for table in carry.push(pa.concat_batches(pending)):
                yield from table.to_batches(max_chunksize=ctx.batch_size)
        for table in carry.finish():
            yield from table.to_batches(max_chunksize=ctx.batch_size)

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
