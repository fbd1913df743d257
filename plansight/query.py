"""Query: a planned statement; running it returns Arrow data, metrics and events."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
from sqlglot import exp

from plansight.engine.exec.allocator import release_freed_memory
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.events import (
    EventBus,
    QueryCancelled,
    QueryFailed,
    QueryFinished,
    QueryStarted,
    ReservationChanged,
)
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.exec.metrics import format_metric
from plansight.engine.logical.plan import LogicalPlan, format_plan
from plansight.engine.physical.plan import ExecutionPlan, format_physical, operator_of
from plansight.errors import (
    Cancelled,
    ExecutionError,
    PlanError,
    PlansightError,
    add_caret,
    internal_error,
)
from plansight.query_history import record_run


@dataclass
class QueryRun:
    """The outcome of one execution: the result and everything observed on the way."""

    result: pa.Table
    plan: ExecutionPlan
    ctx: TaskContext
    elapsed: float
    spills: list = field(default_factory=list)  # (operator, partition, rows, bytes) per file
    profile: Any = None

    @property
    def metrics(self):
        return self.ctx.metrics

    def explain_analyze(self) -> str:
        totals = self.ctx.metrics.snapshot()  # once: every operator's line reads from it
        return format_physical(self.plan,
                               lambda op: format_metrics(totals.get(op.operator_id, {}),
                                                         op.row_estimate))


def format_metrics(totals: dict[str, float], estimate: float | None = None) -> str:
    """One operator's EXPLAIN ANALYZE metrics from its totals over partitions: rows (and
    the planner's ``estimate`` beside them), batches and own compute first, then every
    other metric it recorded, when non-zero."""
    own = totals.get("elapsed_compute", 0.0)  # children excluded at the source
    parts = [f"output_rows={int(totals.get('output_rows', 0))}"]
    if estimate is not None:
        parts.append(f"estimated_rows={round(estimate)}")
    parts += [f"output_batches={int(totals.get('output_batches', 0))}",
              f"elapsed_compute={max(own, 0) * 1000:.3f}ms"]
    shown = ("output_rows", "output_batches", "elapsed_compute")
    parts += [format_metric(name, totals[name]) for name in sorted(totals)
              if name not in shown and totals[name]]
    return ", ".join(parts)


def as_plansight_error(error: BaseException) -> PlansightError:
    """The error a user sees for ``error`` raised while running a plan.

    Plansight errors pass through; Arrow's invalid-input errors become ExecutionError; any
    other exception is a bug and becomes InternalError naming the original type, message and
    the operator that raised it (``operator_of``).
    """
    if isinstance(error, PlansightError):
        return error
    where = operator_of(error)
    suffix = f" (in {where})" if where else ""
    doing = f"running {where}" if where else "running the query"
    if isinstance(error, (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)):
        translated: PlansightError = ExecutionError(f"execution failed{suffix}: {error}")
        translated.original = error
        translated.__cause__ = error
        return translated
    return internal_error(error, doing)


@contextmanager
def _planning_errors(sql: str) -> Iterator[None]:
    """What planning raises, as a user sees it: plansight errors with a caret under ``sql``,
    too-deep nesting as a plain error, anything else as an InternalError (a bug)."""
    try:
        yield
    except PlansightError as e:
        raise add_caret(e, sql) from None
    except RecursionError as e:
        raise PlansightError("the query is nested too deeply to plan") from e
    except Exception as e:  # a bug: keep the traceback, say so
        raise internal_error(e, "planning") from e


class Query:
    """A lazily planned query; ``to_arrow()`` runs it.

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.table({"k": ["a", "b", "a"], "v": [1, 2, 3]}))
        >>> q = s.sql("SELECT k, max(v) AS top FROM t GROUP BY k ORDER BY k")
        >>> q.to_arrow().to_pydict()
        {'k': ['a', 'b'], 'top': [3, 2]}
    """

    def __init__(self, session, sql: str, statement: exp.Expression | None, tables: dict,
                 params: dict | None = None, config: SessionConfig | None = None):
        self.session, self.sql, self.tables = session, sql, tables
        self.params = params or {}
        self.config = config if config is not None else session.config.copy()
        self._explain = None
        if isinstance(statement, exp.Describe) and statement.meta.get("explain"):
            self._explain = "analyze" if statement.args.get("style") == "ANALYZE" else "plain"
            statement = statement.this
        self.statement = statement
        self._ctx: TaskContext | None = None
        self._bus: EventBus | None = None
        self._cancel = threading.Event()
        self.last_record = None  # this query's latest run in plansight.history()
        self.logical = self.optimized = None
        self.physical: ExecutionPlan | None = None
        self.distributed = False  # True: the plan is staged and runs on config.cluster
        self.runs_here: str | None = None  # with a cluster set: why this query does not use it
        if statement is not None:
            self._plan()

    @property
    def context(self) -> TaskContext | None:
        """The running (or last) execution's context: live metrics, memory pool, events."""
        return self._ctx

    # -- planning -------------------------------------------------------------
    def _plan(self) -> None:
        from plansight.engine.optimizer.optimizer import optimize
        from plansight.engine.physical.planner import PhysicalPlanner
        from plansight.engine.physical_optimizer import optimize_physical
        from plansight.engine.sql.binder import Binder

        options = {"integer_division": self.config.integer_division,
                   "default_null_order": self.config.default_null_order}
        with _planning_errors(self.sql):
            binder = Binder(self.tables, options, self.params, run_plan=self._run_constant)
            self.logical: LogicalPlan = binder.bind_statement(self.statement)
            self.optimized = optimize(self.logical, self.config.optimizer)
            physical = PhysicalPlanner(self.config).plan(self.optimized)
            self.physical = optimize_physical(physical, self.config)
            if self.config.cluster is not None:
                self._stage()

    #: options that change neither what the query binds to nor the bound plan: the
    #: optimizer switch (its rules start from the bound plan) and the physical options
    #: (partitions, batch size). ``with_options`` replans for them without binding again.
    REPLANNABLE_OPTIONS = frozenset({"optimizer", "target_partitions", "batch_size"})

    def with_options(self, options: dict[str, Any]) -> Query:
        """This query planned for other ``REPLANNABLE_OPTIONS``: the bound logical plan is
        reused (and the optimized one too when the optimizer switch stays), the rest is
        planned again. The differential fuzzer runs each query at several settings and with
        the optimizer off, where parsing and binding came out the same every time and cost a
        third of a run's time."""
        from plansight.engine.optimizer.optimizer import optimize
        from plansight.engine.physical.planner import PhysicalPlanner
        from plansight.engine.physical_optimizer import optimize_physical
        from plansight.session import apply_option

        unknown = set(options) - self.REPLANNABLE_OPTIONS
        if unknown:
            raise PlanError(f"with_options takes only {sorted(self.REPLANNABLE_OPTIONS)}, "
                            f"not {sorted(unknown)}: the others can change the bound plan")
        config = self.config.copy()
        for name, value in options.items():
            apply_option(config, name, value)
        query = Query(self.session, self.sql, None, self.tables, self.params, config)
        query.statement, query._explain = self.statement, self._explain
        query.logical = self.logical
        if self.logical is not None:
            with _planning_errors(self.sql):
                query.optimized = self.optimized if config.optimizer == self.config.optimizer \
                    else optimize(self.logical, config.optimizer)
                query.physical = optimize_physical(
                    PhysicalPlanner(config).plan(query.optimized), config)
                if config.cluster is not None:
                    query._stage()
        return query

    def _stage(self) -> None:
        """On a cluster: cut the plan into stages (shown by EXPLAIN, run by the workers).
        A plan that cannot run in stages (a recursive query) runs here, and so does a small
        one (``cluster_min_rows``): EXPLAIN says which and why."""
        from plansight.engine.distributed.stages import can_distribute, plan_stages, rows_read

        if not can_distribute(self.physical):
            self.runs_here = "a recursive query runs in this process"
            return
        rows, least = rows_read(self.physical), self.config.cluster_min_rows
        if rows is not None and rows < least:
            self.runs_here = (f"runs in this process: its sources hold about {rows:,.0f} "
                              f"rows, fewer than cluster_min_rows ({least:,}); "
                              "SET cluster_min_rows = 0 sends every query to the cluster")
            return
        self.physical = plan_stages(self.physical, self.config.dynamic_filter_across_stages)
        self.distributed = True

    def _run_constant(self, plan: LogicalPlan) -> pa.Table:
        """An uncorrelated subquery whose value planning needs (a window frame offset),
        run now, once, with this query's options and memory limit."""
        from plansight.engine.exec.scheduler import run_partitions
        from plansight.engine.optimizer.optimizer import optimize
        from plansight.engine.physical.planner import PhysicalPlanner
        from plansight.engine.physical_optimizer import optimize_physical

        physical = optimize_physical(PhysicalPlanner(self.config).plan(
            optimize(plan, self.config.optimizer)), self.config)
        pool = MemoryPool(self.config.memory_limit, self.config.memory_pool_policy)
        ctx = TaskContext(self.config, pool, cancelled=self._cancel)
        try:
            batches = list(run_partitions(physical, ctx))
        except Exception as caught:  # noqa: BLE001 (translated, never swallowed)
            error = as_plansight_error(ctx.fail(caught))
            raise error from error.__cause__
        finally:
            ctx.cleanup()
        return pa.Table.from_batches(batches, schema=physical.schema)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.logical.columns] if self.logical is not None else []

    # -- running --------------------------------------------------------------
    def execute(self, observer=None) -> QueryRun:
        """Run the plan; ``observer`` (a callable or list of them) receives engine events."""
        if self.physical is None:
            empty = pa.table({})
            return QueryRun(empty, None, None, 0.0)
        if self._explain == "plain":
            text = self.explain()
            return QueryRun(pa.table({"plan": [text]}), self.physical, None, 0.0)
        observers = observer if isinstance(observer, (list, tuple)) else \
            ([observer] if observer is not None else [])
        pool = MemoryPool(self.config.memory_limit, self.config.memory_pool_policy)
        bus = EventBus(list(observers))
        ctx = TaskContext(self.config, pool, events=bus, cancelled=self._cancel)
        self._cancel.clear()
        self._ctx, self._bus = ctx, bus
        started, start = datetime.now(), time.perf_counter()
        try:
            run = self._run(ctx)
        except BaseException as error:
            self._record(started, time.perf_counter() - start, ctx, error=error)
            raise
        finally:
            bus.close()  # observers have seen every event (the last one too) before we return
            self._bus = None
        analyzed = run.explain_analyze()
        self._record(started, run.elapsed, ctx, rows=run.result.num_rows, analyzed=analyzed)
        if self._explain == "analyze":
            run.result = pa.table({"plan": [analyzed]})
        return run

    def _record(self, started: datetime, elapsed: float, ctx: TaskContext,
                rows: int | None = None, analyzed: str | None = None,
                error: BaseException | None = None) -> None:
        """Add this run to ``plansight.history()``, however it ended."""
        if error is None:
            status = "finished"
        elif isinstance(error, (Cancelled, KeyboardInterrupt)):
            status = "cancelled"
        else:
            status = "failed"
        manager = ctx.spill_manager
        self.last_record = record_run(
            self.session, self.sql, started, status, elapsed, ctx.memory_pool.peak,
            list(manager.history) if manager is not None else [], rows=rows,
            analyzed=analyzed, error=str(error) if status == "failed" else None)

    def _run(self, ctx: TaskContext) -> QueryRun:
        bus, pool = ctx.events, ctx.memory_pool
        if bus.active:
            pool.listeners.append(lambda r, total: bus.publish(
                ReservationChanged(r.consumer, r.size, total, pool.peak)))
            bus.publish(QueryStarted(self.sql))
        start = time.perf_counter()
        plan = self.physical
        try:
            if self.distributed:
                from plansight.cluster import run_on_cluster

                connection = self.session.cluster_connection(self.config.cluster)
                table = run_on_cluster(connection, plan, ctx)
                if table.num_columns == 0:
                    table = plan.schema.empty_table()
            else:
                batches = []
                for partition in range(plan.output_partitioning().count):
                    batches.extend(plan.execute(partition, ctx))
                table = pa.Table.from_batches(batches, schema=plan.schema)
        except KeyboardInterrupt:
            self._cancel.set()
            if bus.active:
                bus.publish(QueryCancelled())
            raise Cancelled("query cancelled by interrupt") from None
        except Exception as caught:  # noqa: BLE001 (translated, never swallowed)
            # the first real error of any partition, not a sibling's Cancelled that won the
            # race to this thread
            error = ctx.fail(caught)
            if isinstance(error, Cancelled):
                if bus.active:
                    bus.publish(QueryCancelled())
                raise error from None
            error = as_plansight_error(error)
            if bus.active:
                bus.publish(QueryFailed(str(error)))
            raise error from error.__cause__  # the original error (as_plansight_error)
        finally:
            ctx.cleanup()
            release_freed_memory()  # reused within the query, not kept for the next one
        table = table.rename_columns(self.column_names)
        if bus.active:
            bus.publish(QueryFinished(table.num_rows))
        manager = ctx.spill_manager
        spills = list(manager.history) if manager is not None else []
        return QueryRun(table, plan, ctx, time.perf_counter() - start, spills=spills)

    def to_arrow(self) -> pa.Table:
        return self.execute().result

    def to_pandas(self):
        return self.to_arrow().to_pandas()

    def to_polars(self):
        import polars as pl

        return pl.from_arrow(self.to_arrow())

    def cancel(self) -> None:
        """Stop a running execution (from another thread); it raises Cancelled. Once the
        engine is done, it also stops a flush still waiting for a slow observer."""
        self._cancel.set()
        bus = self._bus
        if bus is not None and bus.flushing:
            bus.abandon()

    def explain(self, analyze: bool = False, logical: bool = False) -> str:
        """The physical plan as indented text; with ``analyze`` run it and add metrics."""
        if self.physical is None:
            return ""
        if analyze:
            return self.execute().explain_analyze()
        if logical:
            return format_plan(self.optimized)
        text = format_physical(self.physical)
        return f"{text}\n-- {self.runs_here}" if self.runs_here else text

    def __repr__(self) -> str:
        return f"<plansight.Query {self.sql.strip()[:60]!r}>"

