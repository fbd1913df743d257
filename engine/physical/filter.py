"""FilterExec: keeps the rows whose predicate is true (NULL counts as false).

A conjunction is evaluated in at most two stages: the cheap conjuncts (comparisons of
numbers and dates) over the whole batch first, then the costly ones (anything touching a
string: ``=``/``IN`` on strings, LIKE, regexps) over the rows that are left when they are
at most half the batch (else over the whole batch: copying most rows costs more). TPC-H Q12's
date range keeps 1 row in 7, so its ``l_shipmode IN ('MAIL', 'SHIP')`` hashes 1/7 of
lineitem's strings instead of all 6M. A row fails the filter if any conjunct is false or
NULL, whatever their order; evaluating a conjunct on fewer rows never raises an error that
the whole batch would not have raised.

Errors follow the written order, as in DuckDB: a conjunct counts only on the rows every
conjunct written before it keeps (``a < 3 AND CAST(a AS INTEGER) * 1000000000 > 0`` does not
overflow on a = 3). The stages run first; only when one raises is the predicate evaluated
again as written (AND is evaluated lazily on error, physical/expressions.py), so an error
is raised only if it comes from a row that gets that far (no cost unless something raised).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import ExecutionError, ResourcesExhausted, WorkerLost
from plansight.engine.logical.expr import Call, Expr, Literal, conjunction, split_conjunction, walk
from plansight.engine.physical.equivalence import constants, equalities
from plansight.engine.physical.expressions import evaluate_predicate
from plansight.engine.physical.plan import ExecutionPlan


class FilterExec(ExecutionPlan):
    name = "FilterExec"

    def __init__(self, predicate: Expr, input: ExecutionPlan):
        super().__init__(input.schema)
        self.predicate, self.input = predicate, input
        self.stages = evaluation_stages(predicate)

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
            try:
                kept = _kept(batch, self._mask(batch)) if len(self.stages) == 1 else \
                    self._staged(batch)
            except (ResourcesExhausted, WorkerLost):
                raise
            except ExecutionError:  # overflow, conversion, ...: perhaps on a row that an
                # earlier conjunct rejects (the stages reorder them): in the written order
                kept = _kept(batch, evaluate_predicate(self.predicate, batch))
            yield kept

    def _mask(self, batch):
        return evaluate_predicate(self.stages[0], batch)

    def _staged(self, batch):
        """Cheap stage first; the costly one on its survivors when they are at most half the
        batch (copying most of a batch costs more than the costly stage saves), else on the
        whole batch, the masks combined."""
        cheap, costly = self.stages
        mask = evaluate_predicate(cheap, batch)
        kept = mask.true_count
        if not kept:
            return batch.slice(0, 0)
        if 2 * kept <= len(mask):
            batch = _kept(batch, mask, kept)
            return _kept(batch, evaluate_predicate(costly, batch))
        return _kept(batch, pc.and_(mask, evaluate_predicate(costly, batch)))


def _kept(batch: pa.RecordBatch, mask: pa.Array, kept: int | None = None) -> pa.RecordBatch:
    """The rows of ``batch`` where ``mask`` (no NULLs) is true; the batch itself when that is
    every row (a date bound that holds for a whole row group, Q1's for most): no copy."""
    if kept is None:
        kept = mask.true_count
    if kept == batch.num_rows:
        return batch
    return batch.slice(0, 0) if kept == 0 else batch.filter(mask)


def evaluation_stages(predicate: Expr) -> list[Expr]:
    """The predicate as [cheap conjuncts, costly conjuncts] (each an AND; either may be
    absent), the conjuncts in their written order within a stage."""
    cheap, costly = [], []
    for conjunct in split_conjunction(predicate):
        (costly if _costly(conjunct) else cheap).append(conjunct)
    return [stage for stage in (conjunction(cheap), conjunction(costly)) if stage is not None]


def cheap_conjuncts(predicate: Expr) -> Expr | None:
    """The AND of ``predicate``'s cheap conjuncts (the first stage), or None when all are
    costly."""
    return conjunction([c for c in split_conjunction(predicate) if not _costly(c)])


def _costly(expr: Expr) -> bool:
    """Whether evaluating ``expr`` touches variable-width values or calls a pattern matcher:
    per row that costs far more than comparing fixed-width numbers."""
    for node in walk(expr):
        type_ = getattr(node, "type", None)
        if type_ is not None and (pa.types.is_string(type_) or pa.types.is_large_string(type_)
                                  or pa.types.is_binary(type_) or
                                  pa.types.is_large_binary(type_) or
                                  pa.types.is_dictionary(type_)):
            return True
        if isinstance(node, Call) and ("like" in node.func or "regexp" in node.func):
            return True
        if isinstance(node, Literal) and isinstance(node.value, (str, bytes)):
            return True
    return False
