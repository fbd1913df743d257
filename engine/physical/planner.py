"""Lowering a logical plan to ExecutionPlan operators.

The planner chooses algorithms (hash vs nested-loop join, build side) and pre-projects
computed keys and aggregate arguments into columns; it never inserts shuffles or sorts for
requirements, which is EnsureRequirements' job.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from plansight.engine.catalog import MemorySource
from plansight.engine.errors import InternalError
from plansight.engine.exec.context import SessionConfig
from plansight.engine.functions.aggregate import AggregateSpec, is_decomposable, partial_specs
from plansight.engine.functions.comoments import BIVARIATE
from plansight.engine.logical import plan as lp
from plansight.engine.logical.estimate import estimate_rows, source_distinct
from plansight.engine.logical.expr import (
    Call,
    Column,
    Expr,
    Literal,
    conjunction,
    next_id,
    split_conjunction,
)
from plansight.engine.logical.fingerprint import repeated_subplans
from plansight.engine.optimizer.push_down_filters import pruning_hint, split_join_keys
from plansight.engine.physical.aggregates.aggregate import AggregateExec
from plansight.engine.physical.coalesce_partitions import CoalescePartitionsExec
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.filter import FilterExec
from plansight.engine.physical.joins.hash_join import SINGLE_PROBE_JOIN_TYPES, HashJoinExec
from plansight.engine.physical.joins.nested_loop_join import NestedLoopJoinExec
from plansight.engine.physical.limit import GlobalLimitExec
from plansight.engine.physical.plan import (
    ExecutionPlan,
    fill_row_estimates,
    hash_distribution,
    ordering_satisfies,
)
from plansight.engine.physical.projection import ProjectionExec
from plansight.engine.physical.recursive_query import RecursiveQueryExec
from plansight.engine.physical.scan import DataSourceExec
from plansight.engine.physical.shared import SharedExec, SharedResult
from plansight.engine.physical.sorts.sort import SortExec
from plansight.engine.physical.sorts.sort_preserving_merge import SortPreservingMergeExec
from plansight.engine.physical.union import UnionExec
from plansight.engine.physical.values import ValuesExec
from plansight.engine.physical.windows.planning import plan_window, stacked_windows
from plansight.engine.physical_optimizer import optimize_physical

# One group key is hashed alone when it has this many distinct values per target partition
# (fewer would leave partitions idle) and at least this share of the estimated groups (its
# values then spread the groups about as evenly as all keys would)
ONE_KEY_MIN_DISTINCT_PER_PARTITION = 64
ONE_KEY_GROUP_SHARE = 0.5
# A join computed twice runs once (SharedExec) when its estimated output is at most this
# share of the largest table it reads and its kept batches at most this many bytes (and a
# sixteenth of the memory limit, the working floor of consumers that cannot spill): below
# both, keeping the rows costs little next to joining again. TPC-H Q11: 32,000 rows of
# 800,000, about 2 MB.
SHARED_JOIN_MAX_INPUT_SHARE = 0.25
SHARED_JOIN_MAX_BYTES = 64 << 20
# bytes a value of a variable-width type is counted as in that estimate
_VARIABLE_WIDTH_BYTES = 32

_SWAPPED = {"inner": "inner", "left": "right", "right": "left", "full": "full",
            "semi": "right_semi", "anti": "right_anti"}
_DIRECT = {"inner": "inner", "left": "left", "right": "right", "full": "full",
           "semi": "left_semi", "anti": "left_anti", "cross": "inner"}


def schema_of(columns) -> pa.Schema:
    return pa.schema([pa.field(c.field_name, c.type) for c in columns])



class PhysicalPlanner:
    def __init__(self, config: SessionConfig):
        self.config = config
        self._repeated: dict[int, tuple] | None = None  # set from the root: see plan()
        self._copies: dict[tuple, list[lp.LogicalPlan]] = {}  # a repeated key's nodes
        # fingerprint -> (result, the first copy's plan, the first copy's columns; for a
        # loose key, the widened logical join)
        self._shared: dict[tuple, tuple[SharedResult, ExecutionPlan, object]] = {}

    def plan(self, node: lp.LogicalPlan) -> ExecutionPlan:
        """``node`` lowered to operators, each carrying its estimated output rows: the
        operator for ``node`` the node's estimate, helpers the planner put between it and
        its inputs (key projections, local sorts) their inputs' unless set."""
        if self._repeated is None:  # the root: subplans computed twice are run once
            repeated = repeated_subplans(node, self._small)
            self._repeated = {n: key for n, (key, _) in repeated.items()}
            for key, copy in repeated.values():
                self._copies.setdefault(key, []).append(copy)
        method = getattr(self, f"_plan_{type(node).__name__.lower()}", None)
        if method is None:
            raise InternalError(f"no physical plan for {type(node).__name__}")
        key = self._repeated.get(id(node))
        op = self._plan_shared(node, key, method) if key is not None else method(node)
        if op.row_estimate is None:
            op.row_estimate = estimate_rows(node)
        return fill_row_estimates(op)

    def _small(self, node: lp.LogicalPlan) -> bool:
        """Whether a join's output is small enough to keep for another copy of it to replay
        (SHARED_JOIN_MAX_INPUT_SHARE, SHARED_JOIN_MAX_BYTES)."""
        rows = estimate_rows(node)
        largest = max(estimate_rows(scan) for scan in _scans(node))
        limit = SHARED_JOIN_MAX_BYTES
        if self.config.memory_limit is not None:
            limit = min(limit, self.config.memory_limit / 16)
        width = sum(c.type.bit_width // 8 if _fixed_width(c.type) else _VARIABLE_WIDTH_BYTES
                    for c in node.columns)
        return rows <= SHARED_JOIN_MAX_INPUT_SHARE * largest and rows * width <= limit

    def _plan_shared(self, node: lp.LogicalPlan, key: tuple, method) -> ExecutionPlan:
        """A copy of a repeated subplan: the first is planned, the others replay it."""
        if key[0] == "loose":
            return self._plan_shared_join(node, key)
        found = self._shared.get(key)
        if found is None:
            first = method(node)
            if first.schema.names != [c.field_name for c in node.columns]:
                self._repeated = {k: v for k, v in self._repeated.items() if v != key}
                return first  # not the node's own columns: the copies are planned apart
            first.row_estimate = estimate_rows(node)
            result = SharedResult(sum(1 for k in self._repeated.values() if k == key))
            self._shared[key] = (result, fill_row_estimates(first), node.columns)
            return SharedExec(self._shared[key][1], result)
        result, first, columns = found
        renamed = {a.id: b for a, b in zip(columns, node.columns)}
        return SharedExec(first, result, schema_of(node.columns), renamed)

    def _plan_shared_join(self, node: lp.LogicalPlan, key: tuple) -> ExecutionPlan:
        """A copy of a repeated join of scans: planned with every column any copy reads
        (``_widened``), once per copy (the physical rules wire each reader's operators, such
        as a join's dynamic filter into its scan, on their own; a run executes one of
        them), and each copy selects its own columns of it."""
        found = self._shared.get(key)
        if found is None:
            widened = _widened(self._copies[key])
            if not self._small(widened):  # the union of columns is too wide: apart
                self._repeated = {k: v for k, v in self._repeated.items() if v != key}
                return self._plan_join(node)
            found = self._shared[key] = (SharedResult(len(self._copies[key])), None, widened)
        result, _, widened = found
        plan = self._plan_join(widened)
        plan.row_estimate = estimate_rows(widened)
        shared = SharedExec(fill_row_estimates(plan), result)
        columns = widened.columns
        by_origin = dict(zip(_origins(widened, columns), columns))
        mine = [by_origin[o] for o in _origins(node, node.columns)]
        if [c.id for c in mine] == [c.id for c in node.columns] == [c.id for c in columns]:
            return shared
        return ProjectionExec(mine, list(node.columns), shared)

    def _plan_recursivecte(self, node: lp.RecursiveCTE) -> ExecutionPlan:
        anchor = self.plan(node.anchor)
        work = node.work
        names = tuple(f"c{i}" for i in range(len(work.columns)))

        def make_recursive(rows: pa.Table) -> ExecutionPlan:
            """The recursive term over ``rows`` in place of the work table, planned anew."""
            source = MemorySource(rows.rename_columns(list(names)))
            scan = lp.TableScan(work.name, source, work.columns, names)
            logical = lp.transform_plan(node.recursive,
                                        lambda n: scan if n is work else n)
            return optimize_physical(PhysicalPlanner(self.config).plan(logical), self.config)

        return RecursiveQueryExec(anchor, make_recursive, schema_of(node.columns),
                                  node.distinct, self.config.recursive_cte_max_iterations,
                                  work.name)

    def _plan_worktable(self, node: lp.WorkTable) -> ExecutionPlan:
        raise InternalError("a work table is planned by its recursive CTE")

    def _plan_tablescan(self, node: lp.TableScan) -> ExecutionPlan:

        hints = tuple(h for h in (pruning_hint(f, node) for f in node.filters) if h is not None)
        return DataSourceExec(node.source, list(node.projection), schema_of(node.columns),
                              partitions=self.config.target_partitions,
                              pruning_predicates=hints, fetch=node.fetch, table=node.table)

    def _plan_values(self, node: lp.Values) -> ExecutionPlan:
        if not node.columns:  # the FROM-less SELECT's one row, or none (a FALSE filter's)
            return ValuesExec(pa.table({}), placeholder=bool(node.rows))
        one_row = pa.RecordBatch.from_pydict({"_": [None]})
        arrays = []
        for i, column in enumerate(node.columns):
            values = [evaluate(row[i], one_row) for row in node.rows]
            arrays.append(pa.concat_arrays(values) if values else pa.array([], column.type))
        return ValuesExec(pa.Table.from_arrays(arrays, schema=schema_of(node.columns)))

    def _plan_filter(self, node: lp.Filter) -> ExecutionPlan:
        return FilterExec(node.predicate, self.plan(node.input))

    def _plan_projection(self, node: lp.Projection) -> ExecutionPlan:
        return ProjectionExec(list(node.exprs), list(node.outputs), self.plan(node.input))

    def _plan_sort(self, node: lp.Sort) -> ExecutionPlan:
        child = self.plan(node.input)
        # constant keys and repeats of a column's class order nothing: sort by the rest
        keys = child.equivalences().significant_keys(node.keys)
        if ordering_satisfies(child.output_ordering(), tuple(node.keys), child.equivalences()):
            # already sorted (perhaps on a column known equal to the key): merge at most
            if child.output_partitioning().count > 1:
                if not keys:  # constant keys only: any order is sorted
                    child = CoalescePartitionsExec(child)
                else:
                    return SortPreservingMergeExec(list(node.keys), child, fetch=node.fetch)
            return child if node.fetch is None else GlobalLimitExec(child, 0, node.fetch)
        if child.output_partitioning().count > 1:
            # sort (or top-k) every partition in parallel, then merge the sorted runs
            local = SortExec(keys, child, fetch=node.fetch, preserve_partitioning=True)
            return SortPreservingMergeExec(keys, local, fetch=node.fetch)
        return SortExec(keys, child, fetch=node.fetch)

    def _plan_limit(self, node: lp.Limit) -> ExecutionPlan:
        return GlobalLimitExec(self.plan(node.input), node.skip, node.fetch)

    def _plan_union(self, node: lp.Union) -> ExecutionPlan:
        return UnionExec([self.plan(c) for c in node.union_inputs], schema_of(node.outputs))

    def _plan_aggregate(self, node: lp.Aggregate) -> ExecutionPlan:
        child = self.plan(node.input)
        exprs: list[Expr] = []
        outputs: list[Column] = []
        for expr, out in zip(node.group_exprs, node.group_outputs):
            exprs.append(expr)
            outputs.append(out)
        specs = []
        for call, out in zip(node.aggregates, node.aggregate_outputs):
            column_name = None
            if call.args:
                arg = call.args[0]
                if call.filter is not None:
                    arg = Call("case", (call.filter, arg, Literal(None, arg.type)), arg.type)
                existing = next((o for e, o in zip(exprs, outputs) if e == arg), None)
                if existing is None:
                    existing = Column(next_id(), "__agg_arg", arg.type)
                    exprs.append(arg)
                    outputs.append(existing)
                column_name = existing.field_name
            options = call.options
            if dict(call.options).get("order_by"):
                # ORDER BY keys (args[1:]) as projected columns; a key equal to the argument
                # reuses its (FILTER-masked) column: masked rows are dropped anyway
                names = []
                for key in call.args[1:]:
                    if key == call.args[0]:
                        names.append(column_name)
                        continue
                    found = next((o for e, o in zip(exprs, outputs) if e == key), None)
                    if found is None:
                        found = Column(next_id(), "__agg_order", key.type)
                        exprs.append(key)
                        outputs.append(found)
                    names.append(found.field_name)
                options = options + (("order_columns", tuple(names)),)
            if call.func in BIVARIATE:
                # corr(y, x) and kin: x as a projected column too (y carries the FILTER: a
                # pair with a NULL is skipped)
                second = call.args[1]
                found = next((o for e, o in zip(exprs, outputs) if e == second), None)
                if found is None:
                    found = Column(next_id(), "__agg_arg", second.type)
                    exprs.append(second)
                    outputs.append(found)
                options = options + (("second_column", found.field_name),)
            func = call.func
            if func == "count_star" and call.filter is not None:
                marker = Call("case", (call.filter, Literal(1, pa.int32()),
                                       Literal(None, pa.int32())), pa.int32())
                existing = Column(next_id(), "__agg_arg", pa.int32())
                exprs.append(marker)
                outputs.append(existing)
                func, column_name = "count", existing.field_name
            specs.append(AggregateSpec(func, column_name, out.field_name, call.type,
                                       call.distinct, options))
        if not exprs:
            # global COUNT(*) only: aggregate over a row-count-preserving dummy column
            exprs, outputs = [Literal(1, pa.int8())], [Column(next_id(), "__rows", pa.int8())]
        pre = ProjectionExec(exprs, outputs, child)
        keys = list(node.group_outputs)
        schema = schema_of(node.group_outputs + node.aggregate_outputs)
        partitioning = pre.output_partitioning()
        # an input already hash-partitioned on the keys (or on columns equal to them, as
        # after a partitioned join) has every group in one partition: one phase suffices
        partitioned = bool(keys) and hash_distribution(keys).satisfied_by(
            partitioning, pre.equivalences())
        if partitioning.count > 1 and not partitioned and \
                all(is_decomposable(s) for s in specs):
            # two phases: only one state row per group and chunk crosses the repartition
            states = [st for s in specs for st in partial_specs(s)]
            partial_schema = pa.schema([pa.field(k.field_name, k.type) for k in keys] +
                                       [pa.field(st.output, st.type) for st in states])
            partial = AggregateExec(pre, keys, specs, partial_schema, mode="Partial")
            # each input partition emits its own row per group
            partial.row_estimate = min(estimate_rows(node.input),
                                       estimate_rows(node) * partitioning.count)
            # few groups: the partial states merge in one partition, not hashed to many (in
            # this process; on a cluster they cross a shuffle either way)
            single_final = self.config.cluster is None and estimate_rows(node) < \
                self.config.aggregate_single_final_threshold_rows
            return AggregateExec(partial, keys, specs, schema, mode="Final",
                                 single_final=single_final,
                                 hash_on=self._one_hash_key(node, keys))
        return AggregateExec(pre, keys, specs, schema,
                             hash_on=None if partitioned else self._one_hash_key(node, keys))

    def _one_hash_key(self, node: lp.Aggregate, keys: list[Column]) -> list[Column] | None:
        """[the group key an exchange hashes on] when one integer key alone has about as
        many distinct values as there are groups, else None (hash all keys). Rows equal on
        every key are equal on it, so they still meet in one partition, and hashing one
        int64 column costs a fraction of hashing several, strings included: Q10 groups by
        c_custkey and six customer and nation columns. Distinct values near the group
        count keep the partitions as even as all keys would."""
        if len(keys) < 2 or self.config.target_partitions < 2:
            return None
        groups = estimate_rows(node)
        best, best_distinct = None, 0.0
        for expr, key in zip(node.group_exprs, keys):
            if not pa.types.is_integer(key.type):
                continue
            distinct = source_distinct(expr, node.input)  # None: computed, unknown
            if distinct is None:
                continue
            distinct = min(distinct, estimate_rows(node.input))
            if distinct > best_distinct:
                best, best_distinct = key, distinct
        if best is None or best_distinct < ONE_KEY_MIN_DISTINCT_PER_PARTITION * \
                self.config.target_partitions or best_distinct < ONE_KEY_GROUP_SHARE * groups:
            return None
        return [best]

    def _plan_window(self, node: lp.Window) -> ExecutionPlan:

        windows, outputs, below = stacked_windows(node)
        return plan_window(windows, outputs, self.plan(below), self.config)

    def _plan_join(self, node: lp.Join) -> ExecutionPlan:
        if (node.null_aware or node.null_equal) and not node.on and node.filter is not None:
            # NOT IN's key, or a null-equal join's, is an equality of its condition (filter
            # pushdown splits it out; without the optimizer this does)
            on, residual = split_join_keys(
                split_conjunction(node.filter), {c.id for c in node.left.columns},
                {c.id for c in node.right.columns})
            node = replace(node, on=tuple(on), filter=conjunction(residual))
        left, right = self.plan(node.left), self.plan(node.right)
        if node.kind == "cross" or not node.on:
            if node.null_aware:
                raise InternalError("NOT IN needs an equality key")
            if node.kind in ("right", "full"):
                return NestedLoopJoinExec(left, right, node.kind, node.filter)
            # build on the right so the (usually larger) left side streams
            kind = _SWAPPED.get(node.kind, "inner")
            return self._restore_order(NestedLoopJoinExec(right, left, kind, node.filter), node)
        # JoinSelection (DataFusion's rule, done here while the estimates are at hand):
        # build on the smaller estimated input, mirroring the join type when that is the
        # right (left <-> right, semi/anti -> right_semi/right_anti). NOT IN builds on its
        # subquery: it must see every build key (a NULL anywhere empties the result).
        # INTERSECT (a null-equal semi join) builds on its right operand, as DuckDB does: it
        # runs first, and when it is empty the left operand never runs (an overflow there
        # raises in neither engine, seed 9101).
        left_rows, right_rows = estimate_rows(node.left), estimate_rows(node.right)
        build_right = node.null_aware or right_rows <= left_rows or \
            (node.null_equal and node.kind == "semi")
        kind = _SWAPPED[node.kind] if build_right else _DIRECT[node.kind]
        build_rows, probe_rows = (right_rows, left_rows) if build_right else \
            (left_rows, right_rows)
        partitions = self._join_partitions(kind, build_rows, probe_rows, node.null_aware)
        # probe partitions may share a visited bitmap only within one process
        parallel_probe = self.config.cluster is None
        if build_right:
            on = [(b, a) for a, b in node.on]
            join = HashJoinExec(right, left, on, kind, node.filter,
                                null_aware=node.null_aware, null_equal=node.null_equal,
                                partitions=partitions, parallel_probe=parallel_probe)
            return self._restore_order(join, node)
        return HashJoinExec(left, right, list(node.on), kind, node.filter,
                            null_aware=node.null_aware, null_equal=node.null_equal,
                            partitions=partitions, parallel_probe=parallel_probe)

    def _join_partitions(self, kind: str, build_rows: float, probe_rows: float,
                         null_aware: bool) -> int | None:
        """CollectLeft (None: one shared build) while the estimated build side is under
        ``hash_join_single_partition_threshold_rows``, else Partitioned (both sides hashed
        into ``target_partitions``, built in parallel). A join that emits unmatched build
        rows probes in parallel under CollectLeft by sharing its visited rows, which a plan
        for a cluster can not: there it needs every probe row in one partition, so past the
        threshold on the probe side it is partitioned too, not funnelled into one."""
        threshold = self.config.hash_join_single_partition_threshold_rows
        if self.config.target_partitions <= 1 or null_aware:
            return None
        funnelled = kind in SINGLE_PROBE_JOIN_TYPES and self.config.cluster is not None
        if build_rows >= threshold or (funnelled and probe_rows >= threshold):
            return self.config.target_partitions
        return None

    def _restore_order(self, join: ExecutionPlan, node: lp.Join) -> ExecutionPlan:
        """A swapped join outputs right columns first; put them back in logical order."""
        join.row_estimate = estimate_rows(node)
        if node.kind in ("semi", "anti"):
            return join
        columns = list(node.columns)
        return ProjectionExec(columns, columns, join)


