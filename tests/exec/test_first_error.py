"""The first real error of a query is the one reported; Cancelled only for a user's cancel.

A failing partition stops its siblings, which then end with Cancelled; whichever failure
reaches a consumer first, the query raises the recorded first real error (TaskContext.fail).
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.events import BatchProduced
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.exec.scheduler import merge_streams
from plansight.errors import Cancelled, ExecutionError

TABLES = {"t": pa.table({"x": pa.array(range(200), pa.int64())}),
          "u": pa.table({"y": pa.array(range(50_000), pa.int64())})}


@pytest.mark.parametrize("batch_size", [1, 7, 8192])
@pytest.mark.parametrize("partitions", [2, 3])
def test_division_by_zero_in_one_union_branch_always_wins(partitions, batch_size):
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    for name, table in TABLES.items():
        session.register(name, table)
    sql = ("SELECT y FROM u WHERE y % 7 <> 3 UNION ALL SELECT 10 // (x - 100) FROM t "
           "UNION ALL SELECT y + 1 FROM u")
    for _ in range(15):
        with pytest.raises(ExecutionError, match="division by zero"):
            session.sql(sql).to_arrow()
    assert session.sql("SELECT count(*) FROM t").to_arrow().column(0).to_pylist() == [200]


def _ctx() -> TaskContext:
    return TaskContext(SessionConfig(), MemoryPool(None))


def test_a_sibling_cancelled_that_arrives_first_does_not_win():
    """The real error unwinds slowly (operators' cleanup) while the sibling it stopped
    reports Cancelled at once: the consumer still raises the real error."""
    ctx = _ctx()

    def failing():
        raise ZeroDivisionError("the real error")
        yield  # pragma: no cover

    def slow_unwinding():
        try:
            yield from merge_streams([failing, lambda: iter(())], ctx)
        except ZeroDivisionError:
            time.sleep(0.3)
            raise

    def stopped_sibling():
        while not ctx.cancelled.wait(0.01):
            pass
        ctx.check_cancelled()
        yield  # pragma: no cover

    with pytest.raises(ZeroDivisionError, match="the real error"):
        list(merge_streams([slow_unwinding, stopped_sibling], ctx))


def test_fail_keeps_the_first_real_error():
    ctx = _ctx()
    first, second = ValueError("first"), KeyError("second")
    assert ctx.fail(first) is first
    assert ctx.cancelled.is_set()
    assert ctx.fail(second) is first
    assert ctx.fail(Cancelled("query cancelled")) is first


def test_a_user_cancel_stays_cancelled():
    """After a user's cancel, errors of threads stopping are not the query's error."""
    ctx = _ctx()
    ctx.cancelled.set()  # Query.cancel()
    cancelled = Cancelled("query cancelled")
    assert ctx.fail(cancelled) is cancelled
    error = ValueError("raised while stopping")
    assert ctx.fail(error) is error
    assert ctx.failure is None


def test_query_cancel_raises_cancelled():
    session = ps.Session(target_partitions=3, batch_size=1)
    session.register("u", TABLES["u"])
    query = session.sql("SELECT y, sum(y) OVER (ORDER BY y) FROM u")

    def cancel_once_running(event) -> None:
        # from the observer's thread, once the run has started (a timer could fire before
        # execute() starts, which clears an earlier cancel: a flaky test under load)
        if isinstance(event, BatchProduced):
            query.cancel()

    with pytest.raises(Cancelled):
        query.execute(observer=cancel_once_running)
