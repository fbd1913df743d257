"""HashWindowAggExec: window functions over unsorted input, without sorting the rows.

SQL promises no output order without ORDER BY, so a window over unsorted input does not
have to move its input into (partition, order) order. It only needs the *window column* of
every row. Every decision is made on integers, and the payload columns never move
(DESIGN principles 3 and 4)::

    input batches (held) ──┬───────────────────────────────────────────────┐ untouched
                           │ partition keys ─ dictionary codes 0..k-1      │
                           │ order keys ───── uint64 ranks                 │
                           │ (codes, ranks) ─ radix argsort ─▶ perm        │
                           │ args[perm], keys[perm] ─ evaluate_window      │
                           │ values ─ take(inverse perm) ─▶ input order ───┴─▶ batch + column
                           │
                           └ whole-partition aggregates: no permutation at all; per-code
                             bincount / ufunc.at, broadcast with codes  (mode=hash-broadcast)

Windows with the same partition keys share the codes; an ORDER BY that is a prefix of
another window's ORDER BY, or of its reverse, shares its permutation (a reversed one is
the same permutation with every partition's run reversed). Output rows keep the input's
row order and batches; each gets the window columns appended as zero-copy slices.

The operator holds its whole input partition (like a sort would). When the memory pool
refuses, it falls back to sorting: the held batches and the rest of the input go through
SortExec (which spills sorted runs and merges them) into the sorted executors —
BoundedWindowAggExec where every frame ends a bounded distance ahead, else the
partition-at-a-time WindowAggExec, which streams or folds a partition larger than memory
(``window_spill``). The spills of these internal stages count on this operator.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from plansight.engine.errors import InternalError, PlanError
from plansight.engine.exec.concurrent import pieces_for, run_concurrently, split_runs
from plansight.engine.exec.memory_pool import sort_headroom
from plansight.engine.functions.capabilities import capabilities
from plansight.engine.functions.window import evaluate_window
from plansight.engine.functions.window.broadcast import broadcastable, whole_partition_aggregate
from plansight.engine.functions.window.frame_spec import FrameBound, FrameSpec
from plansight.engine.functions.window.permutation import (
    partition_codes,
    reverse_within_runs,
    sort_permutation_unique,
    sort_ranks,
)
from plansight.engine.kernels.gather import gather_into, scatter_into
from plansight.engine.logical.expr import Column, Expr, Literal, SortKey, WindowCall
from plansight.engine.physical.expressions import evaluate, evaluate_predicate
from plansight.engine.physical.plan import (
    SINGLE_PARTITION,
    ExecutionPlan,
)
from plansight.engine.physical.sorts.sort import SortExec
from plansight.engine.physical.windows.bounded_window_agg import (
    BoundedWindowAggExec,
    bounded_supported,
)
from plansight.engine.physical.windows.chain import (
    chain,
    group_windows,
    reorder,
    sort_keys,
)
from plansight.engine.physical.windows.window_agg import WindowAggExec
from plansight.engine.physical.windows.window_shape import (
    describe_window,
    is_whole_partition,
    reversed_ordering,
    sees_tie_order,
)

# bytes of working memory per row and window: codes, ranks, permutation, inverse, result
_WORK_BYTES_PER_ROW = 40


@dataclass(frozen=True)
class _Sort:
    """One permutation: rows grouped by ``partition_by``, ordered by ``order_by``."""

    partition_by: tuple[Expr, ...]
    order_by: tuple[SortKey, ...]


@dataclass(frozen=True)
class _Plan:
    """How one window is evaluated: ``mode`` hash-broadcast | permuted; the permutation
    ``sort`` (also the fallback of hash-broadcast) and whether it is walked backwards."""

    mode: str
    sort: int
    backwards: bool = False
    whole: bool = False  # the frame is the whole partition and the order does not matter


def _same_partitions(a: tuple[Expr, ...], b: tuple[Expr, ...]) -> bool:
    return set(a) == set(b)


def _is_prefix(short: tuple[SortKey, ...], long: tuple[SortKey, ...]) -> bool:
    return len(short) <= len(long) and tuple(long[:len(short)]) == tuple(short)


def plan_permutations(windows: list[WindowCall]) -> tuple[list[_Sort], list[_Plan]]:
    """Assign every window a permutation, sharing one whenever the orderings allow."""
    sorts: list[_Sort] = []
    plans: list[_Plan | None] = [None] * len(windows)
    # longest orderings first, so that shorter ones can reuse them
    for i in sorted(range(len(windows)), key=lambda j: -len(windows[j].order_by)):
        window = windows[i]
        whole = is_whole_partition(window)
        mode = "hash-broadcast" if whole and broadcastable(
            window.func, [a.type for a in window.args], window.distinct) else "permuted"
        # a whole-partition frame ignores the order
        order = () if whole else tuple(window.order_by)
        # a window that sees the order of its ties keeps them in input order: it shares only
        # a permutation sorted by exactly its keys, forwards (the sort is stable)
        exact = sees_tie_order(window)
        found = None
        for s, sort in enumerate(sorts):
            if not _same_partitions(sort.partition_by, window.partition_by):
                continue
            if (order == sort.order_by) if exact else _is_prefix(order, sort.order_by):
                found = _Plan(mode, s, whole=whole)
            elif not exact and _is_prefix(order, reversed_ordering(sort.order_by)):
                found = _Plan(mode, s, backwards=True, whole=whole)
            if found is not None:
                break
        if found is None:
            sorts.append(_Sort(tuple(window.partition_by), order))
            found = _Plan(mode, len(sorts) - 1, whole=whole)
        plans[i] = found
    return sorts, [p for p in plans if p is not None]


class HashWindowAggExec(ExecutionPlan):
    """Window functions over unsorted input: integer permutations, results scattered back."""

    name = "HashWindowAggExec"

    def __init__(self, windows: list[WindowCall], outputs: list[Column], input: ExecutionPlan):
        fields = list(input.schema) + [pa.field(o.field_name, o.type) for o in outputs]
        super().__init__(pa.schema(fields))
        if len(windows) != len(outputs) or not windows:
            raise PlanError("HashWindowAggExec needs one output column per window function")
        self.windows, self.outputs, self.input = list(windows), list(outputs), input
        self.sorts, self.plans = plan_permutations(self.windows)

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return HashWindowAggExec(self.windows, self.outputs, children[0])

    def required_input_distribution(self):
        # One pass over the whole input (codes, one permutation, vectorized kernels) beats a
        # hash shuffle of the partition keys through Python queues: measured on the RFC
        # workloads with 2 cores, 117 ms of CPU per 1M rows here vs 819 ms with the shuffle.
        # Partitions are merged (CoalescePartitionsExec), never hashed, for this executor.
        return [SINGLE_PARTITION]

    def required_input_ordering(self):
        return [None]

    def maintains_input_order(self):
        # in-memory it does; the sorting fallback under memory pressure does not
        return [False]

    def sees_input_order(self) -> bool:
        """Whether a window's values depend on the input's order (of rows tied by its
        ORDER BY): keep_source_order then has the input merged in source order."""
        return any(sees_tie_order(w) for w in self.windows)

    def display(self) -> str:
        parts = []
        for window, plan in zip(self.windows, self.plans):
            sort = self.sorts[plan.sort]
            if plan.mode == "hash-broadcast":
                mode = "hash-broadcast"
            else:
                keys = [str(e) for e in sort.partition_by] + [str(k) for k in sort.order_by]
                mode = f"permuted by [{', '.join(keys)}]"
                if plan.backwards:
                    mode += " backwards"
            parts.append(f"{describe_window(window)}: mode={mode}")
        return f"HashWindowAggExec: wdw=[{', '.join(parts)}]"

    # -- execution ------------------------------------------------------------
    def _execute(self, partition, ctx):
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]", metrics=metrics)
        batches: list[pa.RecordBatch] = []
        stream = self.input.execute(partition, ctx)
        try:
            for batch in stream:
                if batch.num_rows == 0:
                    continue
                batches.append(batch)
                work = batch.num_rows * _WORK_BYTES_PER_ROW * len(self.windows)
                if not reservation.try_grow(batch.nbytes + work):
                    reservation.free()
                    yield from self._sorting_fallback(partition, ctx, batches, stream)
                    return
            if not batches:
                return
            table = pa.Table.from_batches(batches, schema=self.input.schema)
            columns = self._window_columns(table, max(1, ctx.config.target_partitions))
            offset = 0
            for batch in batches:
                rows = batch.num_rows
                yield pa.RecordBatch.from_arrays(
                    list(batch.columns) + [c.slice(offset, rows) for c in columns],
                    schema=self.schema)
                offset += rows
        finally:
            stream.close()
            reservation.free()

    def _window_columns(self, table: pa.Table, workers: int) -> list[pa.Array]:
        """Every window column, aligned with the rows of ``table``; the partition keys'
        encoding and the windows' kernels split over up to ``workers`` threads."""
        n = table.num_rows
        state = _State(table, workers)
        columns: list[pa.Array | None] = [None] * len(self.windows)
        # the last window reading each argument: its evaluated and gathered rows go after it
        last_reader = {a: i for i, window in enumerate(self.windows) for a in window.args}
        for i, (window, output, plan) in enumerate(zip(self.windows, self.outputs, self.plans)):
            done = [a for a in window.args if last_reader.get(a) == i]
            values = None
            if plan.mode == "hash-broadcast":
                codes, count = state.codes(window.partition_by)
                values = whole_partition_aggregate(
                    window.func, [state.column(a) for a in window.args], codes, count,
                    filter_mask=None if window.filter is None else
                    evaluate_predicate(window.filter, table), result_type=output.type)
            if values is None:
                values = self._permuted(window, plan, state, done)
            if values.type != output.type:
                values = values.cast(output.type)
            if len(values) != n:
                raise InternalError(f"window column has {len(values)} rows, expected {n}")
            columns[i] = values
            state.forget(done)
        return [c for c in columns if c is not None]

    def _permuted(self, window: WindowCall, plan: _Plan, state: _State,
                  done: list[Expr]) -> pa.Array:
        """The window in input order; ``done``: its arguments no later window reads, dropped
        once its pieces are computed, before the scatter allocates the result."""
        sort = self.sorts[plan.sort]
        perm = state.permutation(sort, plan.backwards)
        func, arguments = window.func, list(window.args)
        if func == "count" and not window.distinct and len(arguments) == 1 and \
                state.never_null(arguments[0]):
            # COUNT of a column without NULLs counts rows: nothing to permute
            func, arguments = "count_star", []
        # arguments are evaluated here and gathered into the permuted order by the threads,
        # each its own rows (Arrow's take releases the GIL): the gather of a whole column on
        # one thread left the other core idle
        args = [pa.scalar(a.value, a.type) if isinstance(a, Literal) else
                (state.column(a), a) for a in arguments]
        # a whole-partition frame ignores the order: the permutation may not follow it
        order_by = [] if plan.whole or not _needs_order_keys(window) else list(window.order_by)
        frame = None if plan.whole else window.frame
        if order_by and (_peer_frame(window) or func in ("rank", "dense_rank")) and \
                state.tie_free(window.order_by, perm):
            # no two rows of a partition tie: every peer group is one row, so the frame is
            # its ROWS frame, rank and dense_rank are the row number, and no peer groups are
            # computed (a third of a running COUNT or a RANK)
            if func in ("rank", "dense_rank"):
                func = "row_number"
            else:
                frame = FrameSpec("rows", frame.start, frame.end, frame.exclude) if frame \
                    else _RUNNING_ROWS
            order_by = []
        if func == "count_star" and window.filter is None and frame is not None and \
                frame.unit == "rows" and frame.start.kind == "unbounded_preceding" and \
                frame.end.kind == "current_row" and frame.exclude == "no_others":
            func = "row_number"  # the rows counted up to the current one: its number
        if frame is not None and frame.unit == "range" and frame.has_offset:
            # RANGE offsets search the values themselves
            order_keys = [state.permuted(k.expr, perm) for k in order_by]
            descending = [k.descending for k in order_by]
            nulls_first = [k.nulls_first for k in order_by]
        else:
            # only equality matters (peer groups): the integer ranks say the same, cheaper
            order_keys = [pa.array(state.ranks(k)[perm.perm]) for k in order_by]
            descending = nulls_first = [False] * len(order_by)
        mask = None
        if window.filter is not None:
            mask = perm.take(evaluate_predicate(window.filter, state.table))

        def evaluate(first: int, end: int) -> pa.Array:
            """The window over partitions ``first``..``end - 1`` (rows sliced, not copied)."""
            start, stop = int(perm.starts[first]), int(perm.starts[end])

            def rows(array):
                return array if isinstance(array, pa.Scalar) else \
                    array.slice(start, stop - start)
            return evaluate_window(
                func, [a if isinstance(a, pa.Scalar) else
                       state.permuted_rows(a[1], perm, start, stop) for a in args],
                partition_starts=perm.starts[first:end + 1] - start,
                order_keys=[rows(k) for k in order_keys], descending=descending,
                nulls_first=nulls_first, frame=frame, distinct=window.distinct,
                ignore_nulls=window.ignore_nulls,
                filter_mask=None if mask is None else rows(mask))

        # window partitions are independent: groups of them evaluate on their own threads
        groups = split_runs(perm.starts, pieces_for(state.table.num_rows, state.workers))
        pieces = run_concurrently([lambda g=g: evaluate(*g) for g in groups])
        args = None  # with the cache entries, the last references to the gathered rows
        state.forget(done)
        return perm.scatter(pieces)

    def _sorting_fallback(self, partition, ctx, held: list[pa.RecordBatch],
                          rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Out of memory: the held batches plus the rest of the input go through sorts (which
        spill) into the sorted executors: streaming where every frame allows, else
        partition-at-a-time (which streams or folds a partition larger than memory)."""

        plan: ExecutionPlan = _ReplayExec(self.input.schema, held, rest)
        # the window stages between the sorts cannot spill: each sort leaves them room
        headroom = sort_headroom(ctx.memory_pool)
        stages: list[ExecutionPlan] = []
        sorted_by: tuple[SortKey, ...] = ()  # the order of the rows so far

        def sorted_stage(windows, outputs, below):
            nonlocal sorted_by
            keys = sort_keys((windows[0].partition_by, windows[0].order_by))
            if keys and not _is_prefix(keys, sorted_by):
                below = SortExec(list(keys), below, preserve_partitioning=True,
                                 headroom=headroom)
                stages.append(below)
                sorted_by = keys
            # streaming where every frame allows, else partition at a time
            if windows[0].order_by and all(bounded_supported(w) for w in windows):
                stages.append(BoundedWindowAggExec(windows, outputs, below))
            else:
                stages.append(WindowAggExec(windows, outputs, below))
            return stages[-1]

        # longest sort keys first: a group whose keys are a prefix of the rows' order (the
        # whole-partition aggregates of PARTITION BY p after ORDER BY p, k) needs no sort
        groups = sorted(group_windows(self.windows).items(),
                        key=lambda group: -len(group[0][0]) - len(group[0][1]))
        plan, order = chain(self.windows, self.outputs, [g for _, g in groups], plan,
                            sorted_stage)
        select = reorder(order, len(self.input.schema))
        try:
            for batch in plan.execute(partition, ctx):
                yield pa.RecordBatch.from_arrays([batch.column(i) for i in select],
                                                 schema=self.schema)
        finally:
            # the internal stages are not in the plan tree: their spills move to this
            # operator, for EXPLAIN ANALYZE (moved, not copied: totals stay right)
            metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
            for stage in stages:
                inner = ctx.metrics.for_partition(stage.operator_id, stage.name, partition)
                for name in ("spill_count", "spilled_bytes", "spilled_rows"):
                    metrics.add(name, inner.values.pop(name, 0))
                metrics.set_max("peak_mem", inner["peak_mem"])


class _Permutation:
    """A sort permutation with its partition starts, scattering results back to input order."""

    def __init__(self, perm: np.ndarray, starts: np.ndarray,
                 tie_free_keys: frozenset | None = None):
        self.perm = perm
        self.starts = starts
        # the ORDER BY expressions known to have no two equal rows in a partition
        self.tie_free_keys = tie_free_keys
        self._indices = pa.array(perm, type=pa.int64())
        self._inverse: pa.Array | None = None

    def take(self, values: pa.Array) -> pa.Array:
        return values.take(self._indices)

    def indices(self, start: int, stop: int) -> pa.Array:
        """The input rows of permuted rows ``start``..``stop - 1``, to gather by."""
        return self._indices.slice(start, stop - start)

    def scatter(self, pieces: list[pa.Array]) -> pa.Array:
        """``pieces`` (the permuted order's rows, in consecutive runs) back in input order."""
        scattered = _scatter_primitive(pieces, self.perm)
        if scattered is not None:
            return scattered
        values = pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)
        if self._inverse is None:
            inverse = np.empty(len(self.perm), dtype=np.int64)
            inverse[self.perm] = np.arange(len(self.perm), dtype=np.int64)
            self._inverse = pa.array(inverse)
        return values.take(self._inverse)


_RUNNING_ROWS = FrameSpec("rows", FrameBound("unbounded_preceding"), FrameBound("current_row"))


def _peer_frame(window: WindowCall) -> bool:
    """Whether the window is an aggregate or frame function over a RANGE or GROUPS frame
    (the default one too) whose bounds are peer-group edges, no offsets, and whose
    exclusion is the same in rows: without ties it is its ROWS frame."""
    if capabilities(window.func).frameless:
        return False
    frame = window.frame
    return frame is None or (frame.unit in ("range", "groups") and not frame.has_offset
                             and frame.exclude in ("no_others", "current_row"))


def _needs_order_keys(window: WindowCall) -> bool:
    """Whether the kernel reads the ORDER BY values (peer groups, RANGE offsets) rather than
    only the row order the permutation already gives."""
    function = capabilities(window.func)
    if not function.reads_order:
        return False
    if function.frameless:  # rank and friends read peer groups, whatever the frame says
        return True
    frame = window.frame
    return frame is None or frame.unit != "rows" or frame.exclude in ("group", "ties")


def _scatter_primitive(pieces: list[pa.Array], perm: np.ndarray) -> pa.Array | None:
    """``result[perm] = concatenated pieces`` in numpy for fixed-width numbers, each piece
    written straight to its rows (no concatenated copy first); None for other types."""
    typ = pieces[0].type
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)) or \
            pa.types.is_float16(typ) or sum(len(p) for p in pieces) != len(perm) or \
            any(p.type != typ for p in pieces):
        return None
    dtype = typ.to_pandas_dtype()
    result = np.empty(len(perm), dtype=dtype)
    valid = np.ones(len(perm), dtype=bool) if any(p.null_count for p in pieces) else None
    starts = np.cumsum([0] + [len(p) for p in pieces])

    def write(piece: pa.Array, at: int) -> None:
        if len(piece) == 0:
            return
        rows = perm[at:at + len(piece)]
        # a compiled loop into numpy's (huge-page) result: kernels/gather.py says why
        scatter_into(np.frombuffer(piece.buffers()[1], dtype=dtype, count=len(piece),
                                   offset=piece.offset * typ.bit_width // 8), rows, result)
        if piece.null_count:
            valid[rows] = piece.is_valid().to_numpy(zero_copy_only=False)

    # the pieces write disjoint rows: each on its own thread (numpy's indexed assignment
    # releases the GIL), as the threads that computed them did
    run_concurrently([lambda p=p, at=int(at): write(p, at) for p, at in zip(pieces, starts)])
    return pa.array(result, type=typ, mask=None if valid is None else ~valid)


def _numbers(values: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """A stored integer or floating column without NULLs as one numpy array (its chunks
    copied into memory numpy allocates, which it backs with huge pages: the random gather
    by a permutation costs half as much a row there, kernels/gather.py); None for other
    types, NULLs, or a column that is one chunk already (read in place, no copy)."""
    typ = values.type
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)) or \
            pa.types.is_float16(typ) or values.null_count:
        return None
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    if len(chunks) == 1:
        return chunks[0].to_numpy()
    out = np.empty(len(values), dtype=typ.to_pandas_dtype())
    at = 0
    for chunk in chunks:
        out[at:at + len(chunk)] = chunk.to_numpy()
        at += len(chunk)
    return out


class _State:
    """Per-execution caches: evaluated columns, partition codes, ranks, permutations."""

    def __init__(self, table: pa.Table, workers: int = 1):
        self.table, self.workers = table, workers
        self._columns: dict[Expr, pa.Array] = {}
        # numeric columns without NULLs as numpy arrays (``column`` builds them), gathered by
        # a compiled loop in ``permuted_rows``
        self._numbers: dict[Expr, np.ndarray] = {}
        self._taken: dict[tuple[Expr, int], pa.Array] = {}
        self._taken_rows: dict[tuple[Expr, int, int, int], pa.Array] = {}
        self._ranks: dict[SortKey, np.ndarray] = {}
        self._codes: dict[frozenset, tuple[np.ndarray, int]] = {}
        self._perms: dict[tuple[_Sort, bool], _Permutation] = {}
        self._tie_free: dict[tuple, bool] = {}

    def column(self, expr: Expr) -> pa.Array:
        if expr not in self._columns:
            stored = isinstance(expr, Column) and \
                self.table.schema.get_field_index(expr.field_name) >= 0
            numbers = _numbers(self.raw(expr)) if stored else None
            if numbers is not None:
                self._numbers[expr] = numbers
                self._columns[expr] = pa.array(numbers)  # the same memory
            else:
                self._columns[expr] = evaluate(expr, self.table)
        return self._columns[expr]

    def forget(self, exprs: list[Expr]) -> None:
        """Drop the evaluated and gathered rows of ``exprs`` (no later window reads them):
        the next windows' arrays reuse their memory instead of adding to the peak."""
        gone = set(exprs)
        if not gone:
            return
        for expr in gone:
            self._columns.pop(expr, None)
            self._numbers.pop(expr, None)
        for cache in (self._taken, self._taken_rows):
            for key in [k for k in cache if k[0] in gone]:
                del cache[key]

    def permuted(self, expr: Expr, perm: _Permutation) -> pa.Array:
        key = (expr, id(perm))
        if key not in self._taken:
            self._taken[key] = perm.take(self.column(expr))
        return self._taken[key]

    def permuted_rows(self, expr: Expr, perm: _Permutation, start: int, stop: int
                      ) -> pa.Array:
        """Rows ``start``..``stop - 1`` of ``permuted(expr, perm)``, gathered alone (a slice
        when the whole column was gathered already). Called from the evaluation threads:
        ``expr`` must have been evaluated (``column``) before; each range is cached, so
        windows sharing an argument and a permutation (split alike) gather it once."""
        whole = self._taken.get((expr, id(perm)))
        if whole is not None:
            return whole.slice(start, stop - start)
        key = (expr, id(perm), start, stop)
        taken = self._taken_rows.get(key)
        if taken is None:
            numbers = self._numbers.get(expr)
            if numbers is not None:  # numpy's (huge-page) output: kernels/gather.py
                out = np.empty(stop - start, dtype=numbers.dtype)
                gather_into(numbers, perm.perm[start:stop], out)
                taken = pa.array(out)
            else:
                taken = self._columns[expr].take(perm.indices(start, stop))
            self._taken_rows[key] = taken
        return taken

    def ranks(self, key: SortKey) -> np.ndarray:
        if key not in self._ranks:
            self._ranks[key] = sort_ranks(self.raw(key.expr), key.descending,
                                          key.nulls_first)[0]
        return self._ranks[key]

    def raw(self, expr: Expr) -> pa.Array | pa.ChunkedArray:
        """The column as stored (chunked: no copy), or the evaluated expression."""
        if isinstance(expr, Column):
            index = self.table.schema.get_field_index(expr.field_name)
            if index >= 0:
                return self.table.column(index)
        return self.column(expr)

    def never_null(self, expr: Expr) -> bool:
        """Whether ``expr`` is NULL on no row (a literal that is not NULL, or a column or
        expression whose evaluated array has no NULLs)."""
        if isinstance(expr, Literal):
            return expr.value is not None
        # a stored column answers from its chunks' counts: nothing evaluated or combined
        return self.raw(expr).null_count == 0

    def tie_free(self, order_by: list[SortKey], perm: _Permutation) -> bool:
        """Whether no two rows of a partition have equal ``order_by`` keys, read from the
        ranks in ``perm``'s order (equal keys are adjacent there; NULLs, NaNs tie)."""
        if perm.tie_free_keys is not None and \
                frozenset(k.expr for k in order_by) == perm.tie_free_keys:
            return True  # the sort placed every row directly: the keys were distinct
        key = (tuple(order_by), id(perm))
        if key not in self._tie_free:
            n = len(perm.perm)
            same = np.ones(max(n - 1, 0), dtype=bool)
            for k in order_by:
                ranks = self.ranks(k)[perm.perm]
                same &= ranks[1:] == ranks[:-1]
            boundaries = perm.starts[1:-1]
            same[boundaries[boundaries > 0] - 1] = False  # rows of different partitions
            self._tie_free[key] = not same.any()
        return self._tie_free[key]

    def codes(self, partition_by: tuple[Expr, ...]) -> tuple[np.ndarray, int]:
        key = frozenset(partition_by)
        if key not in self._codes:
            self._codes[key] = partition_codes([self.raw(e) for e in partition_by],
                                               self.table.num_rows, self.workers)
        return self._codes[key]

    def permutation(self, sort: _Sort, backwards: bool) -> _Permutation:
        cached = self._perms.get((sort, backwards))
        if cached is not None:
            return cached
        if backwards:
            forward = self.permutation(sort, False)
            result = _Permutation(reverse_within_runs(forward.perm, forward.starts),
                                  forward.starts, forward.tie_free_keys)
        else:
            codes, count = self.codes(sort.partition_by)
            keys = [(codes, count)] if count > 1 else []
            for k in sort.order_by:
                ranks = self.ranks(k)
                keys.append((ranks, int(ranks.max()) + 1 if len(ranks) else 1))
            perm, unique = sort_permutation_unique(keys) if keys else \
                (np.arange(len(codes), dtype=np.int64), False)
            # the permutation lists code 0's rows first, then code 1's, ...
            sizes = np.bincount(codes, minlength=count)
            starts = np.concatenate(([0], np.cumsum(sizes[sizes > 0]))).astype(np.int64)
            # distinct (partition, order keys) tuples: no ties among those keys, whatever
            # their directions
            result = _Permutation(perm, starts, frozenset(k.expr for k in sort.order_by)
                                  if unique and sort.order_by else None)
        self._perms[(sort, backwards)] = result
        return result


class _ReplayExec(ExecutionPlan):
    """Batches already pulled from an input, then the rest of that input's stream."""

    name = "ReplayExec"

    def __init__(self, schema: pa.Schema, held: list[pa.RecordBatch],
                 rest: Iterator[pa.RecordBatch]):
        super().__init__(schema)
        self.held, self.rest = held, rest

    def _execute(self, partition, ctx):
        held, self.held = self.held, []
        held.reverse()
        while held:  # let go of each batch once handed on: the sort reserves what it keeps
            yield held.pop()
        yield from self.rest
