"""DataSourceExec: reads a table source, projection pushed into the reader.

Scan units (files, row groups, memory batches) are split into contiguous runs, one per
partition; units whose statistics rule out ``pruning_predicates`` are skipped before any read.

Limit pruning (``limit_pruning=(predicates, rows)``, set by ``prune_by_limit`` for a LIMIT
over a filter made only of ``predicates``): once the units whose statistics prove that every
row passes hold ``rows`` rows, the units after them are not read. The LIMIT returns the first
passing rows in source order, so partially matching units before that point are read.

Ordering: a source that knows its sort order (source_ordering.py) makes each partition sorted
when the units of its run follow each other (``TableSource.in_order``); the scan then reports
that order, cut to the projected columns, as its output ordering. Runs are split at file
boundaries when that keeps them sorted (each file sorted on its own).

Disjoint partitioning: when every run's [min, max] of an integer or date column (from the
units' statistics, no NULLs) overlaps no other run's, each value of it is read by one
partition only; the scan declares ``Disjoint([column], n)``, which meets a grouping
requirement on any keys including the column, so GROUP BY l_orderkey over a lineitem sorted
by it runs in one phase per partition with no exchange.

Read order for a top-k (``read_first_by``, set by ``push_dynamic_filters``): the units most
likely to hold the top rows are read first — by ascending minimum of the first sort key for
ASC, descending maximum for DESC — and dealt round-robin to the partitions, so the top-k's
threshold tightens after the first units and the dynamic filter prunes the rest by their
statistics (a DESC top-k over ascending row groups reads the last one first).
"""

from __future__ import annotations

import itertools

import pyarrow as pa

from plansight.engine.catalog import ScanUnit, TableSource, normalize_batch
from plansight.engine.errors import ExecutionError
from plansight.engine.logical.expr import Column, SortKey, sql_value
from plansight.engine.physical.expressions import evaluate_predicate
from plansight.engine.physical.plan import ExecutionPlan, Ordering, Partitioning
from plansight.engine.statistics import disjoint_ranges

# A join key filter that has kept at least BYPASS_PASSING of the first
# ``dynamic_filter_bypass_after_rows`` rows of a scan partition is not tested on its later
# batches (row groups are still pruned by it): Q9's l_orderkey filter from all of orders
# keeps every lineitem row. DataFusion's adaptive dynamic filters use the same 95%. A top-k
# bound, which keeps tightening, is never bypassed.
BYPASS_PASSING = 0.95


