"""Planning a logical Window node: which window executor, and which ordering it requires.

    input already sorted by (partition keys, ORDER BY) and partitioned by the keys:
      every frame ends a bounded distance ahead  -> BoundedWindowAggExec (emits rows as
                                                    soon as their frames are complete)
      otherwise, or the ORDER BY is reversed, or
      the keys come permuted                     -> WindowAggExec (partition-at-a-time;
                                                    a reversed window reads backwards)
    otherwise                                    -> HashWindowAggExec (integer codes and
                                                    one permutation; rows stay in place)

SQL promises no row order without ORDER BY, so the sort-free HashWindowAggExec is the
default: sorting the whole input (100-byte keys and all payload columns) only to evaluate a
window column costs several times more than permuting integers. An input that arrives
sorted streams through the sorted executor instead, which needs no buffer beyond the open
partition. Window nodes stacked on the same partition keys share one HashWindowAggExec, and
with it the partition codes and, for compatible orderings, the permutation.

The windows of one SELECT (one logical Window node per specification) are planned
together. In the sorted path, specifications on the same partition keys whose ORDER BY is a
prefix of the longest one, or of its reverse, share one sort by the longest ordering; a
reversed one (``lag`` over ``ORDER BY x DESC`` on rows sorted by ``x``) reads each partition
backwards, keeping the NULL run of the first key in place when the NULL placement says so.

The input's order is read through its equivalences (equivalence.py): rows sorted by
``t2.x`` after ``ON t1.x = t2.x`` are sorted by ``t1.x``, and a constant key (``WHERE a = 5``)
needs no order, so rows sorted by ``b`` serve ``PARTITION BY a, b``. The executor is given
the input's order restated in the window's own columns (input_ordering_for).

Windows that see the order of tied rows (row_number() OVER (PARTITION BY g), lag, ROWS
frames; window_shape.sees_tie_order) see them in the source's order under every executor,
so a query has one answer at every partition count. The hash executor permutes stably over
input merged in source order; the sorted executors sort by a source position appended
below them (SourcePositionExec) as the last key, dropped above them. Such a window shares
a sort only with windows of its ORDER BY or its reverse (a longer one would order its
ties); read backwards, it reads each group of ties forwards.

The executor declares its requirements; EnsureRequirements adds only what is missing.
The ``window_executor`` option forces an executor: "hash", "sorted" (sorts below the
streaming executors) or "partition" (sorts below WindowAggExec only); "auto" chooses.
"""

from __future__ import annotations

import pyarrow as pa

from plansight.engine.exec.context import SessionConfig
from plansight.engine.logical import plan as lp
from plansight.engine.logical.expr import Column, SortKey, WindowCall
from plansight.engine.physical.equivalence import Equivalences
from plansight.engine.physical.plan import (
    SINGLE_PARTITION,
    ExecutionPlan,
    hash_distribution,
    ordering_satisfies,
)
from plansight.engine.physical.projection import ProjectionExec
from plansight.engine.physical.source_position import SourcePositionExec
from plansight.engine.physical.windows.bounded_window_agg import (
    BoundedWindowAggExec,
    bounded_supported,
)
from plansight.engine.physical.windows.chain import group_windows
from plansight.engine.physical.windows.window_agg import WindowAggExec
from plansight.engine.physical.windows.window_hash_agg import HashWindowAggExec
from plansight.engine.physical.windows.window_shape import sees_tie_order, window_direction

#: the row's position in its source, a last sort key for windows that see tie order
SOURCE_POSITION = Column(-1, "__source_position", pa.int64(), False)


def stacked_windows(node: lp.Window) -> tuple[list[WindowCall], list[Column], lp.LogicalPlan]:
    """The windows of ``node`` and of the Window nodes right below it that it does not read,
    bottom first, and the input below them all.

    The binder makes one Window node per (PARTITION BY, ORDER BY); planned together, the
    windows of one SELECT share operators and sorts.
    """
    nodes = [node]
    while isinstance(nodes[-1].input, lp.Window) and \
            not _reads(nodes, nodes[-1].input.window_outputs):
        nodes.append(nodes[-1].input)
    windows = [w for n in reversed(nodes) for w in n.windows]
    outputs = [o for n in reversed(nodes) for o in n.window_outputs]
    return windows, outputs, nodes[-1].input


def _reads(nodes: list[lp.Window], columns) -> bool:
    produced = {c.field_name for c in columns}
    return any(_reads_columns(n.windows, produced) for n in nodes)


def plan_window(windows: list[WindowCall], outputs: list[Column], child: ExecutionPlan,
                config: SessionConfig) -> ExecutionPlan:
    """The window operators computing ``windows`` (columns ``outputs``) over ``child``."""
    groups = group_windows(windows)
    executor = config.window_executor
    if executor in ("sorted", "partition"):
        return _plan_sorted_chains(windows, outputs, list(groups.values()), child, executor)
    plan = child
    for indices in groups.values():
        plan = _plan_group([windows[i] for i in indices], [outputs[i] for i in indices], plan,
                           executor)
    return plan


