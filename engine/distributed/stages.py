"""Cut a physical plan into stages at its exchanges (Ballista's cut, DataFusion's plans).

    RepartitionExec(child)            ->  ShuffleReaderExec ── ShuffleWriterExec(child)
    CoalescePartitionsExec(child)     ->  CoalescePartitionsExec(ShuffleReaderExec ──
    SortPreservingMergeExec(child)        ShuffleWriterExec(child, passthrough))

A stage is a ShuffleWriterExec and what is below it down to the next readers, or the root
(the final stage); it runs as one task per partition. A repartition's routing moves into
the writer (its map tasks) and its reading into the reader (one task per output
partition), so a shuffle of M inputs to P outputs is M + P tasks, never M x P. A coalesce
or merge stays whole in the next stage: its reader hands partition m the pieces of map
task m, and the merge reads all of them as it does locally.

Stage ids count from 1 in the order the stages can run (children first); the tree keeps
each writer below its reader, so EXPLAIN shows the stages in place.
"""

from __future__ import annotations

import copy
import itertools
import types
from dataclasses import dataclass

from plansight.engine.distributed.shuffle import (
    PASSTHROUGH,
    ShuffleReaderExec,
    ShuffleWriterExec,
)
from plansight.engine.distributed.stage_filters import link_dynamic_filters
from plansight.engine.distributed.stage_limits import limit_stage_tasks
from plansight.engine.errors import InternalError
from plansight.engine.physical.coalesce_partitions import CoalescePartitionsExec
from plansight.engine.physical.plan import ExecutionPlan, fill_row_estimates
from plansight.engine.physical.recursive_query import RecursiveQueryExec
from plansight.engine.physical.repartition import RepartitionExec
from plansight.engine.physical.sorts.sort_preserving_merge import SortPreservingMergeExec
from plansight.engine.physical.union import UnionExec


@dataclass
class Stage:
    """One stage: ``plan`` runs once per partition (``tasks``); it reads the stages in
    ``inputs``. The final stage's plan is the query's root, the others' a writer."""

    stage_id: int
    plan: ExecutionPlan
    inputs: tuple[int, ...]

    @property
    def tasks(self) -> int:
        return self.plan.output_partitioning().count

    @property
    def final(self) -> bool:
        return not isinstance(self.plan, ShuffleWriterExec)

    @property
    def after(self) -> tuple[int, ...]:
        """Build stages whose join keys this stage's scans wait for (stage_filters)."""
        awaited = getattr(self.plan, "awaited_filters", ())
        return tuple(sorted({f.build_stage for f in awaited}))


def can_distribute(plan: ExecutionPlan) -> bool:
    """Whether the plan can run as stages: a recursive query iterates a work table in one
    process, so a plan with one runs locally."""
    return not any(isinstance(op, RecursiveQueryExec) for _, op in plan.walk())


def rows_read(plan: ExecutionPlan) -> float | None:
    """The rows the plan's sources hold (their estimates summed); None when a source
    cannot say (it could be large). What decides whether a query is worth a cluster."""
    leaves = [op for _, op in plan.walk() if not op.children()]
    if any(op.row_estimate is None for op in leaves):
        return None
    return sum(op.row_estimate for op in leaves)


def plan_stages(plan: ExecutionPlan, filters_across_stages: bool = True) -> ExecutionPlan:
    """A copy of ``plan`` with each exchange cut into a ShuffleWriterExec /
    ShuffleReaderExec pair (``plan`` itself is unchanged: it still runs locally); with
    ``filters_across_stages``, join filters link their build and probe scan stages
    (stage_filters), and the tasks below a final LIMIT stop at its rows (stage_limits).

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=2)
        >>> s.register("t", pa.table({"k": [1, 2, 1], "v": [1, 2, 3]}))
        >>> staged = plan_stages(s.sql("SELECT k, sum(v) FROM t GROUP BY k").physical)
        >>> for _, op in staged.walk():
        ...     if op.name.startswith("Shuffle"):
        ...         print(op.display().split(", partitioning=Hash")[0])
        ShuffleReaderExec: stage=2, passthrough, partitions=2
        ShuffleWriterExec: stage=2, partitioning=passthrough, tasks=2
        ShuffleReaderExec: stage=1
        ShuffleWriterExec: stage=1
    """
    ids = itertools.count(1)

    def cut(op: ExecutionPlan) -> ExecutionPlan:
        for child in op.children():
            new = cut(child)
            if new is not child:
                op = _with_child(op, child, new)
        if isinstance(op, RepartitionExec):
            writer = ShuffleWriterExec(op.input, next(ids), op.mode.value, op.partitions,
                                       op.exprs)
            return ShuffleReaderExec(writer, op.output_partitioning(), op.output_ordering(),
                                     op.sort_keys if op.preserve_order else None)
        if isinstance(op, (CoalescePartitionsExec, SortPreservingMergeExec)):
            child = op.input
            writer = ShuffleWriterExec(child, next(ids), PASSTHROUGH, 1)
            reader = ShuffleReaderExec(writer, child.output_partitioning(),
                                       child.output_ordering())
            op = _with_child(op, child, reader)
        return op

    _refuse_shared_probe_state(plan)
    staged = fill_row_estimates(cut(plan))  # the shuffle operators take their input's
    if filters_across_stages:
        link_dynamic_filters(staged)
    limit_stage_tasks(staged)
    return staged


