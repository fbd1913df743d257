"""Limit pruning: a LIMIT over a filter does not read row groups past those that surely fill it.

    GlobalLimitExec: skip=s, fetch=f          the scan needs s + f rows that pass the filter;
      [ProjectionExec]                        row groups whose statistics prove that *every*
        FilterExec: x >= 10 AND y = 'a'       row passes (min/max inside the range, no NULLs)
          [ProjectionExec]                    are such rows. Once the row groups read so far
            DataSourceExec (Parquet)          hold s + f of them, the row groups after those
                                              are not read.

The LIMIT keeps the first passing rows in source order (keep_source_order, as DuckDB), so
partially matching row groups before that point are still read: the rows are DuckDB's.
It applies only when the whole filter is a conjunction of ``column op literal`` comparisons
on scan columns (anything else could reject rows of a "fully matching" row group), and only
through operators that keep every row (projections). It runs before EnsureRequirements, so
the scan's partition count is final.
"""

from __future__ import annotations

from plansight.engine.logical.expr import split_conjunction
from plansight.engine.optimizer.push_down_filters import column_comparison
from plansight.engine.physical.filter import FilterExec
from plansight.engine.physical.limit import GlobalLimitExec
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.projection import ProjectionExec
from plansight.engine.physical.scan import DataSourceExec
from plansight.engine.physical_optimizer.push_dynamic_filters import find_scan_column


def prune_by_limit(plan: ExecutionPlan) -> ExecutionPlan:
    if isinstance(plan, GlobalLimitExec) and plan.fetch is not None and not plan.local:
        pruned = _prune_chain(plan.input, plan.skip + plan.fetch, [])
        if pruned is not None:
            return plan.with_children([pruned])
    children = plan.children()
    if not children:
        return plan
    new = [prune_by_limit(child) for child in children]
    if all(a is b for a, b in zip(new, children)):
        return plan
    return plan.with_children(new)


def _prune_chain(plan: ExecutionPlan, rows: int, filters: list[FilterExec]):
    """``plan`` with its scan limit-pruned, or None when the chain does not qualify."""
    if isinstance(plan, DataSourceExec):
        predicates = _scan_predicates(plan, filters)
        if not predicates:
            return None
        pruned = plan.with_limit_pruning(predicates, rows)
        return pruned if pruned.limit_pruned_units else None
    if isinstance(plan, FilterExec):
        below = _prune_chain(plan.input, rows, filters + [plan])
    elif isinstance(plan, ProjectionExec):
        below = _prune_chain(plan.input, rows, filters)
    else:
        return None
    return None if below is None else plan.with_children([below])


def _scan_predicates(scan: DataSourceExec, filters: list[FilterExec]) -> tuple | None:
    """Every conjunct of ``filters`` as a (source column, op, value) on ``scan``, or None."""
    predicates = []
    for node in filters:
        for conjunct in split_conjunction(node.predicate):
            comparison = column_comparison(conjunct)
            if comparison is None:
                return None
            column, op, value = comparison
            found = find_scan_column(node.input, column)
            if found is None or found[0] is not scan:
                return None
            predicates.append((found[1], op, value))
    return tuple(dict.fromkeys(predicates))
