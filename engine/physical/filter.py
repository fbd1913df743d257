"""FilterExec: keeps the rows whose predicate is true (NULL counts as false)."""

from __future__ import annotations

from plansight.engine.logical.expr import Expr
from plansight.engine.physical.equivalence import constants, equalities
from plansight.engine.physical.expressions import evaluate_predicate
from plansight.engine.physical.plan import ExecutionPlan


class FilterExec(ExecutionPlan):
    name = "FilterExec"

    def __init__(self, predicate: Expr, input: ExecutionPlan):
        super().__init__(input.schema)
        self.predicate, self.input = predicate, input

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return FilterExec(self.predicate, children[0])

    def maintains_input_order(self):
        return [True]

    def _compute_equivalences(self):
        # rows passing ``a = b`` have a equal to b (a NULL on either side fails the filter);
        # rows passing ``a = 5`` or ``a IS NULL`` all have the same a
        return self.input.equivalences().with_equal(equalities(self.predicate)).with_constants(
            constants(self.predicate))

    def display(self) -> str:
        return f"FilterExec: {self.predicate}"

    def _execute(self, partition, ctx):
        for batch in self.input.execute(partition, ctx):
            mask = evaluate_predicate(self.predicate, batch)
            yield batch.filter(mask)