class DataSourceExec(ExecutionPlan):
    name = "DataSourceExec"

    def __init__(self, source: TableSource, columns: list[str], schema: pa.Schema,
                 partitions: int = 1, pruning_predicates: tuple = (), fetch: int | None = None,
                 table: str = "", limit_pruning: tuple[tuple, int] | None = None):
        super().__init__(schema)
        self.source, self.columns, self.table = source, list(columns), table
        self.pruning_predicates = tuple(pruning_predicates)
        self.fetch = fetch
        self.limit_pruning = limit_pruning
        self.requested_partitions = partitions
        # (source column name, DynamicFilter) pairs attached by push_dynamic_filters
        self.dynamic_filters: list = []
        # rows per batch read when not ctx.batch_size (set by widen_scan_batches)
        self.batch_rows: int | None = None
        # the cheap conjuncts of the filter right above, applied before dictionary-encoded
        # columns are decoded (set by prefilter_scans; that filter still decides), and
        # whether they are its whole predicate
        self.prefilter = None
        self.prefilter_whole = False
        units = source.units(partitions)
        self.total_units = len(units)
        units, self.pruned_units = source.prune(units, list(self.pruning_predicates))
        self.limit_pruned_units = 0
        if limit_pruning is not None:
            units, self.limit_pruned_units = _fully_matching_prefix(source, units,
                                                                    *limit_pruning)
        self.partition_count = max(1, min(partitions, len(units))) if units else 1
        # contiguous runs of units per partition, so each partition reads in source order
        self.assignment = _split(units, self.partition_count)
        self.sorted_runs = bool(source.ordering) and _runs_in_order(source, self.assignment)
        if source.ordering and not self.sorted_runs:
            by_file = _split_by_file(units, self.partition_count)
            if by_file is not None and _runs_in_order(source, by_file):
                self.assignment, self.sorted_runs = by_file, True
                self.partition_count = len(by_file)
        self._ordering = self._projected_ordering() if self.sorted_runs else None
        self._disjoint = self._disjoint_columns()
        self.read_order: str | None = None  # set by read_first_by

    def estimated_rows(self) -> int:
        """Rows this scan expects to read, from the source's statistics: the units left after
        pruning (exact for Parquet row groups and memory tables, a size-based guess for CSV
        and IPC files), at most ``fetch`` per partition. Progress displays compare with it."""
        return sum(min(rows, self.fetch) if self.fetch is not None else rows
                   for rows in (sum(unit.rows for unit in units) for units in self.assignment))

    def output_partitioning(self) -> Partitioning:
        return Partitioning(self.partition_count, disjoint_exprs=self._disjoint)

    def _plan_column(self, index: int) -> Column | None:
        """The plan column of output field ``index`` (None unless a planned scan, whose
        fields are ``name#id``)."""
        field = self.schema.field(index)
        name, _, column_id = field.name.rpartition("#")
        return Column(int(column_id), name, field.type) if column_id.isdigit() else None

    def _disjoint_columns(self) -> tuple[Column, ...] | None:
        """The projected integer and date columns whose value ranges over the partitions'
        runs of units never overlap, from the units' statistics, with no NULLs anywhere:
        each value then lives in one partition, so a GROUP BY on the column (or on keys
        including it) needs no exchange. Row groups of a table sorted or clustered on a key
        (TPC-H's orderkeys) split into contiguous runs are so. A NULL has no range, hence
        no NULLs; floats and strings are left out (NaN, truncated string statistics)."""
        if self.partition_count < 2:
            return None
        found = []
        for index, name in enumerate(self.columns):
            type_ = self.schema.field(index).type
            if not (pa.types.is_integer(type_) or pa.types.is_date(type_)):
                continue
            column = self._plan_column(index)
            ranges = [_run_range(self.source, run, name) for run in self.assignment]
            if column is not None and all(r is not None for r in ranges) and \
                    disjoint_ranges(ranges):
                found.append(column)
        return tuple(found) or None

    def output_ordering(self) -> Ordering | None:
        return self._ordering

    def _projected_ordering(self) -> Ordering | None:
        """The source's order on this scan's output columns: its leading keys up to the first
        one not projected (rows sorted by a, b, c are sorted by a, b, not by a, c)."""
        keys = []
        for key in self.source.ordering:
            if key.column not in self.columns:
                break
            column = self._plan_column(self.columns.index(key.column))
            if column is None:
                break
            keys.append(SortKey(column, key.descending, key.nulls_first))
        return tuple(keys) or None

    def read_first_by(self, column: str, descending: bool) -> bool:
        """Reorder the units so those holding the smallest (largest when ``descending``)
        values of source ``column`` are read first; units without statistics go last. The
        scan no longer reports an output ordering. False when statistics cannot tell."""
        units = [unit for run in self.assignment for unit in run]
        stats = [self.source.unit_stats(unit, column) for unit in units]
        known = [(s[1] if descending else s[0], i) for i, s in enumerate(stats) if s]
        if len(known) < 2:
            return False
        try:
            known.sort(reverse=descending)
        except TypeError:
            return False
        first = {i for _, i in known}
        order = [units[i] for _, i in known] + [u for i, u in enumerate(units) if i not in first]
        count = len(self.assignment)
        self.assignment = [order[p::count] for p in range(count)]
        # units dealt round robin: values no longer in one partition (nothing between a
        # top-k and its scan groups rows: find_scan_column passes no aggregate or window)
        self._ordering, self.sorted_runs, self._disjoint = None, False, None
        self.read_order = f"{'max' if descending else 'min'}({column}) " \
                          f"{'DESC' if descending else 'ASC'}"
        return True

    def with_fetch(self, fetch: int | None) -> DataSourceExec:
        return DataSourceExec(self.source, self.columns, self.schema, self.requested_partitions,
                              self.pruning_predicates, fetch, self.table, self.limit_pruning)

    def with_limit_pruning(self, predicates: tuple, rows: int) -> DataSourceExec:
        """This scan when only ``rows`` rows passing ``predicates`` are needed."""
        return DataSourceExec(self.source, self.columns, self.schema, self.requested_partitions,
                              self.pruning_predicates, self.fetch, self.table,
                              (tuple(predicates), rows))

    def derived_row_estimate(self):
        return float(self.estimated_rows())

    def display(self) -> str:
        parts = [f"DataSourceExec: table={self.table}", self.source.describe(),
                 f"projection=[{', '.join(self.columns)}]"]
        if self.pruning_predicates:
            preds = ", ".join(f"{c} {_SYMBOLS.get(op, op)} {sql_value(v)}"
                              for c, op, v in self.pruning_predicates)
            parts.append(f"pruning_predicate=[{preds}]")
            parts.append(f"units_pruned={self.pruned_units}/{self.total_units}")
        if self.fetch is not None:
            parts.append(f"limit={self.fetch}")
        if self.limit_pruned_units:
            parts.append(f"units_pruned_by_limit={self.limit_pruned_units}/{self.total_units}")
        if self._ordering:
            parts.append(f"output_ordering=[{', '.join(map(str, self._ordering))}]")
        if self.read_order:
            parts.append(f"read_order=[{self.read_order}]")
        if self.batch_rows is not None:
            parts.append(f"batch_rows={self.batch_rows}")
        if self.dynamic_filters:
            parts.append("dynamic_filters=[" + ", ".join(
                f"{column} from {f.origin}" for column, f in self.dynamic_filters) + "]")
        if self.partition_count > 1:
            parts.append(f"partitions={self.partition_count}")
        return ", ".join(parts)

    @staticmethod
    def _apply_dynamic(batch, dynamic, metrics, ctx, passed):
        bypass_after = ctx.config.dynamic_filter_bypass_after_rows
        for index, dynamic_filter in dynamic:
            if not dynamic_filter.applies_to(ctx):
                continue
            seen = passed.get(id(dynamic_filter))
            if seen is not None and seen[0] < 0:
                continue  # bypassed: it kept nearly every row so far
            mask = dynamic_filter.mask(batch.column(index))
            before = batch.num_rows
            if mask is not None:
                batch = batch.filter(mask)
                metrics.add("rows_skipped_dynamic", before - batch.num_rows)
            if dynamic_filter.complete:
                seen = passed.setdefault(id(dynamic_filter), [0, 0])
                seen[0] += before
                seen[1] += batch.num_rows
                if bypass_after and seen[0] >= bypass_after and \
                        seen[1] >= BYPASS_PASSING * seen[0]:
                    seen[0] = -1
                    metrics.add("dynamic_filters_bypassed")
        return batch

    def _unit_may_match(self, unit, dynamic, ctx) -> bool:
        """False when the dynamic filters in force rule ``unit`` out by its statistics."""
        return all(f.unit_may_match(self.source.unit_stats(unit, self.columns[i]))
                   for i, f in dynamic if f.applies_to(ctx))

    def _execute(self, partition, ctx):
        batches = self._read(partition, ctx)
        if self.dynamic_filters or self.prefilter is not None:
            batches = _coalesced(batches, ctx.batch_size)
        yield from batches

    def _read(self, partition, ctx):
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        metrics.add("units_pruned", self.pruned_units if partition == 0 else 0)
        if self.limit_pruned_units and partition == 0:
            metrics.add("units_pruned_limit", self.limit_pruned_units)
        remaining = self.fetch
        dynamic = [(self.columns.index(c), f) for c, f in self.dynamic_filters]
        passed: dict = {}  # id(filter) -> [rows in, rows kept] (rows in -1: bypassed)
        batch_rows = self.batch_rows or ctx.batch_size
        prefilter = _Prefilter(self.prefilter, self.schema, self.prefilter_whole) \
            if self.prefilter is not None else None
        readers: dict = {}  # the source's open files, kept from unit to unit
        layout = _StoredLayout(self.schema)
        for unit in self.assignment[partition]:
            dynamic = [(i, f) for i, f in dynamic if f.run is ctx or f.run is None]
            if not self._unit_may_match(unit, dynamic, ctx):
                metrics.add("units_pruned_dynamic")
                continue
            metrics.add("units_read")
            reader = self.source.read_stored(unit, self.columns, batch_rows, readers)
            for batch in reader:
                stored_as = layout.of(batch.schema)
                normalized = stored_as.normalized
                if dynamic:
                    # filters on columns stored as the plan's type run before the others
                    # are decoded (a dictionary's strings only for the rows that stay)
                    stored = [(i, f) for i, f in dynamic if stored_as.same[i]] \
                        if stored_as.filterable else []
                    batch = self._apply_dynamic(batch, stored, metrics, ctx, passed)
                if prefilter is not None:
                    # after the key filters (Q19's keeps 1 row in 700 of what this keeps)
                    batch = prefilter.apply(batch, metrics, stored_as)
                if dynamic:
                    if not normalized:
                        batch, normalized = normalize_batch(batch, self.schema), True
                    if len(stored) < len(dynamic):
                        decoded = [(i, f) for i, f in dynamic if (i, f) not in stored]
                        batch = self._apply_dynamic(batch, decoded, metrics, ctx, passed)
                    if batch.num_rows == 0:
                        if not self._unit_may_match(unit, dynamic, ctx):
                            # a filter tightened while the unit was read: leave the rest
                            metrics.add("units_abandoned_dynamic")
                            reader.close()
                            break
                        continue
                elif batch.num_rows == 0:
                    continue
                if remaining is not None:
                    if remaining <= 0:
                        return
                    batch = batch.slice(0, remaining)
                    remaining -= batch.num_rows
                if not normalized:
                    batch = normalize_batch(batch, self.schema)
                metrics.add("rows_read", batch.num_rows)  # after dynamic filtering
                # sources name columns as stored; the plan names them name#id
                yield pa.RecordBatch.from_arrays(batch.columns, schema=self.schema)
            if remaining is not None and remaining <= 0:
                return


