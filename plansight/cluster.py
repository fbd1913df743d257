"""A session's connections to Dask clusters, and the in-memory tables shipped to them.

``Session(cluster=...)`` or ``SET cluster = ...`` names where queries run; this module turns
that name into a ``distributed.Client`` (once per session and name): ``local:N`` starts a
LocalCluster of N worker processes bound to 127.0.0.1 with the dashboard off (the default
dashboard listens on every interface), an address connects to a running scheduler, and a
Client is used as given. Each in-memory table a query reads is scattered to the cluster
once per session and kept there while the session holds it; Parquet, CSV and IPC tables
travel as paths and are read by the workers. A scattered table is copied to every worker
(Dask places a task where its data is: a table held by one worker would draw every scan of
it to that worker). A worker that dies can take a table with it (Dask keeps one replica of
data no task waits for): a table the cluster lost is shipped again, and a query that lost
data mid-run (WorkerLost) runs once more before the error reaches the user.

Dask is optional (``pip install plansight[distributed]``): it is imported here, on first use.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from plansight.errors import PlanError, WorkerLost

_SHIP_ATTEMPTS = 4  # tries to scatter a table while the cluster's workers change


class ClusterConnection:
    """One cluster a session uses: its client, and what the session scattered to it."""

    def __init__(self, client, cluster=None, owns_client: bool = True):
        self.client, self.cluster = client, cluster  # cluster: a LocalCluster we started
        self.owns_client = owns_client  # False for a Client the user gave
        self.scattered: dict[int, tuple[Any, str, Any]] = {}  # id -> (source, key, future)
        self._lock = threading.Lock()

    def tables_for(self, sources: list) -> dict[int, tuple[str, Any]]:
        """(key, future) per source, scattering the ones this cluster has not seen."""
        found = {}
        with self._lock:
            for source in sources:
                entry = self.scattered.get(id(source))
                if entry is None or entry[0] is not source or entry[2].status != "finished":
                    # new, or lost with the workers that held it ("lost"): ship it (again)
                    key = f"plansight-table-{len(self.scattered) + 1}-{id(source):x}"
                    future = self._ship(source)
                    entry = self.scattered[id(source)] = (source, key, future)
                found[id(source)] = (entry[1], entry[2])
        return found

    def _ship(self, source):
        """``source`` on every worker (a table on one worker would draw every scan there).
        The scheduler refuses while a worker joins or leaves (a KeyError naming it): try
        again when the membership settled."""
        for attempt in range(_SHIP_ATTEMPTS):
            try:
                return self.client.scatter(source, hash=False, broadcast=True)
            except (KeyError, OSError) as error:
                failure = error
                time.sleep(0.5 * (attempt + 1))
        raise WorkerLost(f"could not ship a table to the cluster while its workers changed: "
                         f"{type(failure).__name__}: {failure}")

    def forget(self, sources: list) -> None:
        """Ship ``sources`` again on next use: the cluster may have lost them with a worker
        (Dask keeps one replica of data no task waits for, so one worker's death can
        lose a table even though it was copied to every worker)."""
        with self._lock:
            for source in sources:
                self.scattered.pop(id(source), None)

    def close(self) -> None:
        self.scattered.clear()
        if self.owns_client:  # only what we started is ours to stop
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _distributed():
    try:
        import distributed
    except ImportError:
        raise PlanError("running on a cluster needs Dask: pip install 'plansight[distributed]'"
                        ) from None
    return distributed


def connect(spec: Any) -> ClusterConnection:
    """A connection for the ``cluster`` option's value (see the module docstring)."""
    distributed = _distributed()
    from plansight.engine.distributed.executor import prepare

    if isinstance(spec, distributed.Client):
        connection = ClusterConnection(spec, owns_client=False)
    elif isinstance(spec, str) and spec.startswith("local:"):
        cluster = distributed.LocalCluster(n_workers=int(spec.split(":", 1)[1]),
                                           threads_per_worker=1, processes=True,
                                           host="127.0.0.1", dashboard_address=None)
        connection = ClusterConnection(distributed.Client(cluster), cluster)
    else:
        try:
            connection = ClusterConnection(distributed.Client(spec, timeout=10))
        except (OSError, TimeoutError) as error:
            raise PlanError(f"cannot connect to the cluster at {spec}: {error}") from None
    prepare(connection.client)
    return connection


def run_on_cluster(connection: ClusterConnection, plan, ctx):
    """Run staged ``plan`` there (the executor does the work); its result table."""
    from plansight.engine.distributed.executor import run_staged
    from plansight.engine.distributed.fragment import memory_sources

    sources = memory_sources(plan)
    try:
        return run_staged(connection.client, plan, ctx, connection.tables_for(sources))
    except WorkerLost:  # nothing was returned yet: ship the tables again, run once more
        connection.forget(sources)
        return run_staged(connection.client, plan, ctx, connection.tables_for(sources))
