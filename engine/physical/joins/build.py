"""The build side of a collect-left join: collected once per run, shared by probe partitions.

Every probe partition asks for the build side; the first one collects it (under a lock) and
the others wait for it. Executing the build child once matters for correctness, not only
speed: a child containing a RepartitionExec must have exactly one consumer per partition.
The reservation is freed (and a spilled build's files deleted) when the last probe partition
is done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

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
                                       "reservation": reservation, "done": 0}
            return state["value"], state["prepared"]

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
