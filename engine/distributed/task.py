"""execute_task: one partition of one stage, run from a task spec, without a Session.

    TaskSpec (config, query id, memory share, spill dir, event sink)
        │
    execute_task(fragment, partition, inputs, spec) ──▶ TaskResult (metrics, rows, output)
        │ uses the process's WorkerEnvironment: one memory pool and one piece store
        │ shared by every task on this worker, and the query's cancel flags

A worker plugin (``worker.py``) installs the environment when a Dask worker starts; without
one (a test, a plain process) a local environment is made on first use. A task's errors
leave it as plansight errors (their types pickle back to the client); anything else is
wrapped in one that names the original.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from plansight.engine.distributed import fragment as fragments
from plansight.engine.distributed.pieces import PieceKey, PieceStore
from plansight.engine.distributed.shuffle import ShuffleContext
from plansight.engine.distributed.stage_filters import install_filters
from plansight.engine.errors import (
    Cancelled,
    ExecutionError,
    PlansightError,
    ResourcesExhausted,
    internal_error,
)
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.events import EventBus, TaskFinished
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.exec.metrics import PartitionMetrics
from plansight.engine.physical.plan import ExecutionPlan, operator_of


@dataclass
class TaskSpec:
    """What a task needs besides its plan: the query's options and where things go.

    A task's memory budget is the query's ``memory_limit`` (``TaskPool``) within the
    worker's pool; ``memory_share`` records the task's share of its stage (1 / tasks).
    ``spill_dir`` overrides the worker's local directory; ``event_sink`` receives the
    task's engine events in batches.
    """

    config: SessionConfig
    query_id: str
    stage_id: int = 0
    memory_share: float = 1.0
    spill_dir: str | None = None
    event_sink: Callable[[list], None] | None = None


@dataclass
class TaskResult:
    """What a task sends back: its metrics, where its pieces are, and (final stage) rows."""

    stage_id: int
    partition: int
    address: str
    metrics: list[PartitionMetrics]
    elapsed: float
    output: pa.Table | None = None
    #: a build stage's summaries of its join keys, by filter name (stage_filters)
    key_summaries: dict[str, dict] = field(default_factory=dict)
    #: rows handed on: the output's, or the rows stored as pieces (what a LIMIT counts)
    rows: int = 0


@dataclass
class WorkerEnvironment:
    """What the tasks of one process share: memory pool, piece store, cancel flags."""

    pool: MemoryPool
    store: PieceStore
    address: str = "local"
    fetch: Callable[[str, PieceKey], bytes | None] | None = None
    spill_dir: str | None = None
    #: the Dask worker this environment belongs to (None outside a cluster)
    worker: Any = None
    #: the cancel flag of each running task, by query, with the task's stage
    _running: dict[str, dict[threading.Event, int]] = field(default_factory=dict)
    _cancelled: set[str] = field(default_factory=set)
    #: (query, stage) whose later tasks are refused: a satisfied LIMIT needs no more
    _cancelled_stages: set[tuple[str, int]] = field(default_factory=set)
    #: queries that ended while some of their tasks still ran: forgotten with the last one
    _ended: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start_task(self, query_id: str, stage_id: int = 0) -> threading.Event:
        """A cancel flag for a new task of ``query_id`` (already set if it was cancelled)."""
        flag = threading.Event()
        with self._lock:
            if query_id in self._cancelled or (query_id, stage_id) in self._cancelled_stages:
                flag.set()
            self._running.setdefault(query_id, {})[flag] = stage_id
        return flag

    def end_task(self, query_id: str, flag: threading.Event) -> None:
        with self._lock:
            flags = self._running.get(query_id)
            if flags is not None:
                flags.pop(flag, None)
                if not flags:
                    del self._running[query_id]
                    if query_id in self._ended:
                        self._forget(query_id)

    def cancel_query(self, query_id: str) -> int:
        """Stop the query's running tasks at their next batch, refuse its later ones, and
        delete its pieces; the number of pieces deleted."""
        with self._lock:
            self._cancelled.add(query_id)
            for flag in self._running.get(query_id, ()):
                flag.set()
        return self.store.drop_query(query_id)

    def cancel_stage(self, query_id: str, stage_id: int) -> int:
        """Stop the running tasks of one stage of a query and refuse its later ones (each
        deletes its own pieces as it stops); the number of tasks told to stop."""
        with self._lock:
            self._cancelled_stages.add((query_id, stage_id))
            flags = [flag for flag, stage in self._running.get(query_id, {}).items()
                     if stage == stage_id]
            for flag in flags:
                flag.set()
        return len(flags)

    def end_query(self, query_id: str) -> int:
        """Delete a finished query's pieces (and forget it was cancelled, once its tasks
        are gone); the number of pieces deleted."""
        dropped = self.store.drop_query(query_id)
        with self._lock:
            if query_id in self._running:
                self._ended.add(query_id)  # its last task's end forgets it
            else:
                self._forget(query_id)
        return dropped

    def _forget(self, query_id: str) -> None:
        """Drop what the worker knew of an ended query (under the lock)."""
        self._ended.discard(query_id)
        self._cancelled.discard(query_id)
        self._cancelled_stages = {k for k in self._cancelled_stages if k[0] != query_id}

    def running_tasks(self) -> int:
        with self._lock:
            return sum(len(flags) for flags in self._running.values())


class TaskPool(MemoryPool):
    """The memory one task may use: its own budget (the query's ``memory_limit``, as a
    local query has), drawn from the worker's shared pool.

        worker pool (one per process) ── "task <query>[<partition>]" reservation ──┐
        task pool (limit = min(memory_limit, worker pool limit)) ◀── operators ────┘

    Every grant must fit both: the task's budget and what the worker pool has left, so
    the tasks of a worker together never exceed it and each spills as a local query would.
    ``close`` frees whatever the task still holds: a task runs some partitions of a plan,
    so state meant for the last of all partitions (a collect-left join's build, released
    by every probe partition) would otherwise stay reserved in the worker's pool.
    """

    def __init__(self, worker_pool: MemoryPool, limit: int | None, policy: str, name: str):
        limits = [x for x in (limit, worker_pool.limit) if x is not None]
        super().__init__(min(limits) if limits else None, policy)
        self._share = worker_pool.register(name, can_spill=True)

    def _grant(self, reservation, additional: int) -> bool:
        if additional > 0 and not self._share.try_grow(additional):
            return False
        granted = super()._grant(reservation, additional)
        if additional > 0 and not granted:
            self._share.shrink(additional)
        elif additional < 0:
            self._share.shrink(-additional)
        return granted

    def close(self) -> None:
        for reservation in self.consumers():
            reservation.free()
        self._share.free()


_environment: WorkerEnvironment | None = None
_environment_lock = threading.Lock()


def install_environment(environment: WorkerEnvironment | None) -> None:
    """Make ``environment`` the one this process's tasks use (a worker plugin does)."""
    global _environment
    with _environment_lock:
        _environment = environment


