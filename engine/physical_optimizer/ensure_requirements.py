"""EnsureRequirements: the one rule that inserts exchanges and sorts.

For every operator and input, compare what the operator requires (distribution, ordering)
with what the input provides, and insert only what is missing:

    required SinglePartition, input has N > 1  -> CoalescePartitionsExec
                                                  (SortPreservingMergeExec if ordered)
    required Hash(keys), input not so          -> RepartitionExec(Hash(keys), target)
                                                  (preserve_order when the input is sorted
                                                  as the operator requires: merge on read)
    required ordering, input not so ordered    -> SortExec (per partition)

and removes a SortExec whose input is already sorted by its keys (a source's declared order,
or an order established below): each partition passes through, merged when the sort had to
produce one stream, cut to ``fetch`` rows for a top-k.
"""

from __future__ import annotations

from plansight.engine.physical.coalesce_partitions import CoalescePartitionsExec
from plansight.engine.physical.limit import GlobalLimitExec
from plansight.engine.physical.plan import ExecutionPlan, ordering_satisfies
from plansight.engine.physical.repartition import RepartitionExec
from plansight.engine.physical.sorts.sort import SortExec
from plansight.engine.physical.sorts.sort_preserving_merge import SortPreservingMergeExec
from plansight.engine.physical.vocabulary import RepartitionMode


def ensure_requirements(plan: ExecutionPlan, target_partitions: int) -> ExecutionPlan:
    children = [ensure_requirements(c, target_partitions) for c in plan.children()]
    if not children:
        return plan
    if isinstance(plan, SortExec) and ordering_satisfies(
            children[0].output_ordering(), tuple(plan.keys), children[0].equivalences()):
        return _presorted(plan, children[0])
    distributions = plan.required_input_distribution()
    orderings = plan.required_input_ordering()
    new_children = []
    for child, distribution, ordering in zip(children, distributions, orderings):
        partitioning = child.output_partitioning()
        equivalences = child.equivalences()
        if not distribution.satisfied_by(partitioning, equivalences):
            if distribution.kind == "single":
                child = _merge(child)
            else:
                # a sorted input that must stay sorted is merged on read, not sorted again
                have = child.output_ordering()
                preserve = bool(ordering) and bool(have) and partitioning.count > 1 and \
                    ordering_satisfies(have, ordering, equivalences)
                child = _repartition(child, distribution.repartition_exprs,
                                     distribution.partitions or target_partitions, preserve)
        if ordering and not ordering_satisfies(child.output_ordering(), ordering,
                                               child.equivalences()):
            # constant and repeated keys order nothing: sort by the significant ones
            child = SortExec(child.equivalences().significant_keys(ordering), child,
                             preserve_partitioning=child.output_partitioning().count > 1)
        new_children.append(child)
    if all(a is b for a, b in zip(new_children, plan.children())):
        return plan
    return plan.with_children(new_children)


def _presorted(sort: SortExec, child: ExecutionPlan) -> ExecutionPlan:
    """What ``sort`` becomes over a ``child`` whose partitions are already sorted by its keys."""
    if child.output_partitioning().count > 1 and not sort.preserve_partitioning:

        return SortPreservingMergeExec(list(sort.keys), child, fetch=sort.fetch)
    if sort.fetch is None:
        return child
    return GlobalLimitExec(child, 0, sort.fetch, local=sort.preserve_partitioning)


def _merge(child: ExecutionPlan) -> ExecutionPlan:
    ordering = child.output_ordering()
    if ordering and child.equivalences().significant_keys(ordering):  # not only constants
        return SortPreservingMergeExec(list(ordering), child)
    return CoalescePartitionsExec(child)


def _repartition(child: ExecutionPlan, exprs, target_partitions: int,
                 preserve_order: bool = False) -> ExecutionPlan:
    return RepartitionExec(child, RepartitionMode.HASH, target_partitions, tuple(exprs),
                           preserve_order)


def ensure_single_output(plan: ExecutionPlan) -> ExecutionPlan:
    """The root of a query returns one stream."""
    if plan.output_partitioning().count > 1:
        return _merge(plan)
    return plan
