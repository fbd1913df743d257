"""Row-count estimates for logical plans: rough, but enough to order joins and pick sides."""

from __future__ import annotations

from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import Call, Column, Expr, split_conjunction

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


def _scan_of(plan: lp.LogicalPlan, column_id: int) -> tuple[lp.TableScan, str] | None:
    """The scan (and source column name) a column id comes from, looking through the
    operators that pass columns on unchanged."""
    if isinstance(plan, lp.TableScan):
        for column, name in zip(plan.scan_columns, plan.projection):
            if column.id == column_id:
                return plan, name
        return None
    if isinstance(plan, lp.Projection):
        for expr, out in zip(plan.exprs, plan.outputs):
            if out.id == column_id:
                if isinstance(expr, Column) and expr.id != column_id:
                    return _scan_of(plan.input, expr.id)
                if not isinstance(expr, Column):
                    return None
        return _scan_of(plan.input, column_id)
    for child in plan.inputs():
        if any(c.id == column_id for c in child.columns):
            return _scan_of(child, column_id)
    return None


def _range_distinct(scan: lp.TableScan, name: str) -> float | None:
    """max - min + 1 of an integer or date source column, from its statistics."""
    stats = scan.source.column_stats(name) if hasattr(scan.source, "column_stats") else None
    if stats is None:
        return None
    low, high, _ = stats
    try:
        span = high - low
        span = span.days if hasattr(span, "days") else span
        return max(1.0, float(span) + 1)
    except TypeError:
        return None


def source_distinct(expr: Expr, plan: lp.LogicalPlan) -> float | None:
    """Distinct values of a column in its whole source table (before any filter): at most
    the table's rows and its key range; None when the column is computed."""
    if not isinstance(expr, Column):
        return None
    found = _scan_of(plan, expr.id)
    if found is None:
        return None
    scan, name = found
    rows = scan.source.num_rows()
    bound = _range_distinct(scan, name)
    candidates = [float(x) for x in (rows, bound) if x is not None]
    return max(1.0, min(candidates)) if candidates else None


def distinct_estimate(expr: Expr, plan: lp.LogicalPlan) -> float:
    """Distinct values of ``expr`` among ``plan``'s rows: at most the rows, and for an
    integer or date column at most its source range (max - min + 1, from Parquet metadata or
    computed once per registered table). Without statistics every row counts as distinct:
    the join key of the smaller side is taken as a unique key."""
    rows = max(estimate_rows(plan), 1.0)
    if not isinstance(expr, Column):
        return rows
    found = _scan_of(plan, expr.id)
    if found is None:
        return rows
    bound = _range_distinct(*found)
    return rows if bound is None else max(1.0, min(rows, bound))


def join_rows(left: lp.LogicalPlan, right: lp.LogicalPlan,
              on: tuple[tuple[Expr, Expr], ...]) -> float:
    """Inner equi-join output, textbook style: |L| x |R| / max(NDV(l), NDV(r)) for the
    most selective key pair (several pairs are usually one composite key)."""
    left_rows, right_rows = estimate_rows(left), estimate_rows(right)
    if not on:
        return left_rows * right_rows
    denominator = max(max(distinct_estimate(a, left), distinct_estimate(b, right))
                      for a, b in on)
    return max(1.0, left_rows * right_rows / denominator)
