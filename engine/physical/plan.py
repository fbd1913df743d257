"""The ExecutionPlan interface every physical operator implements.

An operator *declares* its output partitioning and ordering and what it requires of its
inputs; the EnsureRequirements rule arranges shuffles and sorts so those requirements hold.
``execute(partition, ctx)`` returns an iterator of RecordBatches; the base class wraps the
operator's ``_execute`` so that every operator records the shared metrics and publishes
events, and stops between batches when the query is cancelled.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from plansight.engine.errors import PlanError
from plansight.engine.exec.compute_clock import CLOCK
from plansight.engine.exec.context import TaskContext
from plansight.engine.exec.events import OperatorFinished, OperatorStarted, RunProgress
from plansight.engine.logical.expr import Expr, SortKey
from plansight.engine.physical.equivalence import NONE, Equivalences
from plansight.engine.physical.vocabulary import DistributionKind

_operator_ids = itertools.count(1)


# ----------------------------------------------------------------------------- distribution

@dataclass(frozen=True)
class Partitioning:
    """How an operator's output rows are spread over its ``count`` partitions.

    ``hash_exprs``: partition p holds the rows whose hash of these expressions is p (what a
    hash repartition makes; a co-partitioned join relies on the exact hash function).
    ``disjoint_exprs``: rows equal on these expressions are in one partition, but placed by
    something other than the engine's hash -- a scan whose partitions read row groups with
    non-overlapping value ranges of a column. It groups rows like a hash partitioning (an
    aggregate or window needs no exchange) and never co-partitions a join.
    """

    count: int
    hash_exprs: tuple[Expr, ...] | None = None  # Hash(exprs, count); None: unknown/round robin
    disjoint_exprs: tuple[Expr, ...] | None = None

    def __str__(self) -> str:
        if self.hash_exprs is not None:
            return f"Hash([{', '.join(map(str, self.hash_exprs))}], {self.count})"
        if self.disjoint_exprs is not None:
            return f"Disjoint([{', '.join(map(str, self.disjoint_exprs))}], {self.count})"
        return f"UnknownPartitioning({self.count})"

    @property
    def grouping_exprs(self) -> tuple[Expr, ...] | None:
        """Expressions whose equal values are always in one partition (either kind)."""
        return self.hash_exprs if self.hash_exprs is not None else self.disjoint_exprs

    def renamed(self, rename: Callable[[Expr], Expr | None]) -> Partitioning:
        """The same placement with each key expression replaced by ``rename(expr)`` (an
        operator's output name for it); unknown placement when a key has none."""
        exprs = self.grouping_exprs
        if exprs is None:
            return self
        keys = tuple(rename(e) for e in exprs)
        if any(k is None for k in keys):
            return Partitioning(self.count)
        if self.hash_exprs is not None:
            return Partitioning(self.count, keys)
        return Partitioning(self.count, disjoint_exprs=keys)


@dataclass(frozen=True)
class Distribution:
    """What an operator requires of an input: ``kind`` unspecified | single | hash.

    ``hash_on``: for a grouping requirement, the keys a repartition inserted to meet it
    hashes on -- a subset of ``exprs`` (hashing one high-NDV integer key is cheaper than
    hashing all of them, strings included, and rows equal on every key are equal on it).
    """

    kind: DistributionKind = DistributionKind.UNSPECIFIED
    exprs: tuple[Expr, ...] = ()
    partitions: int | None = None  # co-partitioned joins need exactly this many
    hash_on: tuple[Expr, ...] | None = None

    @property
    def repartition_exprs(self) -> tuple[Expr, ...]:
        return self.hash_on if self.hash_on is not None else self.exprs

    def satisfied_by(self, partitioning: Partitioning,
                     equivalences: Equivalences = NONE) -> bool:
        """Whether ``partitioning`` meets this requirement; a hash key may stand for any
        column ``equivalences`` knows equal to it (rows equal on one are equal on both).

        Without a partition count (grouping: aggregates, windows) a partitioning on a subset
        of the keys meets it (rows equal on all keys are equal on the subset, so they are in
        one partition), whether hashed or disjoint, and constant keys are ignored on both
        sides: rows equal on ``b`` are equal on ``(a, b)`` when ``a`` is constant. A
        co-partitioned join (``partitions`` set) needs its exact keys hashed: the other
        input is hashed on all of them.
        """
        if self.kind is DistributionKind.UNSPECIFIED:
            return True
        if self.partitions is not None:
            return partitioning.count == self.partitions and \
                _same_exprs(partitioning.hash_exprs or (), self.exprs, equivalences)
        if partitioning.count == 1:
            return True
        if self.kind is DistributionKind.SINGLE:
            return False
        have = partitioning.grouping_exprs
        if have is None:
            return False
        if _same_exprs(have, self.exprs, equivalences):
            return True
        have = equivalences.normalize_hash_keys(have)
        want = equivalences.normalize_hash_keys(self.exprs)
        # only constant keys: equal to ``want`` only when it has nothing else either
        return all(key in want for key in have) if have else not want


def _same_exprs(have, want, equivalences: Equivalences) -> bool:
    return len(have) == len(want) and all(equivalences.same(a, b) for a, b in zip(have, want))


UNSPECIFIED = Distribution()
SINGLE_PARTITION = Distribution(DistributionKind.SINGLE)


def hash_distribution(exprs, partitions: int | None = None,
                      hash_on=None) -> Distribution:
    """Rows with equal ``exprs`` in one partition; with ``partitions``, exactly that many
    partitions hashed the same way (what both inputs of a partitioned join need);
    ``hash_on``, a subset of ``exprs``: what a repartition meeting it hashes on."""
    exprs = tuple(exprs)
    if hash_on is not None:
        hash_on = tuple(hash_on)
        if partitions is not None or not hash_on or any(e not in exprs for e in hash_on):
            raise PlanError("hash_on must be a non-empty subset of a grouping "
                            "distribution's keys")
    return Distribution(DistributionKind.HASH, exprs, partitions, hash_on)


Ordering = tuple[SortKey, ...]


def ordering_satisfies(have: Ordering | None, want: Ordering | None,
                       equivalences: Equivalences = NONE) -> bool:
    """Whether rows sorted by ``have`` are also sorted by ``want`` (prefix match, once keys
    are replaced by their equivalence class, and constant and repeated keys dropped: any
    rows are sorted by a constant)."""
    want_keys = equivalences.normalize_ordering(want or ())
    if not want_keys:
        return True
    if not have:
        return False
    have_keys = equivalences.normalize_ordering(have)
    return len(have_keys) >= len(want_keys) and have_keys[:len(want_keys)] == want_keys


# ----------------------------------------------------------------------------- the interface

class ExecutionPlan:
    """Base class of physical operators.

    Plans pickle (distributed execution ships them to workers): the attributes named in
    ``RUNTIME_STATE`` hold one run's state (locks, exchange queues, a shared build) and are
    left out, then made anew by their factory when the plan is unpickled. Everything else,
    the operator id included, travels as is.
    """

    name = "ExecutionPlan"
    #: attribute name -> factory of its fresh value (see the class docstring)
    RUNTIME_STATE: dict[str, Callable[[], Any]] = {}

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.operator_id = next(_operator_ids)
        #: estimated output rows over all partitions (logical/estimate.py), set by the
        #: planner; operators the physical rules insert take theirs from their input
        #: (``fill_row_estimates``). EXPLAIN shows it as ``rows≈N``.
        self.row_estimate: float | None = None

    # -- declarations ---------------------------------------------------------
    def walk(self, depth: int = 0) -> Iterator[tuple[int, ExecutionPlan]]:
        """(depth, operator) for this operator and everything below it, in EXPLAIN order:
        each parent before its children, children left to right."""
        yield depth, self
        for child in self.children():
            yield from child.walk(depth + 1)

    def children(self) -> list[ExecutionPlan]:
        return []

    def with_new_children(self, children: list[ExecutionPlan]) -> ExecutionPlan:
        raise NotImplementedError(type(self).__name__)

    def with_children(self, children: list[ExecutionPlan]) -> ExecutionPlan:
        """``with_new_children`` keeping this operator's row estimate: what the physical
        rules call, so a rebuilt join or aggregate still shows the planner's estimate."""
        rebuilt = self.with_new_children(children)
        if rebuilt.row_estimate is None:
            rebuilt.row_estimate = self.row_estimate
        return rebuilt

    def derived_row_estimate(self) -> float | None:
        """An estimate from the inputs' when the planner set none: an operator inserted to
        meet a requirement (exchange, sort, merge) outputs its input's rows; operators with
        a fetch override this."""
        children = self.children()
        return children[0].row_estimate if len(children) == 1 else None

    def output_partitioning(self) -> Partitioning:
        children = self.children()
        return children[0].output_partitioning() if children else Partitioning(1)

    def output_ordering(self) -> Ordering | None:
        children = self.children()
        if children and self.maintains_input_order()[0]:
            return children[0].output_ordering()
        return None

    def required_input_distribution(self) -> list[Distribution]:
        return [UNSPECIFIED] * len(self.children())

    def required_input_ordering(self) -> list[Ordering | None]:
        return [None] * len(self.children())

    def maintains_input_order(self) -> list[bool]:
        return [False] * len(self.children())

    def benefits_from_partitioning(self) -> list[bool]:
        return [False] * len(self.children())

    def equivalences(self) -> Equivalences:
        """Classes of output columns known equal in every row (see equivalence.py).

        Default: a single input's classes, restricted to the columns this operator outputs;
        nothing for several inputs (a UNION's branches need not agree).
        """
        cached = getattr(self, "_equivalences", None)
        if cached is None:
            cached = self._compute_equivalences()
            self._equivalences = cached
        return cached

    def _compute_equivalences(self) -> Equivalences:
        children = self.children()
        if len(children) != 1:
            return NONE
        return children[0].equivalences().restrict(self.schema.names)

    def display(self) -> str:
        return self.name

    def hidden_in_display(self) -> bool:
        """Whether EXPLAIN leaves this operator out because it changes nothing a reader
        sees (it still runs)."""
        return False

    # -- execution ------------------------------------------------------------
    def execute(self, partition: int, ctx: TaskContext) -> Iterator[pa.RecordBatch]:
        """Iterate the output of ``partition``; no work happens before the first next()."""
        return self._instrumented(partition, ctx)

    def _execute(self, partition: int, ctx: TaskContext) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError(type(self).__name__)

    def _instrumented(self, partition: int, ctx: TaskContext) -> Iterator[pa.RecordBatch]:
        # Runs once per batch per operator, holding the GIL: keep it to a cancellation flag
        # read, two clock reads, the thread's nested time (compute_clock) and in-place adds
        # to the metrics dict (readers see live values). With an observer, also the run's
        # progress counters -- one tuple -- from which the bus makes BatchProduced events on
        # its own thread; never an event here.
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        values = metrics.values
        bus = ctx.events
        cancelled = ctx.cancelled.is_set
        clock = time.perf_counter
        metrics.start = clock()
        observed = bus.active
        compute_before = values["elapsed_compute"]  # a partition may run more than once
        if observed:
            run = RunProgress(self.operator_id, partition)
            bus.publish(OperatorStarted(self.operator_id, self.name, partition), run)
        inner = self._execute(partition, ctx)
        pull = inner.__next__
        rows = batches = 0
        try:
            while True:
                if cancelled():
                    ctx.check_cancelled()
                # own time only: what nested pulls and waits on this thread add to
                # its nested time is theirs; then count this whole pull as nested for the
                # parent. The open-pull stack lets live readers see a long pull's time.
                thread = CLOCK.state
                nested = thread.nested
                t0 = clock()
                thread.open.append((metrics, t0, nested))
                try:
                    batch = pull()
                except StopIteration:
                    spent = clock() - t0
                    values["elapsed_compute"] += spent - (thread.nested - nested)
                    thread.nested = nested + spent
                    break
                finally:
                    thread.open.pop()
                now = clock()
                values["elapsed_compute"] += now - t0 - (thread.nested - nested)
                thread.nested = nested + (now - t0)
                num_rows = batch.num_rows
                if num_rows == 0:
                    continue
                rows += num_rows
                batches += 1
                values["output_rows"] += num_rows
                values["output_batches"] += 1
                if observed:  # bytes: measured by the bus, off this thread (see RunProgress)
                    if batches == 1:
                        run.first = now
                    run.compute = values["elapsed_compute"] - compute_before
                    run.counts = (rows, batches, now, batch)
                yield batch
        except Exception as error:
            _mark_operator(error, self, partition)
            raise
        finally:
            inner.close()
            metrics.end = clock()
            if observed:
                own = values["elapsed_compute"] - compute_before
                bus.publish(OperatorFinished(self.operator_id, self.name, partition, rows,
                                             metrics.end - metrics.start, compute=own), run)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for name in self.RUNTIME_STATE:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for name, make in self.RUNTIME_STATE.items():
            setattr(self, name, make())

    def __repr__(self) -> str:
        return self.display()


_OPERATOR = "__plansight_operator__"


def _mark_operator(error: BaseException, op: ExecutionPlan, partition: int) -> None:
    """Remember on ``error`` the innermost operator it passed through (the one that raised
    it), for the message of an unexpected error."""
    if getattr(error, _OPERATOR, None) is None:
        try:
            setattr(error, _OPERATOR, f"{op.name}[{partition}]")
        except (AttributeError, TypeError):  # an exception type without a __dict__
            pass


def operator_of(error: BaseException) -> str | None:
    """The operator (``Name[partition]``) that raised ``error``, if it went through one."""
    return getattr(error, _OPERATOR, None)


def collect_partition(plan: ExecutionPlan, partition: int, ctx: TaskContext) -> pa.Table:
    """Run one partition of ``plan`` to a Table (empty table with the schema when no rows)."""
    batches = list(plan.execute(partition, ctx))
    return pa.Table.from_batches(batches, schema=plan.schema)


def displayed_operators(plan: ExecutionPlan | None) -> list[tuple[int, ExecutionPlan]]:
    """(depth, operator) in EXPLAIN order, parents first; operators that change nothing a
    reader sees (``hidden_in_display``, e.g. a projection passing every column through)
    are left out, their child taking their place. EXPLAIN, EXPLAIN ANALYZE and the monitor
    all list these."""
    rows: list[tuple[int, ExecutionPlan]] = []

    def walk(op: ExecutionPlan, depth: int) -> None:
        hidden = op.hidden_in_display()
        if not hidden:
            rows.append((depth, op))
        for child in op.children():
            walk(child, depth if hidden else depth + 1)

    if plan is not None:
        walk(plan, 0)
    return rows


_NAMED = re.compile(r"\w+: ")  # "XExec: key=value, ...": an estimate is one more item
_REFERENCE = re.compile(r"\b[A-Za-z]+\[(\d+)\]")


def referenced_ids(plan: ExecutionPlan | None) -> set[int]:
    """Operator ids that some operator's display names (``dynamic_filters=[k from
    HashJoin[24]]``): those operators show their id so a reader finds them."""
    return {int(i) for _, op in displayed_operators(plan)
            for i in _REFERENCE.findall(op.display())}


def fill_row_estimates(plan: ExecutionPlan) -> ExecutionPlan:
    """Give every operator below ``plan`` without a row estimate its derived one (inputs
    first); returns ``plan``."""
    for child in plan.children():
        fill_row_estimates(child)
    if plan.row_estimate is None:
        plan.row_estimate = plan.derived_row_estimate()
    return plan


def format_rows(rows: float) -> str:
    """A row estimate as EXPLAIN shows it: rounded, thousands separated.

    Example:
        >>> format_rows(1234.4)
        '1,234'
    """
    return f"{round(rows):,}"


def operator_label(op: ExecutionPlan, referenced: set[int] = frozenset(),
                   estimate: bool = True) -> str:
    """``op``'s EXPLAIN line: its display, then ``rows≈N`` (the estimated output rows)
    when known and ``estimate``, then ``id=N`` when another line refers to it by that id
    (``HashJoinExec: ..., id=24`` for ``dynamic_filters=[k from HashJoin[24]]``)."""
    text = op.display()
    if estimate and op.row_estimate is not None:
        text += (", " if _NAMED.match(text) else ": ") + f"rows≈{format_rows(op.row_estimate)}"
    return f"{text}, id={op.operator_id}" if op.operator_id in referenced else text


def format_physical(plan: ExecutionPlan, metrics=None, indent: int = 0) -> str:
    """DataFusion-style indented plan text with each operator's estimated rows; with
    ``metrics`` (EXPLAIN ANALYZE) inline values instead, where the estimate stands beside
    the actual output rows."""
    referenced = referenced_ids(plan)
    lines = []
    for depth, op in displayed_operators(plan):
        line = "  " * (indent + depth) + operator_label(op, referenced, metrics is None)
        if metrics is not None:
            line += ", metrics=[" + metrics(op) + "]"
        lines.append(line)
    return "\n".join(lines)
