"""DataSourceExec: reads a table source, projection pushed into the reader.

Scan units (files, row groups, memory batches) are split into contiguous runs, one per
partition; units whose statistics rule out ``pruning_predicates`` are skipped before any read.

Limit pruning (``limit_pruning=(predicates, rows)``, set by ``prune_by_limit`` for a LIMIT
over a filter made only of ``predicates``): when the units whose statistics prove that every
row passes hold at least ``rows`` rows, only the first of them that cover ``rows`` are read —
partially matching units are skipped too. A LIMIT without ORDER BY may return any rows that
pass the filter.
"""

from __future__ import annotations

import pyarrow as pa
from plansight.engine.catalog import TableSource
from plansight.engine.physical.plan import ExecutionPlan, Partitioning


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
        units = source.units(partitions)
        self.total_units = len(units)
        units, self.pruned_units = source.prune(units, list(self.pruning_predicates))
        self.limit_pruned_units = 0
        if limit_pruning is not None:
            units, self.limit_pruned_units = _fully_matching_prefix(source, units,
                                                                    *limit_pruning)
        self.partition_count = max(1, min(partitions, len(units))) if units else 1
        # contiguous runs of units per partition, so each partition reads in source order
        bounds = [len(units) * i // self.partition_count for i in range(self.partition_count + 1)]
        self.assignment = [units[lo:hi] for lo, hi in zip(bounds, bounds[1:])]

    def estimated_rows(self) -> int:
        """Rows this scan expects to read, from the source's statistics: the units left after
        pruning (exact for Parquet row groups and memory tables, a size-based guess for CSV
        and IPC files), at most ``fetch`` per partition. Progress displays compare with it."""
        return sum(min(rows, self.fetch) if self.fetch is not None else rows
                   for rows in (sum(unit.rows for unit in units) for units in self.assignment))

    def output_partitioning(self) -> Partitioning:
        return Partitioning(self.partition_count)

    def with_fetch(self, fetch: int | None) -> DataSourceExec:
        return DataSourceExec(self.source, self.columns, self.schema, self.requested_partitions,
                              self.pruning_predicates, fetch, self.table, self.limit_pruning)

    def with_limit_pruning(self, predicates: tuple, rows: int) -> DataSourceExec:
        """This scan when only ``rows`` rows passing ``predicates`` are needed."""
        return DataSourceExec(self.source, self.columns, self.schema, self.requested_partitions,
                              self.pruning_predicates, self.fetch, self.table,
                              (tuple(predicates), rows))

    def display(self) -> str:
        parts = [f"DataSourceExec: table={self.table}", self.source.describe(),
                 f"projection=[{', '.join(self.columns)}]"]
        if self.pruning_predicates:
            preds = ", ".join(f"{c} {op} {v!r}" for c, op, v in self.pruning_predicates)
            parts.append(f"pruning_predicate=[{preds}]")
            parts.append(f"units_pruned={self.pruned_units}/{self.total_units}")
        if self.fetch is not None:
            parts.append(f"limit={self.fetch}")
        if self.limit_pruned_units:
            parts.append(f"units_pruned_by_limit={self.limit_pruned_units}/{self.total_units}")
        if self.dynamic_filters:
            parts.append("dynamic_filters=[" + ", ".join(
                f"{column} from {f.origin}" for column, f in self.dynamic_filters) + "]")
        if self.partition_count > 1:
            parts.append(f"partitions={self.partition_count}")
        return ", ".join(parts)

    @staticmethod
    def _apply_dynamic(batch, dynamic, metrics, ctx):
        for index, dynamic_filter in dynamic:
            if not dynamic_filter.applies_to(ctx):
                continue
            mask = dynamic_filter.mask(batch.column(index))
            if mask is not None:
                before = batch.num_rows
                batch = batch.filter(mask)
                metrics.add("rows_skipped_dynamic", before - batch.num_rows)
        return batch

    def _execute(self, partition, ctx):
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        metrics.add("units_pruned", self.pruned_units if partition == 0 else 0)
        if self.limit_pruned_units and partition == 0:
            metrics.add("units_pruned_limit", self.limit_pruned_units)
        remaining = self.fetch
        dynamic = [(self.columns.index(c), f) for c, f in self.dynamic_filters]
        for unit in self.assignment[partition]:
            dynamic = [(i, f) for i, f in dynamic if f.run is ctx or f.run is None]
            live = [(i, f) for i, f in dynamic if f.applies_to(ctx)]
            if live and not all(f.unit_may_match(self.source.unit_stats(unit, self.columns[i]))
                                for i, f in live):
                metrics.add("units_pruned_dynamic")
                continue
            metrics.add("units_read")
            for batch in self.source.read(unit, self.columns, ctx.batch_size):
                if dynamic:
                    batch = self._apply_dynamic(batch, dynamic, metrics, ctx)
                    if batch.num_rows == 0:
                        continue
                if remaining is not None:
                    if remaining <= 0:
                        return
                    batch = batch.slice(0, remaining)
                    remaining -= batch.num_rows
                metrics.add("rows_read", batch.num_rows)  # after dynamic filtering
                # sources name columns as stored; the plan names them name#id
                yield pa.RecordBatch.from_arrays(batch.columns, schema=self.schema)
            if remaining is not None and remaining <= 0:
                return


def _fully_matching_prefix(source: TableSource, units: list, predicates: tuple, rows: int):
    """(units to read, units dropped): the first fully matching units that hold ``rows``
    rows when there are enough of them, else all ``units``."""
    chosen, covered = [], 0
    for unit in units:
        if covered >= rows:
            break
        if unit.rows and source.fully_matches(unit, list(predicates)):
            chosen.append(unit)
            covered += unit.rows
    if covered < rows:
        return units, 0
    return chosen, len(units) - len(chosen)
