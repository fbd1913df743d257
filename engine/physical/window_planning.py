"""Planning a logical Window node: which window executor, and which ordering it requires.

    input already sorted by (partition keys, ORDER BY) and partitioned by the keys:
      every frame ends a bounded distance ahead  -> BoundedWindowAggExec (emits rows as
                                                    soon as their frames are complete)
      otherwise, or the ORDER BY is reversed, or
      the keys come permuted                     -> WindowAggExec (partition-at-a-time;
                                                    a reversed window reads backwards)
    otherwise                                    -> HashWindowAggExec (integer codes and
                                                    one permutation; rows stay in place)

SQL promises no row order without ORDER BY, so the sort-free HashWindowAggExec is the
default: sorting the whole input (100-byte keys and all payload columns) only to evaluate a
window column costs several times more than permuting integers. An input that arrives
sorted streams through the sorted executor instead, which needs no buffer beyond the open
partition. Window nodes stacked on the same partition keys share one HashWindowAggExec, and
with it the partition codes and, for compatible orderings, the permutation.

The executor declares its requirements; EnsureRequirements adds only what is missing.
``EXECUTOR`` forces an executor for tests: "hash", "sorted" (sorts below the streaming
executors) or "partition" (sorts below WindowAggExec only).
"""

from __future__ import annotations

from plansight.engine.exec.context import SessionConfig
from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import Column, WindowCall
from plansight.engine.physical.bounded_window_agg import BoundedWindowAggExec, bounded_supported
from plansight.engine.physical.plan import (
    SINGLE_PARTITION,
    ExecutionPlan,
    hash_distribution,
    ordering_satisfies,
)
from plansight.engine.physical.window_agg import WindowAggExec, window_direction
from plansight.engine.physical.window_hash_agg import HashWindowAggExec

EXECUTOR = "auto"  # "auto" | "hash" | "sorted" (bounded where it can) | "partition"


def plan_window(node: lp.Window, child: ExecutionPlan, config: SessionConfig) -> ExecutionPlan:
    groups: dict[tuple, list[int]] = {}
    for i, w in enumerate(node.windows):
        groups.setdefault((w.partition_by, w.order_by), []).append(i)
    plan = child
    for indices in groups.values():
        windows = [node.windows[i] for i in indices]
        outputs = [node.window_outputs[i] for i in indices]
        plan = _plan_group(windows, outputs, plan)
    return plan


def _plan_group(windows: list[WindowCall], outputs: list[Column],
                child: ExecutionPlan) -> ExecutionPlan:
    if EXECUTOR != "hash":
        sorted_plan = _sorted_executor(windows, outputs, child)
        if sorted_plan is not None:
            return sorted_plan
    if EXECUTOR == "sorted" and all(bounded_supported(w) for w in windows):
        return BoundedWindowAggExec(windows, outputs, child)
    if EXECUTOR in ("sorted", "partition"):
        return WindowAggExec(windows, outputs, child)
    if isinstance(child, HashWindowAggExec) and _can_merge(child, windows):
        return HashWindowAggExec(child.windows + windows, child.outputs + outputs, child.input)
    return HashWindowAggExec(windows, outputs, child)


def _sorted_executor(windows: list[WindowCall], outputs: list[Column],
                     child: ExecutionPlan) -> ExecutionPlan | None:
    """A sorted executor when ``child`` already delivers the rows in a usable order."""
    partition_by = list(windows[0].partition_by)
    distribution = hash_distribution(partition_by) if partition_by else SINGLE_PARTITION
    if not distribution.satisfied_by(child.output_partitioning()):
        return None
    have = tuple(child.output_ordering() or ())
    width = len(partition_by)
    # any permutation of the partition keys, in any direction, groups the partitions
    if len(have) < width or {k.expr for k in have[:width]} != set(partition_by):
        return None
    order_keys = have[width:]
    directions = [window_direction(w, order_keys) for w in windows]
    if not all(directions):
        return None
    bounded = BoundedWindowAggExec.required_ordering(windows[0])
    if EXECUTOR != "partition" and all(bounded_supported(w) for w in windows) and \
            ordering_satisfies(have, bounded):
        return BoundedWindowAggExec(windows, outputs, child)
    return WindowAggExec(windows, outputs, child, order_keys=order_keys,
                         partition_ordering=have[:width])


def _can_merge(child: HashWindowAggExec, windows: list[WindowCall]) -> bool:
    """Same partition keys, and the new windows do not read the child's window columns."""
    if set(child.windows[0].partition_by) != set(windows[0].partition_by):
        return False
    produced = {o.field_name for o in child.outputs}
    for window in windows:
        stack = list(window.children())
        while stack:
            expr = stack.pop()
            if isinstance(expr, Column) and expr.field_name in produced:
                return False
            stack.extend(expr.children())
    return True