class _StoredLayout:
    """How a batch's stored types stand to the plan's, worked out once per stored schema
    (every batch of a file has the same) instead of per batch: comparing type lists was
    Python holding the GIL for every batch of every scan (~5% of what the worker threads
    held it for over TPC-H's 22 queries at 2 partitions, py-spy --gil)."""

    def __init__(self, plan: pa.Schema):
        self.plan = plan
        self.schema: pa.Schema | None = None
        self.same: list[bool] = []  # per column: stored as the plan's type
        self.normalized = self.filterable = self.dictionaries = False

    def of(self, schema: pa.Schema) -> _StoredLayout:
        if self.schema is None or not schema.equals(self.schema):
            types = schema.types
            self.same = [s == p for s, p in zip(types, self.plan.types)]
            self.normalized = all(self.same) and len(types) == len(self.plan.types)
            self.filterable = _filterable_as_stored(schema, self.plan)
            self.dictionaries = any(pa.types.is_dictionary(t) for t in types)
            self.schema = schema
        return self


class _Prefilter:
    """A scan partition's early pass of the cheap conjuncts of the filter above
    (prefilter_scans.py), over batches as stored, before their dictionary-encoded columns
    are decoded. Like a join key filter (BYPASS_PASSING), it stops once it has kept nearly
    every row of the first ``BYPASS_AFTER_ROWS``: then it only doubles the filter's work
    (Q19's ``p_size >= 1`` keeps every part, and its string conjuncts are left to the
    filter, which then copies the batch anyway). Batches under
    ``MIN_ROWS`` rows (what a join key filter left) pass untested: decoding their strings
    costs less than the pass's Python per batch (Q19's lineitem, ~150 rows a batch).

    When the cheap conjuncts are the filter's ``whole`` predicate, the pass goes on while it
    drops any row at all: the filter above then keeps every row the scan passes on, and
    returns its batch uncopied (filter.py, ``_kept``), so each row the scan drops saves a copy
    of the decoded batch, made here on dictionary indices instead. TPC-H Q1's date bound drops
    1.4% of lineitem: its flags were copied as strings (~20 ms of CPU), now as int32 indices."""

    BYPASS_AFTER_ROWS = 1 << 16
    MIN_ROWS = 4096

    def __init__(self, predicate, schema: pa.Schema, whole: bool = False):
        self.predicate, self.schema, self.whole = predicate, schema, whole
        self.seen = self.kept = 0
        self.bypassed = False

    def apply(self, batch: pa.RecordBatch, metrics, stored_as: _StoredLayout) -> pa.RecordBatch:
        """``batch`` (``stored_as`` its layout) less the rows the predicate rejects, when it
        holds dictionary-encoded columns to decode afterwards; else (or should the
        predicate raise) the batch whole, for the filter above to judge."""
        if self.bypassed or batch.num_rows < self.MIN_ROWS or not stored_as.dictionaries or \
                not stored_as.filterable:
            return batch
        # the cheap conjuncts touch no string column: theirs are stored as the plan's types
        named = pa.RecordBatch.from_arrays(batch.columns, names=self.schema.names)
        try:
            mask = evaluate_predicate(self.predicate, named)
        except ExecutionError:
            return batch
        kept = mask.true_count
        self.seen += batch.num_rows
        self.kept += kept
        if self.seen >= self.BYPASS_AFTER_ROWS and self.kept >= (
                self.seen if self.whole else BYPASS_PASSING * self.seen):
            self.bypassed = True
        if kept == batch.num_rows:
            return batch
        metrics.add("rows_skipped_prefilter", batch.num_rows - kept)
        return batch.slice(0, 0) if kept == 0 else batch.filter(mask)


