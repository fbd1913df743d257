"""Logical plan nodes: what to compute, not how.

Each node lists its output ``columns`` (bound ``Column``s with plan-unique ids). Nodes are
frozen dataclasses; rules build new trees with ``dataclasses.replace`` / ``with_inputs``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from plansight.engine.logical.expr import AggregateCall, Column, Expr, SortKey, WindowCall

JOIN_KINDS = ("inner", "left", "right", "full", "semi", "anti", "cross")


@dataclass(frozen=True, eq=False)
class LogicalPlan:
    @property
    def columns(self) -> tuple[Column, ...]:
        raise NotImplementedError

    def inputs(self) -> tuple[LogicalPlan, ...]:
        return ()

    def with_inputs(self, inputs: tuple[LogicalPlan, ...]) -> LogicalPlan:
        return self

    def expressions(self) -> tuple[Expr, ...]:
        """Every expression the node evaluates (for rules that inspect or rewrite them)."""
        return ()

    def display(self) -> str:
        return type(self).__name__


class _SingleInput:
    """Nodes with one ``input`` field: Filter, Projection, Aggregate, Window, Sort, Limit."""

    def inputs(self):
        return (self.input,)

    def with_inputs(self, inputs):
        return replace(self, input=inputs[0])


@dataclass(frozen=True, eq=False)
class TableScan(LogicalPlan):
    """Reads ``source``; ``projection`` are the source column names read, in output order."""

    table: str
    source: Any  # engine.physical.sources.TableSource
    scan_columns: tuple[Column, ...]
    projection: tuple[str, ...]
    filters: tuple[Expr, ...] = ()  # pruning hints; the Filter above stays exact
    fetch: int | None = None

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.scan_columns

    def display(self) -> str:
        extra = f", filters=[{', '.join(map(str, self.filters))}]" if self.filters else ""
        extra += f", fetch={self.fetch}" if self.fetch is not None else ""
        return f"TableScan: {self.table} projection=[{', '.join(self.projection)}]{extra}"


@dataclass(frozen=True, eq=False)
class Values(LogicalPlan):
    """Literal rows; ``rows`` is a tuple of rows of constant expressions (``()`` columns: one
    row)."""

    value_columns: tuple[Column, ...]
    rows: tuple[tuple[Expr, ...], ...]

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.value_columns

    def display(self) -> str:
        return f"Values: {len(self.rows)} rows"


@dataclass(frozen=True, eq=False)
class Filter(_SingleInput, LogicalPlan):
    input: LogicalPlan
    predicate: Expr

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.input.columns

    def expressions(self):
        return (self.predicate,)

    def display(self) -> str:
        return f"Filter: {self.predicate}"


@dataclass(frozen=True, eq=False)
class Projection(_SingleInput, LogicalPlan):
    """Output column i is ``exprs[i]`` named ``outputs[i]``."""

    input: LogicalPlan
    exprs: tuple[Expr, ...]
    outputs: tuple[Column, ...]

    def __post_init__(self):
        assert len(self.exprs) == len(self.outputs)

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.outputs

    def expressions(self):
        return self.exprs

    def display(self) -> str:
        parts = [str(e) if isinstance(e, Column) and e.id == o.id else f"{e} AS {o.name}"
                 for e, o in zip(self.exprs, self.outputs)]
        return f"Projection: {', '.join(parts)}"


@dataclass(frozen=True, eq=False)
class Aggregate(_SingleInput, LogicalPlan):
    """GROUP BY ``group_exprs`` (named ``group_outputs``) computing ``aggregates``."""

    input: LogicalPlan
    group_exprs: tuple[Expr, ...]
    group_outputs: tuple[Column, ...]
    aggregates: tuple[AggregateCall, ...]
    aggregate_outputs: tuple[Column, ...]
    #: the empty set's global aggregate among several GROUPING SETS / ROLLUP / CUBE sets:
    #: DuckDB computes it in its grouped aggregate, which rounds AVG as a grouped one
    #: (optimizer/exact_avg.py)
    of_grouping_sets: bool = False

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.group_outputs + self.aggregate_outputs

    def expressions(self):
        return self.group_exprs + self.aggregates

    def display(self) -> str:
        return (f"Aggregate: groupBy=[{', '.join(map(str, self.group_exprs))}], "
                f"aggr=[{', '.join(map(str, self.aggregates))}]")


@dataclass(frozen=True, eq=False)
class Window(_SingleInput, LogicalPlan):
    """Appends one column per window function to the input columns."""

    input: LogicalPlan
    windows: tuple[WindowCall, ...]
    window_outputs: tuple[Column, ...]

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.input.columns + self.window_outputs

    def expressions(self):
        return self.windows

    def display(self) -> str:
        return f"Window: [{', '.join(map(str, self.windows))}]"


@dataclass(frozen=True, eq=False)
class Sort(_SingleInput, LogicalPlan):
    input: LogicalPlan
    keys: tuple[SortKey, ...]
    fetch: int | None = None

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.input.columns

    def expressions(self):
        return tuple(k.expr for k in self.keys)

    def display(self) -> str:
        fetch = f", fetch={self.fetch}" if self.fetch is not None else ""
        return f"Sort: {', '.join(map(str, self.keys))}{fetch}"


@dataclass(frozen=True, eq=False)
class Limit(_SingleInput, LogicalPlan):
    input: LogicalPlan
    skip: int = 0
    fetch: int | None = None

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.input.columns

    def display(self) -> str:
        return f"Limit: skip={self.skip}, fetch={self.fetch}"


@dataclass(frozen=True, eq=False)
class Join(LogicalPlan):
    """``kind`` in JOIN_KINDS; ``on`` equi pairs (left expr, right expr); ``filter`` residual.

    semi/anti output only the left columns. ``null_aware`` marks NOT IN semantics for anti.
    """

    left: LogicalPlan
    right: LogicalPlan
    kind: str
    on: tuple[tuple[Expr, Expr], ...] = ()
    filter: Expr | None = None
    null_aware: bool = False
    null_equal: bool = False  # INTERSECT/EXCEPT: NULL keys match each other

    def __post_init__(self):
        assert self.kind in JOIN_KINDS, self.kind

    @property
    def columns(self) -> tuple[Column, ...]:
        if self.kind in ("semi", "anti"):
            return self.left.columns
        left, right = self.left.columns, self.right.columns
        # outer joins make the non-preserved side nullable; ids stay the same
        return left + right

    def inputs(self):
        return (self.left, self.right)

    def with_inputs(self, inputs):
        return replace(self, left=inputs[0], right=inputs[1])

    def expressions(self):
        exprs = tuple(e for pair in self.on for e in pair)
        return exprs + ((self.filter,) if self.filter is not None else ())

    def display(self) -> str:
        on = ", ".join(f"{a} = {b}" for a, b in self.on)
        flt = f", filter={self.filter}" if self.filter is not None else ""
        return f"Join: {self.kind} on=[{on}]{flt}"


@dataclass(frozen=True, eq=False)
class Union(LogicalPlan):
    """UNION ALL of ``union_inputs``; input i's columns map positionally to ``outputs``."""

    union_inputs: tuple[LogicalPlan, ...]
    outputs: tuple[Column, ...]

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.outputs

    def inputs(self):
        return self.union_inputs

    def with_inputs(self, inputs):
        return replace(self, union_inputs=tuple(inputs))

    def display(self) -> str:
        return "Union"


