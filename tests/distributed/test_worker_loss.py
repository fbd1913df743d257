"""A worker process that dies takes the tables scattered to it with it; the session ships
them again and the next query gives the same answer (on a cluster of its own: the shared one
must not lose its workers)."""

from __future__ import annotations

import os
import signal
import time

import pyarrow as pa

import plansight as ps
from tests.distributed.helpers import assert_equal_to_local, cluster_session

QUERIES = [
    "SELECT k, sum(v) AS s, count(*) AS n FROM facts GROUP BY k",  # scan + shuffle
    "SELECT f.k, d.name, sum(f.v) AS s FROM facts f JOIN dims d ON f.k = d.k GROUP BY 1, 2",
]


def _kill_every_worker(client) -> None:
    """SIGKILL each worker process (as the kernel's OOM killer would) and wait until its
    nanny has started a new one in its place."""
    before = client.run(os.getpid)
    for pid in before.values():
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        workers = set(client.scheduler_info()["workers"])
        if len(workers) == len(before) and not workers & set(before):
            return
        time.sleep(0.1)
    raise AssertionError(f"the nannies did not restart the workers: {workers}")


def test_queries_survive_every_worker_dying_between_them():
    facts = pa.table({"k": pa.array([i % 7 for i in range(5_000)], pa.int64()),
                      "v": pa.array([None if i % 11 == 0 else i for i in range(5_000)])})
    dims = pa.table({"k": pa.array(range(7), pa.int64()),
                     "name": [f"d{i}" for i in range(7)]})
    cluster = cluster_session("local:2", target_partitions=3)
    local = ps.Session(target_partitions=3)
    for session in (cluster, local):
        session.register("facts", facts)
        session.register("dims", dims)
    try:
        expected = [local.sql(sql).to_arrow() for sql in QUERIES]
        for sql, want in zip(QUERIES, expected):
            assert cluster.sql(sql).distributed
            assert_equal_to_local(cluster.sql(sql).to_arrow(), want, sql)
        (connection,) = cluster._clusters.values()
        shipped = dict(connection.scattered)
        _kill_every_worker(connection.client)
        for sql, want in zip(QUERIES, expected):
            assert_equal_to_local(cluster.sql(sql).to_arrow(), want, sql)
        # the tables went again: new futures for both, the old ones lost with the workers
        again = {source: entry[2].key for source, entry in connection.scattered.items()}
        assert set(again) == set(shipped)
        assert all(again[source] != entry[2].key for source, entry in shipped.items())
    finally:
        cluster.close()
