"""elapsed_compute is each operator's own time: children pulled inside it and waits on
other threads' work are excluded where the time is measured (engine/exec/compute_clock.py).

A fake clock that only the operators advance makes the expected times exact."""

from __future__ import annotations

import pyarrow as pa
import pytest

from plansight.engine.exec import compute_clock
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.events import EventBus, OperatorFinished
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.physical import plan as plan_module
from plansight.engine.physical.plan import ExecutionPlan

SCHEMA = pa.schema([("x", pa.int64())])


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(plan_module.time, "perf_counter", fake)
    monkeypatch.setattr(compute_clock.time, "perf_counter", fake)
    return fake


class Working(ExecutionPlan):
    """Spends ``cost`` fake seconds per output batch, pulling one batch of its child (if
    any) per output batch; ``waits`` fake seconds per batch on another thread's work."""

    name = "WorkingExec"

    def __init__(self, clock, cost, child=None, batches=3, waits=0.0):
        super().__init__(SCHEMA)
        self.clock, self.cost, self.child, self.batches, self.waits = (
            clock, cost, child, batches, waits)

    def children(self):
        return [self.child] if self.child else []

    def _execute(self, partition, ctx):
        inputs = self.child.execute(partition, ctx) if self.child else None
        for _ in range(self.batches):
            if inputs is not None:
                next(inputs)
            if self.waits:
                with compute_clock.waiting():
                    self.clock.now += self.waits
            self.clock.now += self.cost
            yield pa.record_batch({"x": [1]}, schema=SCHEMA)


def run(plan, bus=None):
    ctx = TaskContext(SessionConfig(), MemoryPool(None), events=bus or EventBus())
    list(plan.execute(0, ctx))
    return ctx


def test_a_parent_is_charged_only_its_own_time(clock):
    leaf = Working(clock, cost=5.0)
    middle = Working(clock, cost=2.0, child=leaf)
    top = Working(clock, cost=1.0, child=middle)
    ctx = run(top)
    own = {op.name + str(op.cost): ctx.metrics.total(op.operator_id, "elapsed_compute")
           for op in (leaf, middle, top)}
    assert own == {"WorkingExec5.0": 15.0, "WorkingExec2.0": 6.0, "WorkingExec1.0": 3.0}
    # the whole query's time is the sum of everyone's own time: nothing counted twice
    assert sum(own.values()) == clock.now


def test_waiting_for_another_thread_is_nobodys_compute(clock):
    top = Working(clock, cost=1.0, waits=10.0)
    ctx = run(top)
    assert ctx.metrics.total(top.operator_id, "elapsed_compute") == 3.0
    assert clock.now == 33.0


def test_a_wait_in_progress_is_not_charged_live(clock):
    seen = []

    class Waiting(ExecutionPlan):
        name = "WaitingExec"

        def __init__(self):
            super().__init__(SCHEMA)

        def _execute(self, partition, ctx):
            clock.now += 2.0  # own work
            with compute_clock.waiting():
                clock.now += 50.0  # another thread's work, still going when read
                seen.append(ctx.metrics.snapshot(live=True)[self.operator_id])
            yield pa.record_batch({"x": [1]}, schema=SCHEMA)

    op = Waiting()
    ctx = run(op)
    assert seen[0]["elapsed_compute"] == 2.0
    assert ctx.metrics.total(op.operator_id, "elapsed_compute") == 2.0


def test_operator_finished_carries_the_runs_own_time(clock):
    seen = []
    with EventBus([seen.append], synchronous=True) as bus:
        leaf = Working(clock, cost=4.0)
        top = Working(clock, cost=1.0, child=leaf)
        run(top, bus)
    finished = {e.operator_id: e for e in seen if isinstance(e, OperatorFinished)}
    assert finished[leaf.operator_id].compute == 12.0
    assert finished[top.operator_id].compute == 3.0
    assert finished[top.operator_id].elapsed == 15.0  # wall time stays inclusive


class Blocking(ExecutionPlan):
    """Like a sort: its first pull consumes the whole input (``cost`` fake seconds per input
    batch), calling ``probe(ctx)`` after each, then emits one batch."""

    name = "BlockingExec"

    def __init__(self, clock, cost, child, probe):
        super().__init__(SCHEMA)
        self.clock, self.cost, self.child, self.probe = clock, cost, child, probe

    def children(self):
        return [self.child]

    def _execute(self, partition, ctx):
        for _ in self.child.execute(partition, ctx):
            self.clock.now += self.cost
            self.probe(ctx)
        yield pa.record_batch({"x": [1]}, schema=SCHEMA)


def test_live_snapshot_charges_a_pull_still_in_progress(clock):
    """A blocking operator shows its own time while it consumes its input, not only once it
    emits; its children keep theirs, and nothing is counted twice."""
    seen = []

    def probe(ctx):
        live = ctx.metrics.snapshot(live=True)
        done = ctx.metrics.snapshot()
        seen.append((live[top.operator_id]["elapsed_compute"],
                     done.get(top.operator_id, {}).get("elapsed_compute", 0.0),
                     live[leaf.operator_id]["elapsed_compute"]))

    leaf = Working(clock, cost=5.0, batches=3)
    top = Blocking(clock, cost=1.0, child=leaf, probe=probe)
    ctx = run(top)
    # after input batch i: top has worked i seconds (still inside its first pull), the leaf
    # 5 * i; without live, top shows nothing until its pull ends
    assert seen == [(1.0, 0.0, 5.0), (2.0, 0.0, 10.0), (3.0, 0.0, 15.0)]
    assert ctx.metrics.snapshot(live=True)[top.operator_id]["elapsed_compute"] == 3.0
    assert compute_clock.CLOCK.state.open == []  # every pull closed its entry
