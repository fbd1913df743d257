"""Limit pushdown: nested limits combine; a limit becomes a fetch on sorts and scans.

Limits pass through projections and into each input of a UNION ALL (as local limits, the
global one stays), never through filters, aggregates or joins, which change cardinality.
"""

from __future__ import annotations

from dataclasses import replace

from plansight.engine.logical import plan as lp


def combine_limits(outer: lp.Limit, inner: lp.Limit) -> lp.Limit:
    """``OFFSET a LIMIT b`` over ``OFFSET c LIMIT d`` as one limit.

    Example:
        >>> from plansight.engine.logical.plan import Limit, Values
        >>> v = Values((), ((),))
        >>> c = combine_limits(Limit(v, 2, 5), Limit(v, 1, 4))
        >>> (c.skip, c.fetch)
        (3, 2)
    """
    skip = inner.skip + outer.skip
    if inner.fetch is None:
        fetch = outer.fetch
    else:
        left = max(inner.fetch - outer.skip, 0)
        fetch = left if outer.fetch is None else min(left, outer.fetch)
    return lp.Limit(inner.input, skip, fetch)


def push_down_limit(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    if isinstance(plan, lp.Limit):
        child = plan.input
        if isinstance(child, lp.Limit):
            return push_down_limit(combine_limits(plan, child))
        if plan.fetch is not None:
            bound = plan.skip + plan.fetch
            if isinstance(child, lp.Projection):
                inner = push_down_limit(lp.Limit(child.input, plan.skip, plan.fetch))
                return replace(child, input=inner)
            if isinstance(child, lp.Sort):
                fetch = bound if child.fetch is None else min(bound, child.fetch)
                return replace(plan, input=replace(child, fetch=fetch,
                                                   input=push_down_limit(child.input)))
            if isinstance(child, lp.TableScan):
                fetch = bound if child.fetch is None else min(bound, child.fetch)
                return replace(plan, input=replace(child, fetch=fetch))
            if isinstance(child, lp.Union):
                inputs = tuple(push_down_limit(lp.Limit(c, 0, bound)) for c in child.union_inputs)
                return replace(plan, input=replace(child, union_inputs=inputs))
    inputs = tuple(push_down_limit(c) for c in plan.inputs())
    return plan.with_inputs(inputs) if inputs else plan
