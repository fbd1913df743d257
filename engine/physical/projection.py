"""ProjectionExec: computes one output column per expression.

An expression that several outputs contain is computed once per batch: TPC-H Q1 sums both
``l_extendedprice * (1 - l_discount)`` and that times ``(1 + l_tax)``. Not inside CASE or
COALESCE, whose branches run only on the rows that reach them (``CASE WHEN d <> 0 THEN n / d
END`` must not divide by a zero the CASE rules out), and never a volatile one (each
``random()`` is its own value).
"""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.logical.expr import (
    Call,
    Cast,
    Column,
    Expr,
    Literal,
    SortKey,
    is_volatile,
    next_id,
    transform,
    walk,
)
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.plan import ExecutionPlan


class ProjectionExec(ExecutionPlan):
    name = "ProjectionExec"

    def __init__(self, exprs: list[Expr], outputs: list[Column], input: ExecutionPlan):
        schema = pa.schema([pa.field(o.field_name, e.type) for e, o in zip(exprs, outputs)])
        super().__init__(schema)
        self.exprs, self.outputs, self.input = list(exprs), list(outputs), input
        # a column passed through under a new id keeps its partitioning/ordering meaning
        self._renames = {e.id: o for e, o in zip(exprs, outputs) if isinstance(e, Column)}
        self._common, self._computed = _common_subexpressions(self.exprs)

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
        return self.input.output_partitioning().renamed(self._rename)

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
        exprs = self._computed
        plan = [(e.field_name if isinstance(e, Column) else None, e) for e in exprs]
        for batch in self.input.execute(partition, ctx):
            for column, expr in self._common:  # in order: a later one may use an earlier
                batch = batch.append_column(pa.field(column.field_name, column.type),
                                            evaluate(expr, batch))
            if not isinstance(batch, pa.RecordBatch):  # a Table's columns are chunked
                columns = [evaluate(e, batch) for e in exprs]
            else:
                columns = [evaluate(e, batch) if name is None else batch.column(name)
                           for name, e in plan]
            yield pa.RecordBatch.from_arrays(columns, schema=self.schema)


def _key(expr: Expr) -> tuple:
    """Equal for the same computation: dataclass equality, but 0.0 is not -0.0 here."""
    return expr, tuple(repr(e.value) for e in walk(expr) if isinstance(e, Literal))


def _candidates(expr: Expr):
    """The computed (Call, Cast) subexpressions of ``expr`` that always run on every row."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (Call, Cast)) and not is_volatile(node):
            yield node
        if isinstance(node, Call) and node.func in ("case", "coalesce"):
            continue  # branches run on some rows only
        stack.extend(node.children())


def _common_subexpressions(exprs: list[Expr]) -> tuple[list[tuple[Column, Expr]], list[Expr]]:
    """(columns computed first, each with its expression; ``exprs`` reading them): the
    largest expression found more than once becomes a column, again until none repeats."""
    common: list[tuple[Column, Expr]] = []
    exprs = list(exprs)
    while True:
        counts: dict[tuple, int] = {}
        found: dict[tuple, Expr] = {}
        for expr in exprs + [e for _, e in common]:
            for node in _candidates(expr):
                key = _key(node)
                counts[key] = counts.get(key, 0) + 1
                found[key] = node
        repeated = [found[k] for k, n in counts.items() if n > 1]
        if not repeated:
            return common, exprs
        target = max(repeated, key=lambda e: sum(1 for _ in walk(e)))
        column = Column(next_id(), "__common", target.type)
        key = _key(target)
        exprs = [_replace(e, key, column) for e in exprs]
        # first: the larger shared expressions found before may contain it, never the reverse
        common = [(column, target)] + [(c, _replace(e, key, column)) for c, e in common]


def _replace(expr: Expr, key: tuple, column: Column) -> Expr:
    return transform(expr, lambda node: column if isinstance(node, (Call, Cast)) and
                     _key(node) == key else node)
