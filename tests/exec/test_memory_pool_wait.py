"""A consumer that cannot spill waits for memory its siblings will release, instead of failing
the query for being the last to start (the sibling partitions of a spilled aggregate merge
their runs at once: tests/spill/test_spill_join.py's 3-partition EXCEPT failed now and then).

Every test orders its threads by events and the pool's ``waiting`` count, never by time.
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.logical.expr import Column, SortKey
from plansight.engine.physical.sorts.merge import merge_sorted
from plansight.errors import ResourcesExhausted

K = Column(1, "k", pa.int64())
SCHEMA = pa.schema([("k#1", pa.int64())])


def _until(condition, thread: threading.Thread, outcome: dict) -> None:
    """Block until ``condition()`` holds (the other thread got there); fail if that thread
    ended first (it raised instead of waiting) or never gets there (a generous bound, so a
    broken test fails rather than hangs)."""
    pause = threading.Event()
    for _ in range(2000):
        if condition():
            return
        if not thread.is_alive():
            raise AssertionError(f"the other thread ended without waiting: {outcome}")
        pause.wait(0.01)
    raise AssertionError("the other thread never got there")


def _in_thread(target) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = target()
        except BaseException as e:  # noqa: BLE001 (the test inspects it)
            outcome["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_wait_ends_when_a_sibling_frees_its_memory():
    pool = MemoryPool(1000)
    sibling, late = pool.register("merge[0]"), pool.register("merge[1]")
    sibling.grow(900)
    assert not late.try_grow(200)  # without waiting: refused
    thread, outcome = _in_thread(lambda: late.grow(200, wait=True))
    _until(lambda: pool.waiting == 1, thread, outcome)
    assert "error" not in outcome and late.size == 0  # still waiting
    sibling.free()
    thread.join()
    assert outcome == {"value": None} and late.size == 200 and pool.waiting == 0
    late.free()
    assert pool.reserved == 0


def test_no_wait_when_only_waiters_hold_the_pool():
    """Waiting cannot help when every other holder waits too (or nobody holds anything):
    the request fails at once, as without waiting."""
    pool = MemoryPool(1000)
    alone = pool.register("merge[0]")
    with pytest.raises(ResourcesExhausted, match=r"merge\[0\] could not reserve"):
        alone.grow(2000, wait=True)
    first, second = pool.register("merge[1]"), pool.register("merge[2]")
    first.grow(600)
    second.grow(300)
    thread, outcome = _in_thread(lambda: first.grow(600, wait=True))
    _until(lambda: pool.waiting == 1, thread, outcome)
    with pytest.raises(ResourcesExhausted, match=r"merge\[2\] could not reserve"):
        second.grow(500, wait=True)  # merge[1] holds the rest, and it is waiting
    second.free()  # the failed query releases; merge[1] still does not fit alone
    thread.join()
    assert isinstance(outcome["error"], ResourcesExhausted) and first.size == 600
    first.free()
    alone.free()
    assert pool.reserved == 0 and pool.waiting == 0


def _stream(values: list[int], rows: int):
    for start in range(0, len(values), rows):
        yield pa.record_batch([pa.array(values[start:start + rows], pa.int64())],
                              schema=SCHEMA)


def test_sibling_merges_take_turns_on_a_pool_too_small_for_both():
    """Two partitions' k-way merges over a pool that holds one merge's buffers, not two: the
    one that starts second waits for the first to finish instead of raising, and both
    return every row in order."""
    values = [list(range(start, 4000, 2)) for start in (0, 1)]
    keys = [SortKey(K)]
    one_merge = 2 * pa.record_batch([pa.array(values[0][:500], pa.int64())],
                                    schema=SCHEMA).nbytes + 4096
    pool = MemoryPool(one_merge + 2048)
    first, second = pool.register("merge[0]"), pool.register("merge[1]")

    def merge(reservation):
        return merge_sorted([_stream(v, 500) for v in values], keys, SCHEMA, batch_size=256,
                            min_rows=500, reservation=reservation)

    first_merge = merge(first)
    head = next(first_merge)  # the first merge holds its buffers, and is paused
    assert first.size > pool.limit // 2
    thread, outcome = _in_thread(lambda: pa.Table.from_batches(list(merge(second))))
    _until(lambda: pool.waiting == 1, thread, outcome)
    rest = list(first_merge)  # the first merge ends and gives its memory back
    first.free()
    thread.join()
    expected = sorted(values[0] + values[1])
    assert pa.Table.from_batches([head] + rest).column(0).to_pylist() == expected
    assert "error" not in outcome, outcome.get("error")
    assert outcome["value"].column(0).to_pylist() == expected
    second.free()
    assert pool.reserved == 0 and pool.waiting == 0