def environment() -> WorkerEnvironment:
    """This process's environment; a local one (no memory limit) when none is installed."""
    global _environment
    with _environment_lock:
        if _environment is None:
            pool = MemoryPool(None)
            _environment = WorkerEnvironment(pool, PieceStore(pool))
        return _environment


def execute_task(fragment: bytes | ExecutionPlan, partition: int,
                 inputs: dict[int, list[str]], spec: TaskSpec,
                 tables: dict[str, Any] | None = None,
                 filters: dict[int, dict[str, list[dict]]] | None = None) -> TaskResult:
    """Run ``partition`` of a stage's plan: a writer's pieces go to this process's store,
    a final stage's rows come back in the result.

    ``fragment`` is the stage's plan (bytes from ``fragment.dumps`` or the plan itself),
    ``inputs[stage]`` the addresses (or the results) of the map tasks of each stage it
    reads, and
    ``tables`` the memory sources its scans refer to (see ``fragment``), and ``filters``
    the gathered key summaries of the build stages its scans' dynamic filters wait for
    (``stage_filters``).

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.table({"x": [1, 2, 3]}))
        >>> plan = s.sql("SELECT x * 2 AS y FROM t").physical
        >>> result = execute_task(plan, 0, {}, TaskSpec(SessionConfig(), "q1"))
        >>> result.output.column(0).to_pylist()
        [2, 4, 6]
    """
    env = environment()
    started = time.perf_counter()
    flag = env.start_task(spec.query_id, spec.stage_id)
    config = spec.config.copy()
    config.spill_dir = spec.spill_dir or env.spill_dir or config.spill_dir
    bus = EventBus([spec.event_sink]) if spec.event_sink is not None else EventBus()
    pool = TaskPool(env.pool, config.memory_limit, config.memory_pool_policy,
                    f"task {spec.query_id}[{spec.stage_id}.{partition}]")
    ctx = TaskContext(config, pool, events=bus, cancelled=flag)
    # an input stage's locations, or its map tasks' results (small shuffles depend on them)
    where = {stage: [r.address if isinstance(r, TaskResult) else r for r in located]
             for stage, located in inputs.items()}
    ctx.shuffle = ShuffleContext(spec.query_id, env.store, env.address, where, env.fetch)
    try:
        flag.is_set() and ctx.check_cancelled()
        plan = fragments.loads(fragment, tables) if isinstance(fragment, bytes) else fragment
        awaited = getattr(plan, "awaited_filters", None)
        if awaited:
            install_filters(plan, awaited, filters or {}, ctx)
        batches = list(plan.execute(partition, ctx))
        output = None if plan.name == "ShuffleWriterExec" else \
            _compact(pa.Table.from_batches(batches, schema=plan.schema))
        if bus.active:
            bus.publish(TaskFinished(env.address, spec.stage_id, partition,
                                     _rows_out(plan, output, ctx), time.perf_counter() - started,
                                     pool.peak))
    except Exception as error:  # noqa: BLE001 (re-raised as a plansight error)
        raise _portable(ctx.fail(error)) from None
    finally:
        pool.close()
        ctx.cleanup()
        if flag.is_set():  # cancelled or failed: none of its pieces may stay
            env.store.drop_task(spec.query_id, spec.stage_id, partition)
        bus.close()
        flush = getattr(spec.event_sink, "flush", None)
        if flush is not None:
            flush()
        env.end_task(spec.query_id, flag)
    return TaskResult(spec.stage_id, partition, env.address,
                      ctx.metrics.partition_metrics(), time.perf_counter() - started, output,
                      ctx.shuffle.key_summaries, _rows_written(plan, output, ctx))


