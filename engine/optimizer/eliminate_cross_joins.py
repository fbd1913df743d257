"""Cross-join elimination: ``FROM a, b, c WHERE a.x = c.x AND c.y = b.y`` joins a with c
first, then b, instead of the cross product a x b that FROM order would build.

A tree of inner/cross joins under a filter is flattened into relations and conjuncts, then
rebuilt left-deep, greedily taking next a relation that some equality connects to what is
already joined (a cross join only when none does). Filter pushdown then places each
conjunct as a join key or below the join.
"""

from __future__ import annotations

from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import Call, columns_of, conjunction, split_conjunction


def eliminate_cross_joins(plan: lp.LogicalPlan) -> lp.LogicalPlan:
    inputs = tuple(eliminate_cross_joins(c) for c in plan.inputs())
    if inputs:
        plan = plan.with_inputs(inputs)
    if not (isinstance(plan, lp.Filter) and is_inner_join(plan.input)):
        return plan
    relations: list[lp.LogicalPlan] = []
    conjuncts = split_conjunction(plan.predicate)
    flatten_inner_joins(plan.input, relations, conjuncts)
    if len(relations) < 3:
        return plan
    ids = [{c.id for c in r.columns} for r in relations]
    joined = relations[0]
    joined_ids = set(ids[0])
    remaining = list(range(1, len(relations)))
    while remaining:
        connected = next((i for i in remaining if any(_connects(c, joined_ids, ids[i])
                                                      for c in conjuncts)), remaining[0])
        remaining.remove(connected)
        joined = lp.Join(joined, relations[connected], "cross")
        joined_ids |= ids[connected]
    return lp.Filter(joined, conjunction(conjuncts))


def is_inner_join(plan: lp.LogicalPlan) -> bool:
    """An inner or cross join whose keys compare with plain ``=`` (a null-equal or null-aware
    join is not the conjunction of its key equalities, so it is never flattened)."""
    return isinstance(plan, lp.Join) and plan.kind in ("inner", "cross") and \
        not plan.null_equal and not plan.null_aware


def flatten_inner_joins(plan, relations: list, conjuncts: list) -> None:
    """The relations under a tree of inner joins, and every condition of those joins as
    conjuncts (keys as equalities)."""
    if is_inner_join(plan):
        flatten_inner_joins(plan.left, relations, conjuncts)
        flatten_inner_joins(plan.right, relations, conjuncts)
        conjuncts.extend(split_conjunction(plan.filter))
        conjuncts.extend(Call("eq", (a, b), _bool()) for a, b in plan.on)
    else:
        relations.append(plan)


def _connects(conjunct, left_ids: set[int], right_ids: set[int]) -> bool:
    if not (isinstance(conjunct, Call) and conjunct.func == "eq"):
        return False
    a, b = (columns_of(x) for x in conjunct.args)
    return bool(a and b) and ((a <= left_ids and b <= right_ids) or
                              (a <= right_ids and b <= left_ids))


def _bool():
    import pyarrow as pa

    return pa.bool_()
