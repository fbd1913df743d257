"""SortExec: sorts each input partition (multi-key, ASC/DESC, NULLS FIRST/LAST).

With ``fetch`` it runs as top-k: candidates are cut back to k whenever they exceed 2k + a
batch, so memory stays O(k + batch) instead of O(input).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from plansight.engine.logical.expr import SortKey
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.plan import SINGLE_PARTITION, UNSPECIFIED, ExecutionPlan


def sort_columns(table: pa.Table | pa.RecordBatch,
                 keys: list[SortKey]) -> tuple[list[pa.Array], list[tuple[str, str, str]]]:
    """The columns ``sort_indices`` orders by, with Arrow sort keys ``(name, order, placement)``.

    A floating key contributes two columns: its NaN-ness, then its values.
    """
    columns, sort_keys = [], []
    for key in keys:
        column = evaluate(key.expr, table)
        order = "descending" if key.descending else "ascending"
        placement = "at_start" if key.nulls_first else "at_end"
        if pa.types.is_floating(column.type):
            # DuckDB: NaN is the greatest double; Arrow puts NaN next to the NULLs instead
            # (wrong for ASC NULLS FIRST and DESC NULLS LAST), so NaN-ness sorts first
            columns.append(pc.is_nan(column))
            sort_keys.append((f"k{len(sort_keys)}", order, placement))
        columns.append(column)
        sort_keys.append((f"k{len(sort_keys)}", order, placement))
    return columns, sort_keys


def sort_indices(table: pa.Table | pa.RecordBatch, keys: list[SortKey]) -> pa.Array:
    """Stable sort permutation of ``table`` by ``keys`` (evaluated on the table)."""
    columns, sort_keys = sort_columns(table, keys)
    keyed = pa.table(columns, names=[name for name, _, _ in sort_keys])
    return pc.sort_indices(keyed, sort_keys=sort_keys)


class SortExec(ExecutionPlan):
    name = "SortExec"

    def __init__(self, keys: list[SortKey], input: ExecutionPlan, fetch: int | None = None,
                 preserve_partitioning: bool = False):
        super().__init__(input.schema)
        self.keys, self.input, self.fetch = list(keys), input, fetch
        self.preserve_partitioning = preserve_partitioning

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return SortExec(self.keys, children[0], self.fetch, self.preserve_partitioning)

    def required_input_distribution(self):
        return [UNSPECIFIED if self.preserve_partitioning else SINGLE_PARTITION]

    def output_partitioning(self):
        return self.input.output_partitioning() if self.preserve_partitioning else \
            super().output_partitioning()

    def output_ordering(self):
        return tuple(self.keys)

    def display(self) -> str:
        keys = ", ".join(map(str, self.keys))
        head = f"SortExec: TopK(fetch={self.fetch}), " if self.fetch is not None else "SortExec: "
        return f"{head}expr=[{keys}], preserve_partitioning=[{str(self.preserve_partitioning).lower()}]"

    def _execute(self, partition, ctx):
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]")
        try:
            batches, held = [], 0
            limit = None if self.fetch is None else 2 * self.fetch + ctx.batch_size
            for batch in self.input.execute(partition, ctx):
                reservation.grow(batch.nbytes)
                batches.append(batch)
                held += batch.num_rows
                if limit is not None and held > limit:
                    table = self._sorted(batches).slice(0, self.fetch)
                    batches, held = table.to_batches(), table.num_rows
                    reservation.resize(table.nbytes)
            if not batches:
                return
            table = self._sorted(batches)
            if self.fetch is not None:
                table = table.slice(0, self.fetch)
            yield from table.to_batches(max_chunksize=ctx.batch_size)
        finally:
            reservation.free()

    def _sorted(self, batches) -> pa.Table:
        table = pa.Table.from_batches(batches, schema=self.schema)
        return table.take(sort_indices(table, self.keys))
