"""Windows chained into executors: the one place that groups a SELECT's windows by their
(PARTITION BY, ORDER BY) and stacks an executor per group.

Used three times: at plan time (planning.py, where EnsureRequirements adds the sorts), by the
hash executor's sorting fallback (which adds its own spilling sorts) and for a partition too
large for memory (whose rows already arrive in order). Each stage appends its windows'
columns after its input's, so the columns come out in stage order; ``reorder`` maps them back
to the windows' order.

    rows ─▶ [sort] ─▶ executor(group 1) ─▶ [sort] ─▶ executor(group 2) ─▶ ... ─▶ reorder
"""

from __future__ import annotations

from collections.abc import Callable

from plansight.engine.logical.expr import Column, SortKey, WindowCall
from plansight.engine.physical.plan import ExecutionPlan


def group_windows(windows: list[WindowCall], skip=()) -> dict[tuple, list[int]]:
    """Indices of the windows sharing (PARTITION BY, ORDER BY), in order of appearance."""
    groups: dict[tuple, list[int]] = {}
    for i, window in enumerate(windows):
        if i not in skip:
            groups.setdefault((tuple(window.partition_by), tuple(window.order_by)),
                              []).append(i)
    return groups


def sort_keys(group_key: tuple) -> tuple[SortKey, ...]:
    """The row order a group needs: its partition keys, then its order keys."""
    partition_by, order_by = group_key
    return tuple(SortKey(e) for e in partition_by) + tuple(order_by)


def chain(windows: list[WindowCall], outputs: list[Column], groups: list[list[int]],
          below: ExecutionPlan,
          stage: Callable[[list[WindowCall], list[Column], ExecutionPlan], ExecutionPlan]
          ) -> tuple[ExecutionPlan, list[int]]:
    """One ``stage`` per group stacked on ``below``; returns the top and the window indices in
    the order their columns come out."""
    order: list[int] = []
    for indices in groups:
        below = stage([windows[i] for i in indices], [outputs[i] for i in indices], below)
        order += indices
    return below, order


def reorder(order: list[int], width: int) -> list[int]:
    """Column indices that put the stages' output back in input-then-windows order:
    ``width`` input columns, then window ``i`` for i = 0, 1, ..."""
    position = {index: width + k for k, index in enumerate(order)}
    return list(range(width)) + [position[i] for i in range(len(order))]
