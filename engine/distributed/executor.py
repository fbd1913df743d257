"""Run a staged plan on a Dask cluster: one Dask task per partition of each stage.

    client                                   workers (PlansightPlugin on each)
    ──────                                   ─────────────────────────────────
    stages_of(plan): 1, 2, ..., final
    submit every stage whose inputs are done ─▶ execute_task(fragment, p, inputs, spec)
    wait (cancel checked every 0.1 s)            map tasks: pieces stay in the worker's store
    a stage done: where its pieces are ◀──────── TaskResult (address, metrics)
    ... final stage: its rows, in partition order
    end: end_query on every worker ────────────▶ pieces deleted (also on error and cancel)

Dask's scheduler places the tasks; a stage's reduce tasks are submitted once its map tasks
are done (Ballista's order), with the map tasks' addresses as arguments, so the graph never
holds M x P edges. Events the workers forward (``worker.TopicSink``) are republished into
the query's bus, so observers see one stream as for a local run.
"""

from __future__ import annotations

import pickle
import time
import uuid
from concurrent.futures import CancelledError
from typing import Any

import pyarrow as pa
from distributed import Client, wait
from distributed.client import FutureCancelledError
from distributed.comm.core import CommClosedError
from distributed.scheduler import KilledWorker

from plansight.engine.distributed import fragment as fragments
from plansight.engine.distributed.stage_filters import gather_key_summaries
from plansight.engine.distributed.stage_limits import FinalLimit, final_limit
from plansight.engine.distributed.stages import Stage, stages_of, stages_read
from plansight.engine.distributed.task import TaskResult, TaskSpec, execute_task
from plansight.engine.distributed.worker import (
    PlansightPlugin,
    TopicSink,
    cancel_query,
    cancel_stages,
    drop_forwarder,
    end_query_soon,
)
from plansight.engine.errors import (
    Cancelled,
    ExecutionError,
    PlansightError,
    ResourcesExhausted,
    WorkerLost,
)
from plansight.engine.exec.context import TaskContext
from plansight.engine.physical.plan import ExecutionPlan

_POLL = 0.1  # seconds between checks of the query's cancel flag while tasks run
#: Up to this many map x reduce task pairs, readers depend on the map tasks directly.
DIRECT_EDGES = 256


def prepare(client: Client) -> None:
    """Install the worker plugin (idempotent: once per cluster is enough)."""
    client.register_plugin(PlansightPlugin())


def run_staged(client: Client, plan: ExecutionPlan, ctx: TaskContext,
               tables: dict[int, tuple[str, Any]]) -> pa.Table:
    """Run staged ``plan`` on the cluster; its result in partition order.

    ``tables`` maps each memory source (by ``id``) to (key, the future the session
    scattered it as). Errors come back as plansight errors of the same type; a worker that
    died is ResourcesExhausted naming it, a lost connection an ExecutionError.
    """
    query_id = uuid.uuid4().hex[:12]
    topic = f"plansight-events-{query_id}"
    config = ctx.config.copy()
    config.cluster = None  # a task runs where it is; the client object stays here
    sink = None
    received: dict[str, int] = {}
    if ctx.events.active:
        sink = TopicSink(topic)

        def republish(event) -> None:
            message = event[1]
            received[message["worker"]] = received.get(message["worker"], 0) + 1
            for item in pickle.loads(message["events"]):
                ctx.events.publish(item)

        client.subscribe_topic(topic, republish)
    keys = {source_id: key for source_id, (key, _) in tables.items()}
    futures_of_tables = {key: future for key, future in tables.values()}
    run = _Run(client, ctx, query_id)
    try:
        results = run.stages(stages_of(plan), keys, futures_of_tables, config, sink)
    finally:
        run.finish(cancelled=ctx.cancelled.is_set())
        if sink is not None:
            sent = _quiet(client.run, drop_forwarder, topic)
            _await_events(sent or {}, received)
            client.unsubscribe_topic(topic)
            _forget_handler(client, topic)
    tables_out = [r.output for r in results]
    return pa.concat_tables(tables_out) if tables_out else pa.table({})


def _ignore_event(event) -> None:
    """Stands in for a finished query's event handler (see ``_forget_handler``)."""


