"""Row-count estimates for logical plans: rough, but enough to order joins and pick sides."""

from __future__ import annotations

from plansight.engine.logical import plan as lp


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
        return estimate_rows(plan.input) * 0.3
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