def _scans(node: lp.LogicalPlan) -> list[lp.TableScan]:
    if isinstance(node, lp.TableScan):
        return [node]
    return [scan for child in node.inputs() for scan in _scans(child)]


def _fixed_width(t: pa.DataType) -> bool:
    try:
        return t.bit_width >= 8
    except ValueError:
        return False


def _widened(copies: list[lp.LogicalPlan]) -> lp.LogicalPlan:
    """The first copy of a repeated join of scans (equal loose fingerprints: the same tree
    but for the columns its scans read and its selections keep), its scans reading and
    its selections keeping every column some copy does: the first copy's columns, then
    the others' (under the column of the copy that first reads them)."""
    origins = [dict(zip((c.id for s in _scans(copy) for c in s.scan_columns),
                        _origins(copy, [c for s in _scans(copy) for c in s.scan_columns])))
               for copy in copies]
    by_origin: dict[tuple[int, str], Column] = {}

    def widen(nodes: list[lp.LogicalPlan]) -> lp.LogicalPlan:
        first = nodes[0]
        if isinstance(first, lp.TableScan):
            columns, names = [], []
            for node in nodes:
                for column, name in zip(node.scan_columns, node.projection):
                    if name not in names:
                        columns.append(column)
                        names.append(name)
            for column, name in zip(columns, names):
                by_origin[origins[0][first.scan_columns[0].id][0], name] = column
            return replace(first, scan_columns=tuple(columns), projection=tuple(names))
        inputs = tuple(widen([node.inputs()[i] for node in nodes])
                       for i in range(len(first.inputs())))
        if isinstance(first, lp.Projection):  # a selection: the union of what they keep
            kept: list[Column] = []
            for node, where in zip(nodes, origins):
                for column in node.outputs:
                    wide = by_origin[where[column.id]]
                    if all(wide.id != k.id for k in kept):
                        kept.append(wide)
            return lp.Projection(inputs[0], tuple(kept), tuple(kept))
        return first.with_inputs(inputs)

    return widen(copies)


def _origins(node: lp.LogicalPlan, columns) -> list[tuple[int, str]]:
    """(which scan of ``node``, which source column) of each of ``columns``: where a copy
    of a repeated join finds a column in another copy."""
    where = {}
    for position, scan in enumerate(_scans(node)):
        for column, name in zip(scan.scan_columns, scan.projection):
            where[column.id] = (position, name)
    return [where[c.id] for c in columns]
