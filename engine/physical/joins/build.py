"""The build side of a collect-left join: collected once per run, shared by probe partitions.

Every probe partition asks for the build side; the first one collects it (under a lock) and
the others wait for it. Executing the build child once matters for correctness, not only
speed: a child containing a RepartitionExec must have exactly one consumer per partition.
The reservation is freed (and a spilled build's files deleted) when the last probe partition
is done.

Probe partitions of a join that emits build rows after the probe (left, full, semi, anti) run
side by side too: each marks the build rows it matched, and the last one to finish gets the
union of the marks (``combine_visited``) and emits the build rows that depend on them:

    probe partition 0 ──▶ visited₀ ─┐
    probe partition 1 ──▶ visited₁ ─┼─ OR ─▶ the last to finish emits unmatched / semi / anti
    ...                             ┘
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from plansight.engine.exec.context import TaskContext
from plansight.engine.exec.memory_pool import MemoryReservation
from plansight.engine.exec.metrics import PartitionMetrics
from plansight.engine.physical.plan import ExecutionPlan

# collect(build batches, reservation, ctx, metrics of the collecting partition)
#   -> (build side, prepared index)
Collect = Callable[[Iterator[pa.RecordBatch], MemoryReservation, TaskContext,
                    PartitionMetrics | None], tuple[Any, Any]]


class SharedBuild:
    def __init__(self, build: ExecutionPlan, consumer: str,
                 prepare: Callable[[pa.Table], Any] | None = None,
                 collect: Collect | None = None,
                 discard: Callable[[TaskContext, Any], None] | None = None):
        """``collect`` replaces the default (everything in memory, or ResourcesExhausted) for
        a build side that can spill; ``discard`` then deletes what it left on disk."""
        self.build, self.consumer, self.prepare = build, consumer, prepare
        self.collect, self.discard = collect, discard
        self._lock = threading.Lock()
        self._state: dict | None = None

    def __getstate__(self) -> dict:
        # one run's build (and its lock) stays behind: a worker collects its own
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_state")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock, self._state = threading.Lock(), None

    def _collect_in_memory(self, batches, reservation, ctx, metrics):
        held = []
        for batch in batches:
            reservation.grow(batch.nbytes)
            held.append(batch)
        table = pa.Table.from_batches(held, schema=self.build.schema).combine_chunks()
        return table, self.prepare(table) if self.prepare is not None else None

    def acquire(self, ctx: TaskContext,
                metrics: PartitionMetrics | None = None) -> tuple[Any, Any]:
        """(build side, prepared index) for this run, collecting it on first use."""
        with self._lock:
            state = self._state
            if state is None or state["ctx"] is not ctx:
                reservation = ctx.memory_pool.register(self.consumer,
                                                       can_spill=self.collect is not None)
                collect = self.collect or self._collect_in_memory
                try:
                    value, prepared = collect(self.build.execute(0, ctx), reservation, ctx,
                                              metrics)
                except BaseException:
                    reservation.free()
                    raise
                state = self._state = {"ctx": ctx, "value": value, "prepared": prepared,
                                       "reservation": reservation, "done": 0,
                                       "visited": None, "merged": 0, "spilled_probes": []}
            return state["value"], state["prepared"]

    def combine_visited(self, ctx: TaskContext, visited: np.ndarray,
                        partitions: int) -> np.ndarray | None:
        """Add one probe partition's matched build rows; the union of all ``partitions``
        for the last partition to call, None for the others."""
        with self._lock:
            state = self._state
            if state["visited"] is None:
                state["visited"] = visited.copy()
            else:
                state["visited"] |= visited
            state["merged"] += 1
            return state["visited"] if state["merged"] == partitions else None

    def combine_spilled_probes(self, ctx: TaskContext, files: list,
                               partitions: int) -> list[list] | None:
        """Add one probe partition's spilled probe buckets (a spilled build's); for the last
        partition to call, every partition's files grouped by bucket, None for the others."""
        with self._lock:
            state = self._state
            state["spilled_probes"].append(files)
            if len(state["spilled_probes"]) < partitions:
                return None
            return [list(bucket) for bucket in zip(*state["spilled_probes"])]

    def release(self, ctx: TaskContext, partitions: int) -> None:
        """Called once by each probe partition when it finishes (also on error)."""
        with self._lock:
            state = self._state
            if state is None or state["ctx"] is not ctx:
                return
            state["done"] += 1
            if state["done"] >= partitions:
                state["reservation"].free()
                if self.discard is not None:
                    self.discard(ctx, state["value"])
                self._state = None