def _coalesced(batches, rows: int):
    """``batches`` in order, those under ``rows`` rows concatenated until they reach it.

    A selective join key filter leaves a few hundred rows of each batch read (TPC-H Q7's
    lineitem: 38K rows in 106 batches); every operator above costs some Python per batch,
    which then outweighs its work on the rows (Q7's two joins above that scan: ~0.4 ms per
    batch of ~360 rows). A prefilter leaves as little: of each 65,536 rows of lineitem read,
    Q12's date conditions keep ~1,000, and its filter, join probe, projections and aggregate
    ran 106 times instead of 14 (Q12: -8% CPU at 1 and 2 partitions)."""
    pending, held = [], 0
    for batch in batches:
        if batch.num_rows >= rows:
            if pending:
                yield _concatenated(pending)
                pending, held = [], 0
            yield batch
            continue
        pending.append(batch)
        held += batch.num_rows
        if held >= rows:
            yield _concatenated(pending)
            pending, held = [], 0
    if pending:
        yield _concatenated(pending)


def _concatenated(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def _filterable_as_stored(stored: pa.Schema, plan: pa.Schema) -> bool:
    """Whether a batch can be filtered before its types are normalized: every column stored
    differently is dictionary-encoded (Arrow filters string views only after the cast)."""
    return all(s == p or pa.types.is_dictionary(s) for s, p in zip(stored.types, plan.types))


_SYMBOLS = {"eq": "=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}


def _split(units: list[ScanUnit], count: int) -> list[list[ScanUnit]]:
    bounds = [len(units) * i // count for i in range(count + 1)]
    return [units[lo:hi] for lo, hi in itertools.pairwise(bounds)]


def _split_by_file(units: list[ScanUnit], count: int) -> list[list[ScanUnit]] | None:
    """Runs that never span two files (each file gets a share of the ``count`` partitions
    by its unit count), or None when there are more files than partitions."""
    files: dict[str | None, list[ScanUnit]] = {}
    for unit in units:
        files.setdefault(unit.path, []).append(unit)
    if len(files) > count or len(files) < 2:
        return None
    groups = list(files.values())
    shares = [1] * len(groups)
    for _ in range(count - len(groups)):  # a few iterations: count is the partition count
        best = max(range(len(groups)), key=lambda i: len(groups[i]) / shares[i])
        if len(groups[best]) <= shares[best]:
            break
        shares[best] += 1
    return [run for group, share in zip(groups, shares) for run in _split(group, share)]


def _run_range(source: TableSource, run: list[ScanUnit], column: str) -> tuple | None:
    """(min, max) of ``column`` over a run of units, None when a unit's statistics are
    unknown or count a NULL (or an unknown number of them)."""
    low = high = None
    try:
        for unit in run:
            stats = source.unit_stats(unit, column)
            if stats is None or stats[0] is None or stats[1] is None or stats[2] != 0:
                return None
            low = stats[0] if low is None or stats[0] < low else low
            high = stats[1] if high is None or stats[1] > high else high
    except TypeError:  # incomparable statistics
        return None
    return None if low is None else (low, high)


def _runs_in_order(source: TableSource, runs: list[list[ScanUnit]]) -> bool:
    return all(source.in_order(a, b) for run in runs for a, b in itertools.pairwise(run))


def _fully_matching_prefix(source: TableSource, units: list, predicates: tuple, rows: int):
    """(units to read, units dropped): the units up to the point where the fully matching
    ones among them hold ``rows`` rows, when they do, else all ``units``. Partially matching
    units before that point stay: a LIMIT returns the first passing rows in source order
    (keep_source_order), and they may hold some of them."""
    covered = 0
    for count, unit in enumerate(units, start=1):
        if unit.rows and source.fully_matches(unit, list(predicates)):
            covered += unit.rows
            if covered >= rows:
                return units[:count], len(units) - count
    return units, 0
