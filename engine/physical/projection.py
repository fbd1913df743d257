"""ProjectionExec: computes one output column per expression."""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.logical.expr import Column, Expr, Literal, SortKey
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.plan import ExecutionPlan, Partitioning


class ProjectionExec(ExecutionPlan):
    name = "ProjectionExec"

    def __init__(self, exprs: list[Expr], outputs: list[Column], input: ExecutionPlan):
        schema = pa.schema([pa.field(o.field_name, e.type) for e, o in zip(exprs, outputs)])
        super().__init__(schema)
        self.exprs, self.outputs, self.input = list(exprs), list(outputs), input
        # a column passed through under a new id keeps its partitioning/ordering meaning
        self._renames = {e.id: o for e, o in zip(exprs, outputs) if isinstance(e, Column)}

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return ProjectionExec(self.exprs, self.outputs, children[0])

    def maintains_input_order(self):
        return [True]

    def _rename(self, expr: Expr) -> Expr | None:
        """The output column carrying ``expr`` (or a column known equal to it), if any."""
        if isinstance(expr, Column):
            for member in self.input.equivalences().members(expr):
                renamed = self._renames.get(member.id)
                if renamed is not None:
                    return renamed
        return None

    def _compute_equivalences(self):
        return self.input.equivalences().project(
            ((e, o) for e, o in zip(self.exprs, self.outputs) if isinstance(e, Column)),
            [o for e, o in zip(self.exprs, self.outputs) if isinstance(e, Literal)])

    def output_ordering(self):
        ordering = self.input.output_ordering() or ()
        constant = self.input.equivalences().is_constant
        out = []
        for key in ordering:
            renamed = self._rename(key.expr)
            if renamed is None:
                if constant(key.expr):
                    continue  # every row ties on a constant: the later keys still order
                break
            out.append(SortKey(renamed, key.descending, key.nulls_first))
        return tuple(out) or None

    def output_partitioning(self):
        part = self.input.output_partitioning()
        if part.hash_exprs is None:
            return part
        renamed = [self._rename(e) for e in part.hash_exprs]
        if any(r is None for r in renamed):
            return Partitioning(part.count)
        return Partitioning(part.count, tuple(renamed))

    def display(self) -> str:
        parts = [str(e) if isinstance(e, Column) and e.name == o.name else f"{e} AS {o.name}"
                 for e, o in zip(self.exprs, self.outputs)]
        return f"ProjectionExec: expr=[{', '.join(parts)}]"

    def hidden_in_display(self) -> bool:
        """Every input column passed through in order under its own name: nothing to see
        (the new column ids it gives are internal)."""
        return len(self.exprs) == len(self.input.schema) and all(
            isinstance(e, Column) and e.name == o.name and e.field_name == name
            for e, o, name in zip(self.exprs, self.outputs, self.input.schema.names))

    def _execute(self, partition, ctx):
        # most outputs are plain column references: fetch those by name in one Arrow call
        # instead of going through evaluate() per column per batch
        plan = [(e.field_name if isinstance(e, Column) else None, e) for e in self.exprs]
        for batch in self.input.execute(partition, ctx):
            if not isinstance(batch, pa.RecordBatch):  # a Table's columns are chunked
                columns = [evaluate(e, batch) for e in self.exprs]
            else:
                columns = [evaluate(e, batch) if name is None else batch.column(name)
                           for name, e in plan]
            yield pa.RecordBatch.from_arrays(columns, schema=self.schema)