def _forget_handler(client: Client, topic: str) -> None:
    """Drop the client's reference to a finished query's handler.

    ``Client.unsubscribe_topic`` tells the scheduler but keeps the handler in the client
    (dask 2026.8), and with it the query's context, its event bus and whatever observes it
    (a notebook's monitor): one per observed query, for the client's lifetime. A no-op takes
    its place rather than nothing, so that an event still in flight is swallowed instead of
    reaching the client's "no handler" path, which raises.
    """
    handlers = getattr(client, "_event_handlers", None)
    if isinstance(handlers, dict) and topic in handlers:
        handlers[topic] = _ignore_event


class _Run:
    def __init__(self, client: Client, ctx: TaskContext, query_id: str):
        self.client, self.ctx, self.query_id = client, ctx, query_id
        self.futures: list = []

    def stages(self, stages: list[Stage], keys, tables, config, sink) -> list[TaskResult]:
        """Submit every stage at once, each task depending on what tells it where its
        input pieces are; wait for the final stage; then collect every task's metrics.

        A small shuffle (M x P <= ``DIRECT_EDGES``) lets each reader depend on the M map
        tasks themselves (one scheduler hop); a larger one adds one small task per stage
        that lists the locations (M + 1 + P tasks, M + P edges: the scheduler's work grows
        with M + P, not M x P, at the cost of one more hop).
        """
        where: dict[int, Any] = {}
        summaries: dict[int, Any] = {}  # build stage -> its gathered join key summaries
        by_stage: dict[int, list] = {}
        limit = final_limit(stages[-1].plan)
        for stage in stages:  # inputs (and build stages waited for) first
            if stage.final and limit is not None:
                # the final LIMIT starts once it is sure to have its rows (stage_limits)
                where[limit.stage_id] = self._await_limit(limit, by_stage)
            payload = fragments.dumps(stage.plan, keys)
            spec = TaskSpec(config, self.query_id, stage.stage_id,
                            1.0 / max(stage.tasks, 1), event_sink=sink)
            # a probe scan's stage waits for the key summaries of the build stages its
            # dynamic filters come from (stage_filters)
            filters = {i: summaries[i] for i in stage.after if i in summaries}
            prefix = f"plansight-{self.query_id}-{stage.stage_id}"
            # the tasks a final LIMIT counts go first among the ready ones (partition order
            # among themselves): once they hold its rows, the rest need not run at all
            priority = 1 if limit is not None and stage.stage_id == limit.stage_id else 0
            futures = [self.client.submit(execute_task, payload, p,
                                          {i: where[i] for i in stages_read(stage.plan, p)},
                                          spec, tables, filters, key=f"{prefix}-{p}",
                                          pure=False, retries=0, priority=priority)
                       for p in range(stage.tasks)]
            by_stage[stage.stage_id] = futures
            self.futures.extend(futures)
            if stage.final:
                continue
            if stage.plan.key_summaries:
                summaries[stage.stage_id] = self.client.submit(
                    gather_key_summaries, *futures, key=f"{prefix}-keys", pure=False)
                self.futures.append(summaries[stage.stage_id])
            readers = sum(s.tasks for s in stages if stage.stage_id in s.inputs)
            if len(futures) * readers <= DIRECT_EDGES or \
                    (limit is not None and stage.stage_id == limit.stage_id):
                where[stage.stage_id] = futures  # each reader waits on the map tasks
            else:  # one small task gathers the locations: M + P edges, not M x P
                where[stage.stage_id] = self.client.submit(
                    piece_locations, *futures, key=f"{prefix}-where", pure=False)
                self.futures.append(where[stage.stage_id])
        self._wait(by_stage[0])
        results = self.client.gather(
            [f for stage_id, fs in by_stage.items() for f in fs], errors="skip")
        for result in results:
            self.ctx.metrics.merge(result.metrics)
        return [r for r in results if r.stage_id == 0]

    def _wait(self, final: list) -> None:
        """Until the final stage is done (an error anywhere reaches it), checking for a
        cancel every ``_POLL`` seconds."""
        pending = list(final)
        while pending:
            pending = self._wait_some(pending)

    def _wait_some(self, pending: list) -> list:
        """Until one of ``pending`` is done or ``_POLL`` seconds passed; those not done.
        Raises the query's error (or the user's cancel) as soon as there is one."""
        self.ctx.check_cancelled()
        try:
            wait(pending, timeout=_POLL, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return pending
        except CancelledError:  # the scheduler dropped a task: see which and why
            pass
        except (CommClosedError, OSError) as error:
            raise ExecutionError(f"lost the connection to the cluster: {error}") from None
        failed = [f for f in self.futures if f.status in ("error", "cancelled")]
        if failed:
            self._raise_failure(failed)
        return [f for f in pending if not f.done()]

    def _await_limit(self, limit: FinalLimit, by_stage: dict[int, list]) -> list:
        """Wait for the tasks of the stage below the final LIMIT until the finished ones
        hold its rows; then cancel every task still queued or running (below the final
        stage, nothing else needs them). Where each task's pieces are (None: cancelled)."""
        futures = by_stage[limit.stage_id]
        finished: dict[int, Any] = {}
        pending = list(futures)
        while pending:
            pending = self._wait_some(pending)
            new = [p for p, f in enumerate(futures) if p not in finished and
                   f.status == "finished"]
            for p, result in zip(new, self.client.gather([futures[p] for p in new])):
                finished[p] = result
            if pending and limit.satisfied({p: r.rows for p, r in finished.items()}):
                self._cancel_upstream(by_stage)
                break
        return [finished[p].address if p in finished else None for p in range(len(futures))]

    def _cancel_upstream(self, by_stage: dict[int, list]) -> None:
        unfinished = [f for f in self.futures if not f.done()]
        if not unfinished:
            return
        self.futures = [f for f in self.futures if f.done()]
        for stage_id, futures in by_stage.items():
            by_stage[stage_id] = [f for f in futures if f.done()]
        self.client.cancel(unfinished)
        # running tasks stop at their next batch, queued ones are refused on the workers
        self.client.run(cancel_stages, self.query_id, list(by_stage))

    def _raise_failure(self, failed: list) -> None:
        if any(f.status == "cancelled" for f in failed):
            self.ctx.check_cancelled()  # the user's cancel, or else the cluster's doing:
            raise WorkerLost("the cluster dropped the query's tasks: data they need was lost "
                             "with a worker that died or restarted")
        errors = [f.exception() for f in failed]
        real = [e for e in errors if not isinstance(e, Cancelled)]
        raise translate(real[0] if real else errors[0])

    def finish(self, cancelled: bool) -> None:
        """Drop queued and running tasks (if any are left) and every piece of the query."""
        unfinished = [f for f in self.futures if not f.done()]
        if unfinished or cancelled:
            _quiet(self.client.run, cancel_query, self.query_id)
            _quiet(self.client.cancel, unfinished)
            _quiet(self.client.run, cancel_query, self.query_id)  # what started meanwhile
        else:  # done: the workers delete the pieces while the result goes to the caller
            _quiet(lambda: self.client.run(end_query_soon, self.query_id, wait=False))
        self.futures = []


def piece_locations(*results: TaskResult) -> list[str]:
    """Where each map task of a stage left its pieces (by partition): what the next
    stage's tasks need to fetch them."""
    return [r.address for r in sorted(results, key=lambda r: r.partition)]


def translate(error: BaseException) -> PlansightError:
    """A task's error as the error the query raises (type kept for plansight errors)."""
    if isinstance(error, PlansightError):
        return error
    if isinstance(error, KilledWorker):
        worker = getattr(error.last_worker, "address", error.last_worker)
        return ResourcesExhausted(f"worker {worker} died while running task {error.task} "
                                  "(usually out of memory): give the workers more memory or "
                                  "use more partitions")
    if isinstance(error, FutureCancelledError):
        return Cancelled("query cancelled: its tasks were cancelled on the cluster")
    if isinstance(error, (CommClosedError, OSError)):
        return ExecutionError(f"lost the connection to a worker: {error}")
    return ExecutionError(f"a task failed on the cluster: {type(error).__name__}: {error}")


def _quiet(call, *args):
    """Cleanup that must not hide the query's own error (the cluster may be gone)."""
    try:
        return call(*args)
    except Exception:  # noqa: BLE001 (best effort: the query already has its outcome)
        return None


def _await_events(sent: dict[str, int], received: dict[str, int], timeout: float = 2.0
                  ) -> None:
    """Wait until every event batch a worker sent has arrived (they travel through the
    scheduler, behind the task results)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(
            received.get(worker, 0) < count for worker, count in sent.items()):
        time.sleep(0.01)
