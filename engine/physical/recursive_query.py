"""RecursiveQueryExec: WITH RECURSIVE, iterated to a fixpoint.

    anchor ──▶ rows₀ ──▶ recursive term over rows₀ ──▶ rows₁ ──▶ ... ──▶ rowsₙ = ∅
                 │                                       │
                 └──────────── emitted ──────────────────┘

Each iteration plans the recursive term afresh over the previous iteration's rows (a memory
table in place of the work table), so no operator state survives between iterations. UNION
keeps only rows never seen before (the anchor deduplicated too); UNION ALL keeps every row.
More than ``recursive_cte_max_iterations`` iterations is an error naming the option.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import ExecutionError
from plansight.engine.physical.plan import SINGLE_PARTITION, ExecutionPlan, Partitioning


class RecursiveQueryExec(ExecutionPlan):
    name = "RecursiveQueryExec"

    def __init__(self, anchor: ExecutionPlan, make_recursive: Callable[[pa.Table], ExecutionPlan],
                 schema: pa.Schema, distinct: bool, max_iterations: int, cte: str):
        super().__init__(schema)
        self.anchor, self.make_recursive = anchor, make_recursive
        self.distinct, self.max_iterations, self.cte = distinct, max_iterations, cte

    def children(self):
        return [self.anchor]

    def with_new_children(self, children):
        return RecursiveQueryExec(children[0], self.make_recursive, self.schema, self.distinct,
                                  self.max_iterations, self.cte)

    def output_partitioning(self):
        return Partitioning(1)

    def output_ordering(self):
        return None

    def required_input_distribution(self):
        return [SINGLE_PARTITION]

    def display(self) -> str:
        union = "UNION" if self.distinct else "UNION ALL"
        return f"RecursiveQueryExec: cte={self.cte}, {union}"

    def _execute(self, partition, ctx):
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]")
        try:
            rows = self._collect(self.anchor, 0, ctx)
            seen = None
            if self.distinct:
                rows = _new_rows(rows, None)
                seen = rows
            iterations = 0
            while rows.num_rows:
                reservation.grow(rows.nbytes)
                yield from rows.to_batches(max_chunksize=ctx.batch_size)
                iterations += 1
                if iterations > self.max_iterations:
                    raise ExecutionError(
                        f"WITH RECURSIVE {self.cte}: no fixpoint after {self.max_iterations} "
                        "iterations (raise the option recursive_cte_max_iterations, or make "
                        "the recursive term stop)")
                plan = self.make_recursive(rows)
                rows = pa.concat_tables(
                    [self._collect(plan, p, ctx) for p in range(plan.output_partitioning().count)])
                if self.distinct:
                    rows = _new_rows(rows, seen)
                    seen = pa.concat_tables([seen, rows])
                if not self.distinct:
                    reservation.resize(0)  # UNION ALL holds only the current iteration
        finally:
            reservation.free()

    def _collect(self, plan: ExecutionPlan, partition: int, ctx) -> pa.Table:
        batches = [pa.RecordBatch.from_arrays(
            [c.cast(f.type) if c.type != f.type else c for c, f in zip(b.columns, self.schema)],
            schema=self.schema) for b in plan.execute(partition, ctx)]
        return pa.Table.from_batches(batches, schema=self.schema)


def _new_rows(rows: pa.Table, seen: pa.Table | None) -> pa.Table:
    """The distinct rows of ``rows`` not in ``seen`` (NULLs equal NULLs, as UNION's)."""
    names = [f"c{i}" for i in range(rows.num_columns)]
    marked = [rows.rename_columns(names).append_column(
        "__new", pa.repeat(pa.scalar(1, pa.int8()), rows.num_rows))]
    if seen is not None and seen.num_rows:
        marked.insert(0, seen.rename_columns(names).append_column(
            "__new", pa.repeat(pa.scalar(0, pa.int8()), seen.num_rows)))
    both = pa.concat_tables(marked)
    if not names:
        return rows.slice(0, min(rows.num_rows, 0 if seen is not None and seen.num_rows else 1))
    grouped = both.group_by(names, use_threads=False).aggregate([("__new", "min")])
    fresh = grouped.filter(pc.equal(grouped["__new_min"], 1)).select(names)
    return pa.Table.from_arrays(fresh.columns, schema=rows.schema)
