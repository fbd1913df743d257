"""One Dask cluster for the distributed tests: loopback only, worker processes, started once
per test session and grown from 1 to 3 workers, so every worker process starts (and warms
up) once.

The first test that needs the cluster runs the 22 TPC-H queries on 1, then 2, then 3
workers (``tpch_by_workers``); every later test uses the 3-worker cluster. Never the
in-process thread mode (it opens a UDP socket to a public address to find its own IP) and
never the dashboard (it listens on every interface).
"""

from __future__ import annotations

import pytest

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402 (installed with distributed)

from plansight.datasets import TPCH_QUERIES, tpch_parquet  # noqa: E402
from tests.distributed.helpers import tpch_sessions  # noqa: E402
from tests.distributed.stall_guard import StallGuard  # noqa: E402

_state: dict = {}
_guard = StallGuard()


def _cluster():
    if "client" not in _state:
        # a worker that stops answering is replaced after a minute, not Dask's five: the
        # queries it held then run again (WorkerLost) instead of stalling the suite
        with dask.config.set({"distributed.scheduler.worker-ttl": "60s"}):
            cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1,
                                               processes=True, host="127.0.0.1",
                                               dashboard_address=None, memory_limit="1GiB")
        _state["cluster"], _state["client"] = cluster, distributed.Client(cluster)
        _guard.install(_state["client"])
    return _state["cluster"], _state["client"]


def _scale_to(workers: int):
    cluster, client = _cluster()
    if len(client.scheduler_info()["workers"]) < workers:
        cluster.scale(workers)
        client.wait_for_workers(workers, timeout=120)
    return client


@pytest.fixture(scope="session")
def tpch_dir(tmp_path_factory):
    return tpch_parquet(tmp_path_factory.mktemp("tpch"), 0.01)


@pytest.fixture(scope="session")
def tpch_by_workers(tpch_dir):
    """{workers: {query number: result}} for 1, 2 and 3 workers (Parquet read by path on
    the workers), plus the addresses of the workers each size had."""
    results, addresses = {}, {}
    for workers in (1, 2, 3):
        client = _scale_to(workers)
        addresses[workers] = list(client.scheduler_info()["workers"])
        session = tpch_sessions(tpch_dir, cluster=client)
        results[workers] = {n: session.sql(sql).to_arrow() for n, sql in TPCH_QUERIES.items()}
    return results, addresses


@pytest.fixture(scope="session")
def client(tpch_by_workers):
    """The cluster's client (3 workers, once the worker-count sweep has run)."""
    return _scale_to(3)


@pytest.fixture
def stall_guard():
    """The session's stall guard (a test of the guard itself resets what it records)."""
    yield _guard
    _guard.stalled = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Every cluster test (its fixtures' setup included) under the stall guard."""
    with _guard.watch(item.nodeid):
        yield


def pytest_runtest_setup(item):
    if _guard.stalled:
        pytest.fail(f"the test cluster stalled in {_guard.stalled} (that test's report holds "
                    "every process's stacks)")


def pytest_terminal_summary(terminalreporter):
    if _guard.restarts:
        terminalreporter.write_line(
            f"the test cluster stalled and its workers were restarted during: "
            f"{', '.join(_guard.restarts)} (every process's stacks are in the log above)")


def pytest_sessionfinish(session, exitstatus):
    if "client" in _state:
        _state["client"].close()
        _state["cluster"].close()
    _state.clear()
