"""What a running plan can see: configuration, memory pool, metrics, events, cancellation."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plansight.engine.errors import Cancelled
from plansight.engine.exec.events import EventBus
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.exec.metrics import MetricsRegistry

if TYPE_CHECKING:  # spill.py reads the context; the context only names the manager's type
    from plansight.engine.exec.spill import SpillManager


@dataclass
class SessionConfig:
    """Session options (DuckDB's or DataFusion's names where they have the option).

    Every tuning knob of the engine is here, settable with ``SET name = value`` and per query
    with ``Session.sql(text, options={...})``; the option table that validates them is
    ``plansight.session.OPTIONS``.
    """

    target_partitions: int = 1
    batch_size: int = 8192
    memory_limit: int | None = None
    default_null_order: str = "nulls_last"
    integer_division: bool = False
    spill_dir: str | None = None
    memory_pool_policy: str = "greedy"
    #: A join whose smaller side has fewer rows builds one shared hash table (collect-left);
    #: larger ones hash both sides into partitions built in parallel (DataFusion's name).
    #: Below 2.5M rows one shared build is cheaper than shuffling both inputs through Python
    #: queues (measured on TPC-H SF1 with 2 cores: a wash for 0.8-1.5M-row builds).
    hash_join_single_partition_threshold_rows: int = 2_500_000
    #: A two-phase aggregate estimated to emit fewer groups merges its partial states in one
    #: partition (the partials coalesced) instead of hashing them into ``target_partitions``
    #: final aggregates: a few hundred state rows cost less to merge once than to route
    #: through a repartition's queues, and what follows (a sort) needs no merge of runs.
    #: 0: always hash the states (the test suite pins it so, to cover that path). Plans
    #: for a cluster always hash them.
    aggregate_single_final_threshold_rows: int = 10_000
    #: "auto" chooses per window; "hash", "sorted" or "partition" force an executor.
    window_executor: str = "auto"
    #: Most spilled runs merged at once; more runs merge in levels.
    spill_merge_fan_in: int = 16
    #: A hash join's build side with at most this many distinct keys filters the probe scan
    #: by its key set (beyond it, by the key range only).
    dynamic_filter_max_keys: int = 1024
    #: More distinct integer build keys than that, spanning at most this many values, filter
    #: the probe scan by a bitmap of the keys (one bit per value of their range: 16 MiB at
    #: most by default); 0 turns bitmaps off (the range only, as before).
    dynamic_filter_max_bitmap_bits: int = 1 << 27
    #: A join's key filter travels below aggregates grouped by the key; True: also into the
    #: preserved side of other joins below (push_dynamic_filters); "auto": only from a build
    #: estimated to hold a small share of the keys (TPC-H Q7's suppliers of two nations);
    #: False: never. Not always: on TPC-H Q9 the filters from builds holding every key cost
    #: more than they saved.
    dynamic_filter_through_joins: bool | str = "auto"
    #: A scan partition stops testing a join key filter that kept 95% or more of its first
    #: this many rows (0: never): a filter from a build side holding nearly every key costs
    #: a test per row and drops nothing.
    dynamic_filter_bypass_after_rows: int = 100_000
    #: On a cluster, a join's build stage sends its keys to a probe scan in another stage,
    #: which then runs after the build stage (when the build is estimated no larger than
    #: the probe scan); False: the stages run side by side and that scan reads everything.
    dynamic_filter_across_stages: bool = True
    #: False: only the logical rules a plan needs (decorrelation); the reference plan the
    #: differential fuzzer compares the optimized one with.
    optimizer: bool = True
    #: WITH RECURSIVE stops with an error after this many iterations without a fixpoint.
    recursive_cte_max_iterations: int = 1000
    #: Where queries run: None (this process), "local:N" (a LocalCluster of N worker
    #: processes on 127.0.0.1, started on first use), a scheduler address
    #: ("tcp://host:8786"), or a ``distributed.Client``. Needs plansight[distributed].
    cluster: str | None = None
    #: On a cluster, a query whose sources hold fewer rows than this (estimated) runs in
    #: this process: dispatching its stages costs about 0.1 s, more than such a query takes
    #: here. 0 sends every query to the cluster.
    cluster_min_rows: int = 1_000_000

    def copy(self) -> SessionConfig:
        return SessionConfig(**self.__dict__)


@dataclass
class TaskContext:
    config: SessionConfig
    memory_pool: MemoryPool
    metrics: MetricsRegistry = field(default_factory=MetricsRegistry)
    events: EventBus = field(default_factory=EventBus)
    cancelled: threading.Event = field(default_factory=threading.Event)
    #: created by spill.spill_manager on first use (most queries never spill)
    spill_manager: SpillManager | None = None
    _spill_dir: Path | None = None
    # the query's first real error; set before ``cancelled`` stops the other threads, so a
    # Cancelled seen after it is a consequence of it, and one seen without it is the user's
    failure: BaseException | None = None
    _failure_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: a distributed task's shuffle (engine/distributed/shuffle.ShuffleContext), else None
    shuffle: Any = None
    #: called by cleanup(): what operators keep for the whole run (shared results)
    _cleanups: list = field(default_factory=list, repr=False)

    @property
    def batch_size(self) -> int:
        return self.config.batch_size

    def check_cancelled(self) -> None:
        """Raise when the query must stop: its first real error if it failed (so a thread
        that notices the stop reports the cause), Cancelled if the user cancelled it."""
        if self.cancelled.is_set():
            if self.failure is not None:
                raise self.failure
            raise Cancelled("query cancelled")

    def fail(self, error: BaseException) -> BaseException:
        """Report ``error`` from any thread of the query; return the error the query raises.

        The first real error wins: it is recorded, then every thread is told to stop (they
        stop with Cancelled, which is not recorded). A Cancelled, or an error raised after a
        user's cancellation, returns the recorded error if there is one, else itself.

        Example:
            >>> from plansight.engine.errors import ExecutionError
            >>> ctx = TaskContext(SessionConfig(), None)
            >>> first = ExecutionError("division by zero")
            >>> ctx.fail(first) is first, ctx.cancelled.is_set()
            (True, True)
            >>> ctx.fail(Cancelled("query cancelled")) is first
            True
        """
        with self._failure_lock:
            if self.failure is None and not isinstance(error, Cancelled) and \
                    not self.cancelled.is_set():
                self.failure = error
            self.cancelled.set()
            return self.failure if self.failure is not None else error

    def spill_dir(self) -> Path:
        """A per-query folder for spill files, created on first use, removed by cleanup()."""
        if self._spill_dir is None:
            base = self.config.spill_dir
            if base:
                Path(base).mkdir(parents=True, exist_ok=True)
            self._spill_dir = Path(tempfile.mkdtemp(prefix="plansight-spill-", dir=base))
        return self._spill_dir

    def on_cleanup(self, callback: Callable[[], None]) -> None:
        """Have ``callback`` run when the query ends (cleanup()), however it ends."""
        self._cleanups.append(callback)

    def cleanup(self) -> None:
        callbacks, self._cleanups = self._cleanups, []
        for callback in callbacks:
            callback()
        if self._spill_dir is not None:
            shutil.rmtree(self._spill_dir, ignore_errors=True)
            self._spill_dir = None
