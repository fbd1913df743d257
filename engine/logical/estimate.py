"""Row-count estimates for logical plans: rough, but enough to order joins and pick sides."""

from __future__ import annotations

from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import Call, Expr, split_conjunction

_SELECTIVITY = {"eq": 0.1, "in_list": 0.2, "lt": 0.33, "lte": 0.33, "gt": 0.33, "gte": 0.33,
                "like": 0.25, "ilike": 0.25, "is_null": 0.1, "neq": 0.9, "is_not_null": 0.9}


def selectivity(predicate: Expr) -> float:
    """The fraction of rows a predicate keeps: a product over its conjuncts, textbook style
    (equality 0.1, range 0.33, ...), floored so that estimates never reach zero."""
    fraction = 1.0
    for conjunct in split_conjunction(predicate):
        func = conjunct.func if isinstance(conjunct, Call) else ""
        fraction *= _SELECTIVITY.get(func, 0.5)
    return max(fraction, 1e-4)


def estimate_rows(plan: lp.LogicalPlan) -> float:
    """A rough output size, enough to pick the smaller join side."""
    if isinstance(plan, lp.TableScan):
        rows = plan.source.num_rows()
        rows = 1e6 if rows is None else rows
        if plan.fetch is not None:
            rows = min(rows, plan.fetch)
        return rows
    if isinstance(plan, lp.Values):
        return len(plan.rows)
    if isinstance(plan, lp.Filter):
        return estimate_rows(plan.input) * selectivity(plan.predicate)
    if isinstance(plan, lp.Aggregate):
        return 1 if not plan.group_exprs else estimate_rows(plan.input) * 0.2
    if isinstance(plan, lp.Limit):
        inner = estimate_rows(plan.input)
        return inner if plan.fetch is None else min(inner, plan.fetch)
    if isinstance(plan, lp.Join):
        left, right = estimate_rows(plan.left), estimate_rows(plan.right)
        if plan.kind in ("semi", "anti"):
            return left
        if plan.kind == "cross":
            return left * right
        return max(left, right)
    if isinstance(plan, lp.Union):
        return sum(estimate_rows(c) for c in plan.union_inputs)
    inputs = plan.inputs()
    return estimate_rows(inputs[0]) if inputs else 1
