"""Bound expressions: the typed tree the binder builds and every later stage reads.

Columns are identified by a plan-unique integer ``id`` (like Spark's exprId), not by position
or name: a predicate can move across projections, joins and subquery boundaries without being
rewritten, and a correlated reference is simply a column whose id the subquery does not produce.
In record batches a column travels under its ``field_name`` (``name#id``).

Every node is a frozen dataclass, so equal expressions compare and hash equal (GROUP BY
matching, common-subexpression reuse).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from plansight.engine.logical.plan import LogicalPlan

_ids = itertools.count(1)


def next_id() -> int:
    """A fresh plan-unique column id."""
    return next(_ids)


@dataclass(frozen=True)
class Expr:
    """Base of bound expressions; every subclass has a ``type`` field (the Arrow result type)."""

    def children(self) -> tuple[Expr, ...]:
        return ()

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return self


@dataclass(frozen=True)
class Column(Expr):
    id: int
    name: str
    type: pa.DataType
    nullable: bool = True

    @property
    def field_name(self) -> str:
        return f"{self.name}#{self.id}"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Literal(Expr):
    value: Any
    type: pa.DataType

    def __str__(self) -> str:
        if self.value is None:
            return "NULL"
        if isinstance(self.value, str):
            return "'" + self.value.replace("'", "''") + "'"
        return str(self.value)


@dataclass(frozen=True)
class Call(Expr):
    """A scalar function or operator (``add``, ``eq``, ``and``, ``case``, ``like``, ...)."""

    func: str
    args: tuple[Expr, ...]
    type: pa.DataType

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, args=tuple(children))

    def __str__(self) -> str:
        if self.func in BINARY_SYMBOLS and len(self.args) == 2:
            def side(arg: Expr) -> str:
                # AND inside OR (and vice versa) reads ambiguously without parentheses
                nested = isinstance(arg, Call) and arg.func in ("and", "or") and \
                    arg.func != self.func and self.func in ("and", "or")
                return f"({arg})" if nested else str(arg)
            return f"{side(self.args[0])} {BINARY_SYMBOLS[self.func]} {side(self.args[1])}"
        return f"{self.func}({', '.join(map(str, self.args))})"


BINARY_SYMBOLS = {
    "add": "+", "subtract": "-", "multiply": "*", "divide": "/", "integer_divide": "//",
    "modulo": "%", "eq": "=", "neq": "!=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">=",
    "and": "AND", "or": "OR", "concat": "||",
}


@dataclass(frozen=True)
class Cast(Expr):
    expr: Expr
    type: pa.DataType
    safe: bool = False  # TRY_CAST: failures become NULL

    def children(self) -> tuple[Expr, ...]:
        return (self.expr,)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, expr=children[0])

    def __str__(self) -> str:
        return f"CAST({self.expr} AS {self.type})"


@dataclass(frozen=True)
class SortKey:
    expr: Expr
    descending: bool = False
    nulls_first: bool = False

    def __str__(self) -> str:
        return f"{self.expr} {'DESC' if self.descending else 'ASC'} " \
               f"NULLS {'FIRST' if self.nulls_first else 'LAST'}"


@dataclass(frozen=True)
class AggregateCall(Expr):
    """An aggregate; only valid as an output of a logical Aggregate node."""

    func: str
    args: tuple[Expr, ...]
    type: pa.DataType
    distinct: bool = False
    filter: Expr | None = None
    options: tuple[tuple[str, Any], ...] = ()  # e.g. (("separator", ","),) for string_agg

    def children(self) -> tuple[Expr, ...]:
        return self.args + ((self.filter,) if self.filter is not None else ())

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        n = len(self.args)
        return replace(self, args=tuple(children[:n]),
                       filter=children[n] if self.filter is not None else None)

    def __str__(self) -> str:
        inner = ", ".join(map(str, self.args)) or "*"
        text = f"{self.func}({'DISTINCT ' if self.distinct else ''}{inner})"
        return text + (f" FILTER (WHERE {self.filter})" if self.filter is not None else "")


@dataclass(frozen=True)
class WindowCall(Expr):
    """A window function; only valid as an output of a logical Window node."""

    func: str
    args: tuple[Expr, ...]
    type: pa.DataType
    partition_by: tuple[Expr, ...] = ()
    order_by: tuple[SortKey, ...] = ()
    frame: Any = None  # engine.functions.window.FrameSpec, None = SQL default
    distinct: bool = False
    filter: Expr | None = None
    ignore_nulls: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.args + self.partition_by + tuple(k.expr for k in self.order_by)
                + ((self.filter,) if self.filter is not None else ()))

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        a, p, o = len(self.args), len(self.partition_by), len(self.order_by)
        keys = tuple(replace(k, expr=e) for k, e in zip(self.order_by, children[a + p:a + p + o]))
        return replace(self, args=tuple(children[:a]), partition_by=tuple(children[a:a + p]),
                       order_by=keys,
                       filter=children[a + p + o] if self.filter is not None else None)

    def __str__(self) -> str:
        spec = []
        if self.partition_by:
            spec.append("PARTITION BY " + ", ".join(map(str, self.partition_by)))
        if self.order_by:
            spec.append("ORDER BY " + ", ".join(map(str, self.order_by)))
        if self.frame is not None:
            spec.append(str(self.frame))
        return f"{self.func}({', '.join(map(str, self.args))}) OVER ({' '.join(spec)})"


@dataclass(frozen=True)
class SubqueryExpr(Expr):
    """A subquery used as a value: ``kind`` is scalar, exists or in.

    Removed by the decorrelation rule before physical planning; ``plan`` may reference outer
    columns by id (correlation).
    """

    kind: str  # "scalar" | "exists" | "in"
    plan: LogicalPlan = field(compare=False)
    type: pa.DataType
    negated: bool = False
    needle: Expr | None = None  # the left side of IN
    plan_key: int = field(default_factory=next_id)  # identity for eq/hash

    def children(self) -> tuple[Expr, ...]:
        return (self.needle,) if self.needle is not None else ()

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, needle=children[0]) if self.needle is not None else self

    def __str__(self) -> str:
        neg = "NOT " if self.negated else ""
        if self.kind == "in":
            return f"{self.needle} {neg}IN (<subquery>)"
        return f"{neg}EXISTS (<subquery>)" if self.kind == "exists" else "(<scalar subquery>)"


# ----------------------------------------------------------------------------- helpers

def walk(expr: Expr):
    """Pre-order iteration over ``expr`` and its descendants."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children()))