def _refuse_shared_probe_state(plan: ExecutionPlan) -> None:
    """A join whose probe partitions pool their visited build rows in memory
    (``parallel_probe``) gives wrong rows once its partitions run as separate tasks: the
    planner plans cluster queries without it, so meeting one here is a planner bug."""
    for _, op in plan.walk():
        if getattr(op, "parallel_probe", False) and op.output_partitioning().count > 1:
            raise InternalError(f"{op.name} probes in parallel through shared state and "
                                "cannot run as tasks; plan the query for a cluster")


def _with_child(op: ExecutionPlan, old: ExecutionPlan, new: ExecutionPlan) -> ExecutionPlan:
    """A shallow copy of ``op`` whose references to child ``old`` point at ``new``.

    Only the operators on the path from the root to an exchange are copied (``op`` itself
    is left alone, so the local plan still runs); everything below is shared, table sources
    and the dynamic filters that tie a join to its scan included. ``copy.copy`` goes through
    ``__getstate__``/``__setstate__``, so the copy gets its own runtime state, and the
    helpers it owns that refer to ``old`` (a collect-left join's shared build, which holds
    the build child and the join's own collect method) are copied and re-pointed too.
    A deep copy of the whole plan per query cost more than the rest of the staging.
    """
    twin = copy.copy(op)

    def points_back(value) -> bool:
        if value is old:
            return True
        if isinstance(value, (list, tuple)):
            return any(v is old for v in value)
        return isinstance(value, types.MethodType) and value.__self__ is op

    def repoint(holder) -> None:
        for name, value in list(vars(holder).items()):
            if value is old:
                setattr(holder, name, new)
            elif isinstance(value, list) and points_back(value):
                setattr(holder, name, [new if v is old else v for v in value])
            elif isinstance(value, tuple) and points_back(value):
                setattr(holder, name, tuple(new if v is old else v for v in value))
            elif points_back(value):
                setattr(holder, name, types.MethodType(value.__func__, twin))

    repoint(twin)
    for name, value in list(vars(twin).items()):
        if hasattr(value, "__dict__") and not isinstance(value, (ExecutionPlan, type)) and \
                any(points_back(v) for v in vars(value).values()):
            helper = copy.copy(value)
            repoint(helper)
            setattr(twin, name, helper)
    return twin


def stages_read(plan: ExecutionPlan, partition: int | None) -> set[int]:
    """The input stages partition ``partition`` of a stage's ``plan`` reads (None: every
    partition): a task waits only for those. A union's partition reads one of its
    branches, so ``SELECT ... UNION ALL SELECT ...`` tasks do not wait for each other's
    inputs (a LIMIT over a union can be satisfied by one branch alone).

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=2)
        >>> s.register("t", pa.table({"k": [1, 2, 1], "v": [1, 2, 3]}))
        >>> plan = plan_stages(s.sql("SELECT k, sum(v) FROM t GROUP BY k UNION ALL "
        ...                          "SELECT k, count(v) FROM t GROUP BY k").physical)
        >>> top = stages_of(plan)[-1].plan  # reads both aggregates' stages
        >>> union = next(op for _, op in top.walk() if op.name == "UnionExec")
        >>> sorted(stages_read(union, 0)), sorted(stages_read(union, 3))
        ([1], [2])
    """
    if isinstance(plan, ShuffleReaderExec):
        return {plan.stage_id}
    if isinstance(plan, UnionExec) and partition is not None:
        for child, offset in reversed(list(zip(plan.inputs, plan._offsets))):
            if partition >= offset:
                return stages_read(child, partition - offset)
    whole = isinstance(plan, (CoalescePartitionsExec, SortPreservingMergeExec))
    count = plan.output_partitioning().count
    found: set[int] = set()
    for child in plan.children():
        same = not whole and partition is not None and \
            child.output_partitioning().count == count
        found |= stages_read(child, partition if same else None)
    return found


def stages_of(plan: ExecutionPlan) -> list[Stage]:
    """The stages of a staged plan, in an order they can run (inputs first; final last)."""
    found: list[Stage] = []

    def visit(op: ExecutionPlan, stage_root: ExecutionPlan, inputs: list[int]) -> None:
        for child in op.children():
            if isinstance(child, ShuffleWriterExec):
                inputs.append(child.stage_id)
                below: list[int] = []
                visit(child, child, below)
                found.append(Stage(child.stage_id, child, tuple(below)))
            else:
                visit(child, stage_root, inputs)

    top: list[int] = []
    visit(plan, plan, top)
    found.sort(key=lambda s: s.stage_id)
    ordered: list[Stage] = []
    placed: set[int] = set()
    while found:  # by id, each after its inputs and the build stages it waits for
        ready = next((s for s in found if placed.issuperset(s.inputs + s.after)), None)
        if ready is None:  # cannot happen in a tree; never wait rather than deadlock
            for stage in found:
                stage.plan.awaited_filters = []
            continue
        ordered.append(ready)
        placed.add(ready.stage_id)
        found.remove(ready)
    ordered.append(Stage(0, plan, tuple(top)))
    return ordered