def _compact(table: pa.Table) -> pa.Table:
    """``table`` in buffers of its own size, for the trip to the client: a batch sliced out
    of a larger one pickles its parent's whole buffers (a 1M-group aggregate's 12 MiB
    result went as 166 MiB, its pickling the slowest step of the query). Concatenating
    copies just the rows each column shows (one memory copy: far cheaper than pickling)."""
    return pa.Table.from_arrays([pa.concat_arrays(column.chunks) if column.num_chunks
                                 else column for column in table.columns],
                                schema=table.schema)


def _rows_written(plan: ExecutionPlan, output: pa.Table | None, ctx: TaskContext) -> int:
    """The rows a task handed on: its result's, or the rows its writer stored as pieces."""
    if output is not None:
        return output.num_rows
    return int(ctx.metrics.total(plan.operator_id, "shuffle_rows"))


def _rows_out(plan: ExecutionPlan, output: pa.Table | None, ctx: TaskContext) -> int:
    """The rows a task produced: its result's, or what its writer was given to route."""
    if output is not None:
        return output.num_rows
    (child,) = plan.children()
    return int(ctx.metrics.total(child.operator_id, "output_rows"))


def _portable(error: BaseException) -> PlansightError:
    """``error`` as a plansight error that pickles to the client with its type and
    message (no traceback objects, no unpicklable originals)."""
    where = operator_of(error)
    if isinstance(error, PlansightError):
        if isinstance(error, (Cancelled, ResourcesExhausted, ExecutionError)) or \
                type(error).__init__ is Exception.__init__:
            try:
                return type(error)(*error.args)
            except TypeError:
                pass
        return PlansightError(str(error))
    if isinstance(error, (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)):
        suffix = f" (in {where})" if where else ""
        return ExecutionError(f"execution failed{suffix}: {error}")
    wrapped = internal_error(error, f"running {where}" if where else "running a task")
    plain = type(wrapped)(str(wrapped))
    return plain
