"""The ordered logical rules."""

from __future__ import annotations

from plansight.engine.logical.plan import LogicalPlan
from plansight.engine.optimizer.decorrelate_subqueries import decorrelate_subqueries
from plansight.engine.optimizer.eliminate_cross_joins import eliminate_cross_joins
from plansight.engine.optimizer.encode_nested_keys import encode_nested_keys
from plansight.engine.optimizer.exact_avg import exact_avg
from plansight.engine.optimizer.fold_constants import fold_constants
from plansight.engine.optimizer.push_down_filters import push_down_filters
from plansight.engine.optimizer.push_down_limit import push_down_limit
from plansight.engine.optimizer.push_down_projections import push_down_projections
from plansight.engine.optimizer.reorder_joins import reorder_joins
from plansight.engine.optimizer.unwrap_cast_in_comparison import unwrap_cast_in_comparison

RULES = (
    fold_constants,          # first: later rules see literals, not 1 + 1
    unwrap_cast_in_comparison,  # on folded literals: compare columns in their own type
    decorrelate_subqueries,  # before pushdown: subqueries become joins filters can move into
    encode_nested_keys,      # struct / list keys by their bytes (also the decorrelated joins')
    exact_avg,               # AVG of integers and decimals from an exact sum, divided once
    eliminate_cross_joins,   # FROM a, b, c: join in the order equalities connect them
    push_down_filters,       # also turns cross joins + WHERE equalities into equi-joins
    reorder_joins,           # with filters below the joins, so estimates see them
    push_down_filters,       # again: the reordered cross joins become equi-joins
    fold_constants,          # pushdown substitutes expressions; fold what became constant
    unwrap_cast_in_comparison,  # again: decorrelated subqueries brought new comparisons
    push_down_limit,         # after filters: a limit never passes a filter
    push_down_projections,   # last: prune what every earlier rewrite left unused
)


# Rules a plan cannot run without: the physical planner has no operator for a subquery.
# Nor for a struct or list key: Arrow hashes no nested values.
# An exact AVG is the result, not an optimization: both plans compute it.
REQUIRED = (decorrelate_subqueries, encode_nested_keys, exact_avg)


def optimize(plan: LogicalPlan, enabled: bool = True) -> LogicalPlan:
    """Apply RULES in order; with ``enabled`` False only the REQUIRED ones (the reference
    plan the differential fuzzer compares the optimized one with)."""
    for rule in RULES if enabled else REQUIRED:
        plan = rule(plan)
    return plan