def _plan_sorted_chains(all_windows: list[WindowCall], all_outputs: list[Column],
                        groups: list[list[int]], child: ExecutionPlan,
                        executor: str) -> ExecutionPlan:
    """Sorted executors, one sort per chain of compatible orderings.

    Groups on the same partition keys whose ORDER BY is a prefix of the longest one, or of
    its reverse, form a chain. The longest ordering is planned first (lowest), so the sort
    EnsureRequirements adds below it also satisfies every shorter one stacked above.
    """
    chains: list[tuple[WindowCall, list[list[int]]]] = []  # (longest window, its groups)
    for indices in sorted(groups, key=lambda g: -len(all_windows[g[0]].order_by)):
        window = all_windows[indices[0]]
        # windows that see tie order share only a sort that leaves their ties to the position
        # (read backwards, WindowAggExec keeps each group of ties forwards)
        sees_ties = any(sees_tie_order(all_windows[i]) for i in indices)
        for longest, members in chains:
            direction = window_direction(window, longest.order_by)
            if sees_ties and len(window.order_by) != len(longest.order_by):
                continue
            if set(longest.partition_by) == set(window.partition_by) and direction is not None:
                members.append(indices)
                break
        else:
            chains.append((window, [indices]))
    # numbered once below every chain: a chain above another sees that one's sorted output
    position = SOURCE_POSITION if any(map(sees_tie_order, all_windows)) else None
    plan = child if position is None else SourcePositionExec(child, position)
    for longest, members in chains:
        plan = _plan_chain(longest, [[all_windows[i] for i in m] for m in members],
                           [[all_outputs[i] for i in m] for m in members], plan, executor,
                           position)
    return plan if position is None else _without_position(plan)


def _plan_chain(longest: WindowCall, members: list[list[WindowCall]],
                outputs: list[list[Column]], child: ExecutionPlan, executor: str,
                position: Column | None) -> ExecutionPlan:
    """Streaming executors for the members that can stream, one WindowAggExec for the rest;
    whichever holds the longest ordering goes lowest, so one sort below serves them all."""
    tiebreak: tuple[SortKey, ...] = ()
    if _sorted_executor(members[0], outputs[0], child, executor) is not None:
        # the input already serves the chain: its ordering, in the windows' columns
        have = input_ordering_for(longest, child.output_ordering() or (), child.equivalences())
    else:
        have = tuple([SortKey(e) for e in longest.partition_by] + list(longest.order_by))
        if position is not None and any(map(sees_tie_order, sum(members, []))):
            tiebreak = (SortKey(position),)
    streaming, rest_windows, rest_outputs = [], [], []
    for windows, columns in zip(members, outputs):
        if isinstance(_sorted_executor(windows, columns, child, executor, have),
                      BoundedWindowAggExec):
            streaming.append((windows, columns))
        else:
            rest_windows += windows
            rest_outputs += columns
    width = len(longest.partition_by)

    def partition_at_a_time(below: ExecutionPlan) -> ExecutionPlan:
        return WindowAggExec(rest_windows, rest_outputs, below,
                             order_keys=tuple(have[width:]) + tiebreak,
                             partition_ordering=have[:width])

    plan = child
    if rest_windows and members[0][0] in rest_windows:
        plan = partition_at_a_time(plan)
    for windows, columns in streaming:
        # the position orders only ties of the full ordering (a shorter one is served anyway)
        full = len(windows[0].order_by) == len(longest.order_by)
        plan = BoundedWindowAggExec(windows, columns, plan, partition_ordering=have[:width],
                                    tiebreak=tiebreak if full else ())
    if rest_windows and members[0][0] not in rest_windows:
        plan = partition_at_a_time(plan)
    return plan


def _without_position(plan: ExecutionPlan) -> ExecutionPlan:
    """``plan``'s columns but the source position."""
    kept = []
    for field in plan.schema:
        if field.name == SOURCE_POSITION.field_name:
            continue
        name, _, column_id = field.name.rpartition("#")
        kept.append(Column(int(column_id), name, field.type, field.nullable))
    return ProjectionExec(kept, kept, plan)


def _plan_group(windows: list[WindowCall], outputs: list[Column],
                child: ExecutionPlan, executor: str) -> ExecutionPlan:
    if executor != "hash":
        sorted_plan = _sorted_executor(windows, outputs, child, executor)
        if sorted_plan is not None:
            return sorted_plan
    if isinstance(child, HashWindowAggExec) and _can_merge(child, windows):
        return HashWindowAggExec(child.windows + windows, child.outputs + outputs, child.input)
    return HashWindowAggExec(windows, outputs, child)


