"""The stall guard: a cluster test that stops moving gets its workers restarted, and one that
stays stuck fails with every process's stacks (tests/distributed/stall_guard.py)."""

from __future__ import annotations

import os
import time

import pytest
from distributed import Event

from tests.distributed.stall_guard import ClusterStalled


def spin_on_the_worker(seconds: float, started: str) -> float:
    """A task that keeps its worker thread busy (a stand-in for a stuck task)."""
    Event(started).set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.01)
    return seconds


def _spinning(client, seconds: float):
    started = Event(f"stall-guard-{time.monotonic_ns()}", client=client)
    future = client.submit(spin_on_the_worker, seconds, started.name, pure=False)
    assert started.wait(timeout=120)
    return future


def test_a_stuck_test_fails_with_the_stacks_of_every_process(client, stall_guard):
    future = _spinning(client, 8)
    try:
        with pytest.raises(ClusterStalled) as stalled, \
                stall_guard.watch("a test", seconds=1, restart=False):
            future.result()
        assert stall_guard.stalled == "a test"
    finally:
        client.cancel(future)
    report = str(stalled.value)
    assert report.startswith("a test ran for 1 s")
    assert "--- test process" in report and "in result" in report, report  # test's wait
    workers = report.count("--- worker process")
    assert workers == len(client.scheduler_info()["workers"]), report
    assert "spin_on_the_worker" in report, report  # the busy worker's task, in its stack


def test_a_stalled_test_gets_new_workers_and_goes_on(client, stall_guard):
    before = set(client.run(os.getpid).values())
    future = _spinning(client, 6)
    with stall_guard.watch("a stalled test", seconds=3, grace=300):
        assert future.result() == 6  # run again on a new worker once its own died
    assert stall_guard.restarts[-1] == "a stalled test" and stall_guard.stalled is None
    assert not before & set(client.run(os.getpid).values())
    stall_guard.restarts.pop()  # the guard's own test: not a stall to report