def transform(expr: Expr, fn) -> Expr:
    """Bottom-up rewrite: ``fn`` gets each node with already-rewritten children."""
    children = expr.children()
    if children:
        new = tuple(transform(c, fn) for c in children)
        if any(a is not b for a, b in zip(new, children)):
            expr = expr.with_children(new)
    return fn(expr)


def columns_of(expr: Expr) -> set[int]:
    """Ids of the columns ``expr`` reads (not looking inside subquery plans)."""
    return {e.id for e in walk(expr) if isinstance(e, Column)}


def split_conjunction(expr: Expr | None) -> list[Expr]:
    """``a AND (b AND c)`` -> ``[a, b, c]``."""
    if expr is None:
        return []
    if isinstance(expr, Call) and expr.func == "and":
        return [p for arg in expr.args for p in split_conjunction(arg)]
    return [expr]


def conjunction(parts: list[Expr]) -> Expr | None:
    """The AND of ``parts`` (None when empty)."""
    result = None
    for part in parts:
        result = part if result is None else Call("and", (result, part), pa.bool_())
    return result


def replace_columns(expr: Expr, mapping: dict[int, Expr]) -> Expr:
    """Substitute columns by id (used to push predicates through projections)."""
    return transform(expr, lambda e: mapping.get(e.id, e) if isinstance(e, Column) else e)


def is_volatile(expr: Expr) -> bool:
    """Whether ``expr`` may give a different value on each evaluation (random())."""
    return any(isinstance(e, Call) and e.func in ("random", "uuid") for e in walk(expr))
