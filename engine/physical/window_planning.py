"""Planning a logical Window node: one WindowAggExec per (partition, order) specification.

The binder already groups window calls by specification; the input ordering the operator
declares makes EnsureRequirements insert the sort only when the input is not sorted yet.
"""

from __future__ import annotations

from plansight.engine.exec.context import SessionConfig
from plansight.engine.logical import plan as lp
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.window_agg import WindowAggExec


def plan_window(node: lp.Window, child: ExecutionPlan, config: SessionConfig) -> ExecutionPlan:
    groups: dict[tuple, list[int]] = {}
    for i, w in enumerate(node.windows):
        groups.setdefault((w.partition_by, w.order_by), []).append(i)
    plan = child
    for indices in groups.values():
        plan = WindowAggExec([node.windows[i] for i in indices],
                             [node.window_outputs[i] for i in indices], plan)
    return plan
