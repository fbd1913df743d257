"""A final LIMIT across stages: stop the tasks whose rows it will never take.

Locally a LIMIT stops pulling once it has its rows, and everything below it stops with it.
Staged, the rows come from the tasks of another stage, each run to its end before the final
stage starts; the limit would wait for all of them:

    final stage:  [ProjectionExec] GlobalLimitExec(skip, fetch) ── CoalescePartitionsExec
                                                                   └─ ShuffleReaderExec(S)
    stage S:      ShuffleWriterExec(passthrough, fetch = skip + fetch) ── ...

Each task of stage S writes at most ``skip + fetch`` rows (more never reach the output) and
stops its input there. The client counts the rows of S's tasks as they end; once the LIMIT
is sure to be satisfied, it cancels every task still queued or running (stage S's and the
stages below them), and starts the final stage on the pieces of the tasks that finished.
With ``preserve_order`` (rows in source order, as locally) only a prefix of S's partitions
counts, partition 0 first, so the rows are the ones a local run returns; without it any
finished task's rows do.
"""

from __future__ import annotations

from dataclasses import dataclass

from plansight.engine.distributed.shuffle import PASSTHROUGH, ShuffleReaderExec
from plansight.engine.physical.coalesce_partitions import CoalescePartitionsExec
from plansight.engine.physical.limit import GlobalLimitExec
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.projection import ProjectionExec


@dataclass(frozen=True)
class FinalLimit:
    """The final stage's LIMIT: it needs ``rows`` rows of stage ``stage_id``'s tasks, in
    partition order when ``ordered``."""

    stage_id: int
    rows: int
    ordered: bool

    def satisfied(self, rows_by_task: dict[int, int]) -> bool:
        """Whether the finished tasks (partition -> rows written) hold the rows it needs.

        Example:
            >>> limit = FinalLimit(1, 10, ordered=True)
            >>> limit.satisfied({0: 4, 2: 50}), limit.satisfied({0: 4, 1: 6})
            (False, True)
            >>> FinalLimit(1, 10, ordered=False).satisfied({0: 4, 2: 50})
            True
        """
        if not self.ordered:
            return sum(rows_by_task.values()) >= self.rows
        total, partition = 0, 0
        while partition in rows_by_task and total < self.rows:
            total += rows_by_task[partition]
            partition += 1
        return total >= self.rows


def final_limit(plan: ExecutionPlan) -> FinalLimit | None:
    """The LIMIT at the top of a staged plan's final stage, over a coalesced passthrough
    shuffle (the shape above); None for any other top."""
    while isinstance(plan, ProjectionExec):
        plan = plan.input
    if not isinstance(plan, GlobalLimitExec) or plan.local or plan.fetch is None:
        return None
    coalesce = plan.input
    if not isinstance(coalesce, CoalescePartitionsExec):
        return None
    reader = coalesce.input
    if not isinstance(reader, ShuffleReaderExec) or reader.mode != PASSTHROUGH or \
            reader.input is None:
        return None
    return FinalLimit(reader.stage_id, plan.skip + plan.fetch, coalesce.preserve_order)


def limit_stage_tasks(plan: ExecutionPlan) -> None:
    """Give the writer of the stage below the final LIMIT its ``fetch`` (rows per task)."""
    limit = final_limit(plan)
    if limit is not None:
        while not isinstance(plan, ShuffleReaderExec):
            plan = plan.children()[0]
        plan.input.fetch = limit.rows