def _sorted_executor(windows: list[WindowCall], outputs: list[Column],
                     child: ExecutionPlan, executor: str, have=None) -> ExecutionPlan | None:
    """A sorted executor when ``child`` already delivers the rows in a usable order, or,
    given ``have``, when the order ``have`` that a sort below will establish serves it."""
    partition_by = list(windows[0].partition_by)
    equivalences = child.equivalences()
    if have is None:
        distribution = hash_distribution(partition_by) if partition_by else SINGLE_PARTITION
        # partitions that are each sorted (a sorted source split into parts) are merged in
        # order into one; a hash shuffle of them would cost more than the hash executor
        if not distribution.satisfied_by(child.output_partitioning(), equivalences) and \
                (partition_by or not child.output_ordering()):
            return None
        have = input_ordering_for(windows[0], child.output_ordering() or (), equivalences)
        if have is None:
            return None
    width = len(partition_by)
    # any permutation of the partition keys, in any direction, groups the partitions
    if len(have) < width or {k.expr for k in have[:width]} != set(partition_by):
        return None
    order_keys = have[width:]
    directions = [window_direction(w, order_keys) for w in windows]
    if not all(directions):
        return None
    partition_ordering = have[:width]
    bounded = tuple(partition_ordering) + tuple(windows[0].order_by)
    if executor != "partition" and all(bounded_supported(w) for w in windows) and \
            all(w.order_by == windows[0].order_by for w in windows) and \
            ordering_satisfies(have, bounded, equivalences):
        return BoundedWindowAggExec(windows, outputs, child,
                                    partition_ordering=partition_ordering)
    return WindowAggExec(windows, outputs, child, order_keys=order_keys,
                         partition_ordering=partition_ordering)


def input_ordering_for(window: WindowCall, ordering, equivalences: Equivalences
                       ) -> tuple[SortKey, ...] | None:
    """The input ``ordering`` restated in ``window``'s columns: the partition keys (any
    permutation and direction), then the order keys; None when it does not group the
    window's partitions.

    An input sorted by a column known equal to a partition or order key (``t2.x`` after
    ``ON t1.x = t2.x``) is sorted by that key; a constant key (``WHERE a = 5``) is sorted in
    any direction, so rows sorted by ``b`` serve ``PARTITION BY a, b`` or ``ORDER BY a, b``.
    The result orders rows exactly as ``ordering`` does, so the executor's requirement
    (stated in the window's columns) is met by the input as it is.

    Example:
        >>> import pyarrow as pa
        >>> x, y = Column(1, "x", pa.int64()), Column(2, "y", pa.int64())
        >>> w = WindowCall("rank", (), pa.int64(), (x,), (SortKey(y),))
        >>> [str(k) for k in input_ordering_for(w, (SortKey(y),),
        ...                                     Equivalences(constants=[x]))]
        ['x ASC NULLS LAST', 'y ASC NULLS LAST']
    """
    keys = equivalences.significant_keys(ordering)
    constant = equivalences.is_constant
    classes: dict = {}  # representative -> the partition keys of that class
    partition_ordering = [SortKey(e) for e in window.partition_by if constant(e)]
    for e in window.partition_by:
        if not constant(e):
            classes.setdefault(equivalences.representative(e), []).append(e)
    prefix = keys[:len(classes)]
    if {equivalences.representative(k.expr) for k in prefix} != set(classes):
        return None
    for key in prefix:
        partition_ordering += [SortKey(e, key.descending, key.nulls_first)
                               for e in classes[equivalences.representative(key.expr)]]
    # the window's ORDER BY, matched key by key against the rest of the input ordering;
    # a key that orders nothing here (constant, or a class already sorted by) is kept as the
    # window states it
    rest, order_keys = list(keys[len(classes):]), []
    seen = set(classes)
    for wanted in window.order_by:
        rep = equivalences.representative(wanted.expr)
        if constant(wanted.expr) or rep in seen:
            order_keys.append(wanted)
            continue
        if not rest or not equivalences.same(rest[0].expr, wanted.expr):
            break
        key = rest.pop(0)
        seen.add(rep)
        order_keys.append(SortKey(wanted.expr, key.descending, key.nulls_first))
    else:
        order_keys += rest
    return tuple(partition_ordering + order_keys)


def _can_merge(child: HashWindowAggExec, windows: list[WindowCall]) -> bool:
    """Same partition keys, and the new windows do not read the child's window columns."""
    if set(child.windows[0].partition_by) != set(windows[0].partition_by):
        return False
    return not _reads_columns(windows, {o.field_name for o in child.outputs})


def _reads_columns(windows, field_names: set[str]) -> bool:
    for window in windows:
        stack = list(window.children())
        while stack:
            expr = stack.pop()
            if isinstance(expr, Column) and expr.field_name in field_names:
                return True
            stack.extend(expr.children())
    return False
