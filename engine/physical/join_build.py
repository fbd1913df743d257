"""The build side of a collect-left join: collected once per run, shared by probe partitions.

Every probe partition asks for the build side; the first one collects it (under a lock) and
the others wait for it. Executing the build child once matters for correctness, not only
speed: a child containing a RepartitionExec must have exactly one consumer per partition.
The reservation is freed when the last probe partition is done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from plansight.engine.exec.context import TaskContext
from plansight.engine.physical.plan import ExecutionPlan


class SharedBuild:
    def __init__(self, build: ExecutionPlan, consumer: str,
                 prepare: Callable[[pa.Table], Any] | None = None):
        self.build, self.consumer, self.prepare = build, consumer, prepare
        self._lock = threading.Lock()
        self._state: dict | None = None

    def acquire(self, ctx: TaskContext) -> tuple[pa.Table, Any]:
        """(build table, prepared index) for this run, collecting it on first use."""
        with self._lock:
            state = self._state
            if state is None or state["ctx"] is not ctx:
                reservation = ctx.memory_pool.register(self.consumer)
                batches = []
                try:
                    for batch in self.build.execute(0, ctx):
                        reservation.grow(batch.nbytes)
                        batches.append(batch)
                except BaseException:
                    reservation.free()
                    raise
                table = pa.Table.from_batches(batches, schema=self.build.schema).combine_chunks()
                prepared = self.prepare(table) if self.prepare is not None else None
                state = self._state = {"ctx": ctx, "table": table, "prepared": prepared,
                                       "reservation": reservation, "done": 0}
            return state["table"], state["prepared"]

    def release(self, ctx: TaskContext, partitions: int) -> None:
        """Called once by each probe partition when it finishes (also on error)."""
        with self._lock:
            state = self._state
            if state is None or state["ctx"] is not ctx:
                return
            state["done"] += 1
            if state["done"] >= partitions:
                state["reservation"].free()
                self._state = None