@dataclass(frozen=True, eq=False)
class WorkTable(LogicalPlan):
    """Inside a recursive CTE's recursive term: the rows the previous iteration produced."""

    name: str
    work_columns: tuple[Column, ...]

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.work_columns

    def display(self) -> str:
        return f"WorkTable: {self.name}"


@dataclass(frozen=True, eq=False)
class RecursiveCTE(LogicalPlan):
    """WITH RECURSIVE: ``anchor``, then ``recursive`` over the previous iteration's rows
    (``work``) until an iteration adds none. ``distinct`` (UNION) keeps only rows not seen
    before; UNION ALL keeps every row."""

    anchor: LogicalPlan
    recursive: LogicalPlan
    work: WorkTable
    outputs: tuple[Column, ...]
    distinct: bool

    @property
    def columns(self) -> tuple[Column, ...]:
        return self.outputs

    def inputs(self):
        return (self.anchor, self.recursive)

    def with_inputs(self, inputs):
        return replace(self, anchor=inputs[0], recursive=inputs[1])

    def display(self) -> str:
        return f"RecursiveCTE: {self.work.name}{' distinct' if self.distinct else ''}"


def format_plan(plan: LogicalPlan, indent: int = 0) -> str:
    """Indented text of a logical plan (tests and debugging)."""
    lines = ["  " * indent + plan.display()]
    for child in plan.inputs():
        lines.append(format_plan(child, indent + 1))
    return "\n".join(lines)


def transform_plan(plan: LogicalPlan, fn) -> LogicalPlan:
    """Bottom-up rewrite of a plan tree."""
    inputs = plan.inputs()
    if inputs:
        new = tuple(transform_plan(i, fn) for i in inputs)
        if any(a is not b for a, b in zip(new, inputs)):
            plan = plan.with_inputs(new)
    return fn(plan)
