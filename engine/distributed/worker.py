"""The plansight side of a Dask worker: a plugin that gives each worker process one memory
pool, one piece store and the handlers peers and the client call.

    client.register_plugin(PlansightPlugin())   (once per cluster; idempotent)
        │ on every worker process, setup():
        ├─ MemoryPool at ``memory_fraction`` of the worker's memory limit (below Dask's
        │  pause and terminate thresholds: 0.8 / 0.95 by default)
        ├─ PieceStore spilling to <worker local directory>/plansight
        └─ handler "plansight_piece": a reduce task on another worker fetches a piece here
           through the worker's rpc (the comm Dask already keeps open between peers)

Events of a task go to the client in batches: ``TopicSink`` collects them and a timer on
the worker sends what gathered every ``interval`` seconds with ``worker.log_event`` (the
client subscribed to the query's topic).
"""

from __future__ import annotations

import os
import pickle
import threading

from distributed.diagnostics.plugin import WorkerPlugin
from distributed.utils import sync

from plansight.engine.distributed.pieces import PieceKey, PieceStore
from plansight.engine.distributed.task import WorkerEnvironment, environment, install_environment
from plansight.engine.errors import WorkerLost
from plansight.engine.exec.memory_pool import MemoryPool

#: The default share of a worker's memory limit its plansight pool may use.
MEMORY_FRACTION = 0.6
PIECE_HANDLER = "plansight_piece"


class PlansightPlugin(WorkerPlugin):
    """Installs the plansight environment on each worker (see the module docstring)."""

    name = "plansight"
    idempotent = True

    def __init__(self, memory_fraction: float = MEMORY_FRACTION):
        self.memory_fraction = memory_fraction

    def setup(self, worker) -> None:
        limit = getattr(worker.memory_manager, "memory_limit", None)
        pool = MemoryPool(int(limit * self.memory_fraction) if limit else None)
        directory = os.path.join(worker.local_directory, "plansight")
        store = PieceStore(pool, directory)
        install_environment(WorkerEnvironment(pool, store, worker.address, fetch_piece,
                                              directory, worker))
        worker.handlers[PIECE_HANDLER] = _serve_piece

    def teardown(self, worker) -> None:
        environment().store.close()
        install_environment(None)


def _serve_piece(key: list) -> bytes | None:
    """Handler: piece ``key`` of this worker's store as IPC bytes (None: no rows)."""
    return environment().store.serialized(tuple(key))


def fetch_piece(address: str, key: PieceKey) -> bytes | None:
    """Piece ``key`` from the worker at ``address`` (called from a task's thread)."""
    worker = environment().worker

    async def call():
        return await worker.rpc(address).plansight_piece(key=list(key))

    try:
        return sync(worker.loop, call)
    except OSError as error:  # CommClosedError too: the worker holding the piece is gone
        raise WorkerLost(f"cannot fetch a shuffle piece from worker {address} (it died or "
                         f"restarted): {error}") from None


def cancel_query(query_id: str) -> int:
    """Run on every worker by the client: stop and forget ``query_id`` here."""
    return environment().cancel_query(query_id)


def cancel_stages(query_id: str, stage_ids: list[int]) -> int:
    """Run on every worker by the client when a LIMIT needs no more of these stages' tasks:
    the number of running tasks told to stop."""
    return sum(environment().cancel_stage(query_id, stage_id) for stage_id in stage_ids)


def end_query(query_id: str) -> int:
    """Run on every worker by the client when a query is over: delete its pieces."""
    return environment().end_query(query_id)


async def end_query_soon(query_id: str) -> None:
    """``end_query`` for ``client.run(..., wait=False)`` (which takes coroutines only)."""
    end_query(query_id)


def worker_state() -> dict:
    """Run on a worker: its running plansight tasks, stored queries and piece files."""
    env = environment()
    spill = env.spill_dir
    files = [str(p) for p in env.store.files()]
    if spill and os.path.isdir(spill):
        files += [os.path.join(spill, name) for name in os.listdir(spill)
                  if name.startswith("plansight-spill-")]
    return {"running": env.running_tasks(), "queries": sorted(env.store.queries()),
            "files": files, "reserved": env.pool.reserved}


class TopicSink:
    """A task's event observer that forwards events to the client in batches.

    Picklable (it is part of a task spec); on the worker, events gather in a per-process
    buffer per topic and a timer sends each batch as one pickled message every
    ``interval`` seconds, and at ``flush()`` (the end of each task).
    """

    def __init__(self, topic: str, interval: float = 0.2):
        self.topic, self.interval = topic, interval

    def __call__(self, event) -> None:
        _forwarder(self.topic, self.interval).add(event)

    def flush(self) -> None:
        _forwarder(self.topic, self.interval).flush()


class _Forwarder:
    def __init__(self, topic: str, interval: float):
        self.topic, self.interval = topic, interval
        self.pending: list = []
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None
        self.sent = 0

    def add(self, event) -> None:
        with self.lock:
            self.pending.append(event)
            if self.timer is None:
                self.timer = threading.Timer(self.interval, self.flush)
                self.timer.daemon = True
                self.timer.start()

    def flush(self) -> None:
        with self.lock:
            events, self.pending = self.pending, []
            timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()
        if events:
            worker = environment().worker
            with self.lock:
                self.sent += 1
            worker.log_event(self.topic, {"worker": worker.address,
                                          "events": pickle.dumps(events)})


_forwarders: dict[str, _Forwarder] = {}
_forwarders_lock = threading.Lock()


def _forwarder(topic: str, interval: float) -> _Forwarder:
    with _forwarders_lock:
        forwarder = _forwarders.get(topic)
        if forwarder is None:
            forwarder = _forwarders[topic] = _Forwarder(topic, interval)
        return forwarder


def drop_forwarder(topic: str) -> int:
    """Run on every worker when a query ends: send what is left and forget the topic; the
    number of batches this worker sent for it."""
    with _forwarders_lock:
        forwarder = _forwarders.pop(topic, None)
    if forwarder is None:
        return 0
    forwarder.flush()
    return forwarder.sent
