"""AggregateExec: hash aggregation (GROUP BY) over pre-projected key and argument columns.

The planner projects every group key and aggregate argument into a plain column first, so
this operator only groups columns; the grouping itself runs in Arrow's C++ hash aggregation.

Modes:
    Single   all rows of a group arrive in one partition; aggregate them.
    Partial  per input partition, every ~1M rows: reduce to one state row per group.
    Final    per hash partition of the keys: merge the states, finish (avg = sum / count).

A Partial whose keys barely repeat (the planner expects about as many groups as rows and its
first batch agrees, or its first chunk kept more than ``SKIP_RATIO`` of its rows as groups)
stops aggregating, as
DataFusion's "skip partial aggregation": each later row goes on as a state of its own
(``row_states``: sum(x) -> x, count(x) -> 1 or 0, ...), which the Final merges as any state;
EXPLAIN ANALYZE counts them as ``skipped_aggregation_rows``. Aggregating them would cost a
full hash aggregation for almost no fewer rows crossing the exchange.

Single and Final compact as Partial reduces: every chunk of held rows becomes state rows
merged into those held so far, so few groups hold little whatever the input's size.

    scan ─▶ Partial ─▶ Repartition(Hash(keys)) ─▶ Final      (only a few rows cross threads)
    scan ─▶ Partial ─▶ CoalescePartitions ─▶ Final(single)  (few groups: one merge, no hashing)

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
    has_row_states,
    is_decomposable,
    merge_specs,
    partial_specs,
    row_states,
    with_schema,
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
                 schema: pa.Schema, mode: str = "Single", single_final: bool = False,
                 hash_on: list[Column] | None = None):
        super().__init__(schema)
        self.input, self.keys, self.specs = input, list(keys), list(specs)
        # the group keys an exchange below hashes on (a subset of the keys), None: all
        self.hash_on = list(hash_on) if hash_on else None
        self.mode = AggregateMode.of(mode)
        # a Final aggregate of few groups: every partial state in one partition
        self.single_final = single_final and self.mode is AggregateMode.FINAL
        # rows sorted on the group keys arrive group after group: stream, no hash table
        self.sorted_prefix = self._sorted_key_prefix()

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return AggregateExec(children[0], self.keys, self.specs, self.schema, self.mode,
                             self.single_final, self.hash_on)

    def required_input_distribution(self):
        if self.mode is AggregateMode.PARTIAL:
            return [UNSPECIFIED]
        if not self.keys or self.single_final:
            return [SINGLE_PARTITION]
        return [hash_distribution(self.keys, hash_on=self.hash_on)]

    def output_partitioning(self):
        part = self.input.output_partitioning()
        if self.mode is AggregateMode.PARTIAL:
            return Partitioning(part.count)
        if part.count == 1 or self.single_final:  # single_final: a merge is inserted below
            return Partitioning(1)
        equivalences = self.input.equivalences()
        distribution = self.required_input_distribution()[0]
        if not distribution.satisfied_by(part, equivalences):
            # what EnsureRequirements adds
            return Partitioning(part.count, distribution.repartition_exprs)
        # the input's own keys, as group key columns: it may be partitioned on fewer columns
        # than the keys, and a join above must know the exact ones
        return part.renamed(
            lambda e: next((k for k in self.keys if equivalences.same(e, k)), None))

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
        def arguments(spec: AggregateSpec) -> str:
            names = [spec.column or "*"] + ([spec.option("second_column")]
                                            if spec.option("second_column") else [])
            return ", ".join(name.split("#")[0] for name in names)

        aggs = ", ".join(f"{s.func}({'DISTINCT ' if s.distinct else ''}{arguments(s)})"
                         for s in self.specs)
        ordering = ", ordering_mode=Sorted" if self.sorted_prefix else ""
        hash_on = f", hash_on=[{', '.join(k.name for k in self.hash_on)}]" \
            if self.hash_on and self.mode is not AggregateMode.PARTIAL else ""
        return f"AggregateExec: mode={self.mode}{ordering}, gby=[{keys}], aggr=[{aggs}]" \
            f"{hash_on}"

    # A partial aggregate reduces its input in chunks: one aggregate_table call per chunk
    # amortizes the per-call cost, and the bytes bound keeps wide rows from holding much
    # (TPC-H Q1's ~90-byte rows: 1M rows were 92 MiB per partition, 16 MiB are ~180K rows)
    PARTIAL_CHUNK_ROWS = 1 << 20
    PARTIAL_CHUNK_BYTES = 16 << 20

    def _execute(self, partition, ctx):
        if self.sorted_prefix:
            yield from self._execute_sorted(partition, ctx)
            return
        state = _HashPartition(self, partition, ctx)
        try:
            for batch in self.input.execute(partition, ctx):
                yield from state.insert(batch)
            yield from state.finish()
        finally:
            state.close()

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
        result = with_schema(result, self.schema)
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
            table = pa.Table.from_batches(batches, schema=self.input.schema)
            return self._merge_states(table, keys).to_batches()
        return self._in_run_schema(self._states(batches, keys)).to_batches()

    def _merge_states(self, table: pa.Table, keys: list[str]) -> pa.Table:
        """States (of the Final input or the run schema) merged to one row per group."""
        merges = [m for spec in self.specs for m in merge_specs(spec)]
        return self._in_run_schema(aggregate_table(table, keys, merges))

    def _in_run_schema(self, table: pa.Table) -> pa.Table:
        schema = self._run_schema()
        columns = [column.cast(field.type) if column.type != field.type else column
                   for column, field in zip(table.columns, schema)]
        return pa.Table.from_arrays(columns, schema=schema)

    def _merge_runs(self, runs: SortedRuns, batches, keys, account, ctx, states=()):
        """Merge the runs, the held ``states`` and rows by key; aggregate the groups as they
        complete."""
        reservation = account.reservation
        last = list(states) + (self._run_batches(batches, keys) if batches else [])
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
            # one group must fit (once siblings' merges free memory); if not, say so
            reservation.resize(held + carry.held_bytes, wait=True)
        if pending:
            for table in carry.push(pa.concat_batches(pending)):
                yield from table.to_batches(max_chunksize=ctx.batch_size)
        for table in carry.finish():
            yield from table.to_batches(max_chunksize=ctx.batch_size)

    def _partial(self, batches, keys, ctx):
        yield from with_schema(self._states(batches, keys),
                               self.schema).to_batches(max_chunksize=ctx.batch_size)

    def _row_states(self, batch: pa.RecordBatch, keys: list[str]) -> pa.Table:
        """``batch``'s rows each as a state row of its own (a partial aggregate that skips
        aggregating, ``_HashPartition``), in the output schema."""
        table = pa.Table.from_batches([batch])
        columns = [table[k] for k in keys] + [
            state for spec in self.specs for state in row_states(spec, table)]
        return pa.Table.from_arrays([column if column.type == field.type else
                                     column.cast(field.type)
                                     for column, field in zip(columns, self.schema)],
                                    schema=self.schema)

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
        if not columns:
            return merged.select([])
        return pa.table(columns, names=list(self.schema.names))


class _HashPartition:
    """One partition of a hash aggregate: the rows it holds and what it does when the pool
    refuses more (as the external sort's ``_ExternalSort``).

    Single and Final aggregates of mergeable functions compact: every chunk of held rows is
    reduced to one state row per group and merged into the states held so far, so they hold
    O(groups), not O(input) (TPC-H Q1 at one partition held all 6M rows, 509 MiB, for 4
    groups). A chunk that barely reduces (most of its keys are new) or states grown past a few
    chunks turn compaction off for the partition: rows are then held as before, and merging
    ever larger states per chunk would cost more than it saves.

    A partial aggregate of nearly distinct keys skips aggregating (see the module docstring):
    it holds nothing, each batch goes on converted to states.

    Refused memory, by mode: a partial aggregate flushes its states downstream; a global
    aggregate of decomposable functions folds what it holds into one state row; a grouped
    final/single aggregate spills runs of states sorted by the group keys (``SortedRuns``),
    merged at the end; anything else raises ResourcesExhausted.
    """

    # compaction stops when a chunk's states keep more than this share of its rows, or the
    # states held exceed this many chunks' bytes
    COMPACT_MAX_RATIO = 0.5
    COMPACT_MAX_CHUNKS = 4
    # a partial aggregate stops aggregating when its groups keep more than this share of the
    # rows (DataFusion's skip_partial_aggregation_probe_ratio_threshold), judged on its first
    # chunk of at least this many rows (DataFusion's probe_rows_threshold). The chunk is the
    # usual one, not a smaller probe: a probe's states would cross the exchange unmerged with
    # the next chunk's (TPC-H Q13 at 2 partitions: 401K states instead of 249K)
    SKIP_RATIO = 0.8
    SKIP_PROBE_ROWS = 100_000
    # the states of compacted chunks are merged once the unmerged ones hold this many bytes
    MERGE_STATES_BYTES = AggregateExec.PARTIAL_CHUNK_BYTES

    def __init__(self, plan: AggregateExec, partition: int, ctx):
        self.plan, self.ctx = plan, ctx
        self.name = f"{plan.name}({plan.mode})[{partition}]"
        self.keys = [k.field_name for k in plan.keys]
        self.metrics = ctx.metrics.for_partition(plan.operator_id, plan.name, partition)
        # a partial aggregate never spills: under pressure it flushes its states downstream
        spills = plan.mode is not AggregateMode.PARTIAL and bool(plan.keys) and all(
            comparable(plan.input.schema.field(k.field_name).type) for k in plan.keys)
        self.reservation = ctx.memory_pool.register(self.name, can_spill=spills)
        self.account = AmortizedAccount(self.reservation)  # a pool grant per chunk, not batch
        partitions = plan.output_partitioning().count
        # a partial aggregate keeps at most a fair share of the pool before it flushes
        self.flush_bytes = partial_flush_bytes(ctx.memory_pool, partitions)
        self.runs = SortedRuns(ctx, [SortKey(k) for k in plan.keys], plan._run_schema(),
                               self.metrics, self.name, partitions) if spills else None
        # the held rows leave room for the merge and the siblings' shares: a greedy sibling
        # must not starve the others' merges (as in the external sort)
        self.cap = buffer_cap(ctx.memory_pool, partitions, self.runs.merge_budget()) \
            if self.runs else None
        # a global aggregate of decomposable functions folds what it holds into one state
        # row when refused memory: O(1) state, nothing to spill
        self.folds = plan.mode is AggregateMode.SINGLE and not plan.keys and \
            all(is_decomposable(s) for s in plan.specs)
        self.compacts = plan.mode is not AggregateMode.PARTIAL and plan._mergeable()
        # a partial aggregate whose keys barely repeat hands rows on as states (``insert``):
        # from its second batch when the planner expects no reduction and the first batch
        # agrees, else when its first chunk of at least ``SKIP_PROBE_ROWS`` rows kept more
        # than ``SKIP_RATIO`` of them as groups
        skips = plan.mode is AggregateMode.PARTIAL and bool(plan.keys) and \
            all(has_row_states(s) for s in plan.specs)
        estimate = self._estimated_ratio()
        self.skipping = skips and estimate is not None and estimate > self.SKIP_RATIO
        self.probing = skips and not self.skipping
        self.confirming = self.skipping
        # chunks held before the first compaction: one when the planner expects the groups
        # to reduce the rows, else several (bounded all the same, should it be wrong)
        self.compact_chunks = 1 if self._expects_reduction() else self.COMPACT_MAX_CHUNKS
        # compacted state rows, in the run schema: one table per compacted chunk, merged
        # only when the unmerged ones pass a chunk's bytes (``_compact``)
        self.states: list[pa.Table] = []
        self.states_bytes = self.unmerged_bytes = 0
        self.batches: list[pa.RecordBatch] = []
        self.rows = 0
        self.held_bytes = 0  # of ``batches`` (the account also counts ``states``)

    def insert(self, batch: pa.RecordBatch):
        """Hold ``batch``; yields what a partial aggregate flushes."""
        plan, account = self.plan, self.account
        if self.confirming:
            # the estimate said skip; the first batch is aggregated to check it: keys that
            # repeat within one batch repeat (a GROUP BY a, b with b a function of a, which
            # the estimate takes as independent)
            self.confirming = False
            states = plan._states([batch], self.keys)
            self.skipping = states.num_rows > self.SKIP_RATIO * batch.num_rows
            yield from with_schema(states, plan.schema).to_batches(
                max_chunksize=self.ctx.batch_size)
            return
        if self.skipping:  # nothing held: each row goes on as its own state
            self.metrics.add("skipped_aggregation_rows", batch.num_rows)
            yield from plan._row_states(batch, self.keys).to_batches(
                max_chunksize=self.ctx.batch_size)
            return
        if not ((self.cap is None or account.used + batch.nbytes <= self.cap) and
                account.try_add(batch.nbytes)):
            self.metrics.set_max("peak_mem", account.used)
            if self.folds:
                self._compact(self.batches + [batch])
                return
            if plan.mode is AggregateMode.PARTIAL:
                # flush what is held; a refused batch held by nobody is aggregated on the
                # spot, like any streaming operator's batch in flight
                yield from plan._partial(self.batches + [batch], self.keys, self.ctx)
                self._release()
                return
            if self.runs is not None:
                self.runs.spill(self._take_states() +
                                plan._run_batches(self.batches + [batch], self.keys))
                self._release()
                self.runs.reserve_merge_budget()
                return
            account.add(batch.nbytes)  # raises ResourcesExhausted
        self.batches.append(batch)
        self.rows += batch.num_rows
        self.held_bytes += batch.nbytes
        full = self.rows >= plan.PARTIAL_CHUNK_ROWS or self.held_bytes >= plan.PARTIAL_CHUNK_BYTES
        if plan.mode is AggregateMode.PARTIAL and (
                full or (self.flush_bytes is not None and account.used >= self.flush_bytes)):
            self.metrics.set_max("peak_mem", account.used)
            states = plan._states(self.batches, self.keys)
            if self.probing and self.rows >= self.SKIP_PROBE_ROWS:
                # the first chunk of enough rows decides: do the keys repeat?
                self.probing = False
                self.skipping = states.num_rows > self.SKIP_RATIO * self.rows
            self._release()
            yield from with_schema(states, plan.schema).to_batches(
                max_chunksize=self.ctx.batch_size)
        elif self.compacts and (
                self.rows >= self.compact_chunks * plan.PARTIAL_CHUNK_ROWS or
                self.held_bytes >= self.compact_chunks * plan.PARTIAL_CHUNK_BYTES):
            self.metrics.set_max("peak_mem", account.used)
            self._compact(self.batches)

    def _estimated_ratio(self) -> float | None:
        """The planner's estimate of groups per input row (None: it has none)."""
        groups, rows = self.plan.row_estimate, self.plan.input.row_estimate
        return None if groups is None or not rows else groups / rows

    def _expects_reduction(self) -> bool:
        """Whether the planner's estimates have the groups reduce a chunk of rows to at most
        ``COMPACT_MAX_RATIO`` of them (or say nothing). Where they expect about as many
        groups as rows, compacting the first chunk hashes its keys once more for little
        memory saved (TPC-H Q10: 86K of 114K joined rows, seven keys with four long
        strings, made 30K states merged again at the end: 74 ms of aggregation where one
        pass takes 35 ms); its rows are then held up to ``COMPACT_MAX_CHUNKS`` chunks,
        and compacted there, like any chunk, should the estimate be wrong."""
        ratio = self._estimated_ratio()
        return ratio is None or ratio <= self.COMPACT_MAX_RATIO

    def _compact(self, batches: list[pa.RecordBatch]) -> None:
        """Reduce ``batches`` (held or refused) to states, kept beside the states held.

        The states of the chunks are merged with each other only once the unmerged ones
        hold a chunk's bytes: the final aggregate (or a spilled run) merges them anyway, and
        merging a few groups' states per chunk cost more than computing them (TPC-H Q1 at
        one partition: 53 chunks of 4 groups, ~2 ms of Python per merge)."""
        plan = self.plan
        schema = plan._run_schema()
        chunk = pa.Table.from_batches(plan._run_batches(batches, self.keys), schema=schema)
        rows = sum(b.num_rows for b in batches)
        self.states.append(chunk)
        self.states_bytes += chunk.nbytes
        self.unmerged_bytes += chunk.nbytes
        if len(self.states) > 1 and self.unmerged_bytes > self.MERGE_STATES_BYTES:
            self.states = [plan._merge_states(pa.concat_tables(self.states), self.keys)]
            self.states_bytes, self.unmerged_bytes = self.states[0].nbytes, 0
        self._release()
        self.account.add(self.states_bytes)
        if chunk.num_rows > self.COMPACT_MAX_RATIO * rows or \
                self.states_bytes > self.COMPACT_MAX_CHUNKS * plan.PARTIAL_CHUNK_BYTES:
            self.compacts = False

    def _take_states(self) -> list[pa.RecordBatch]:
        """The compacted states, handed over (to a spilled run or the final merge)."""
        states, self.states = self.states, []
        self.states_bytes = self.unmerged_bytes = 0
        return [batch for table in states for batch in table.to_batches()]

    def finish(self):
        """Yields the aggregate of everything inserted (merging spilled runs or states)."""
        plan, ctx = self.plan, self.ctx
        self.metrics.set_max("peak_mem", self.account.used)
        if plan.mode is AggregateMode.PARTIAL:
            if self.batches or not plan.keys:
                yield from plan._partial(self.batches, self.keys, ctx)
            return
        if self.runs is not None and self.runs.runs:
            yield from plan._merge_runs(self.runs, self.batches, self.keys, self.account, ctx,
                                        states=self._take_states())
            return
        if self.states:
            states = self._take_states()
            if self.batches:
                states += plan._run_batches(self.batches, self.keys)
            result = plan._final(pa.Table.from_batches(states, schema=plan._run_schema()),
                                 self.keys)
            yield from result.to_batches(max_chunksize=ctx.batch_size)
            return
        if not self.batches and plan.keys:
            return
        yield from plan._aggregate(pa.Table.from_batches(self.batches,
                                                         schema=plan.input.schema),
                                   self.keys, ctx)

    def _release(self) -> None:
        """The held rows went downstream, into states or into a run."""
        self.batches, self.rows, self.held_bytes = [], 0, 0
        self.account.reset()

    def close(self) -> None:
        if self.runs is not None:
            # the buffer's and the merge's reservations are held at once: their peaks add
            self.metrics.set_max("peak_mem", self.reservation.peak + self.runs.merge_peak)
            self.runs.close()
        self.reservation.free()
