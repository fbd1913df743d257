"""Dask clusters for the distributed tests: loopback only, worker processes, each started
once per test session and shared by every test that asks for its size.

Never the in-process thread mode (it opens a UDP socket to a public address to find its own
IP) and never the dashboard (it listens on every interface).
"""

from __future__ import annotations

import pytest

distributed = pytest.importorskip("distributed")

_clusters: dict[int, tuple] = {}


def cluster_client(workers: int):
    """A Client of a LocalCluster with ``workers`` single-threaded worker processes."""
    if workers not in _clusters:
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                           processes=True, host="127.0.0.1",
                                           dashboard_address=None, memory_limit="1GiB")
        _clusters[workers] = (cluster, distributed.Client(cluster))
    return _clusters[workers][1]


@pytest.fixture(scope="session")
def client2():
    return cluster_client(2)


@pytest.fixture(scope="session")
def clients():
    """Clients of the 1-, 2- and 3-worker clusters."""
    return {n: cluster_client(n) for n in (1, 2, 3)}


def pytest_sessionfinish(session, exitstatus):
    for cluster, client in _clusters.values():
        client.close()
        cluster.close()
    _clusters.clear()
