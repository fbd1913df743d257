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
import math
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
        return sql_literal(self.value, self.type)

    # The same literal written twice is one expression: 'nan'::DOUBLE in a GROUP BY key and
    # in the SELECT list must match, though two NaN floats compare unequal in Python
    def __eq__(self, other) -> bool:
        return type(other) is type(self) and self.type == other.type and \
            _identity(self.value) == _identity(other.value)

    def __hash__(self) -> int:
        try:
            return hash((_identity(self.value), self.type))
        except TypeError:  # a value with no hashable identity (a map, ...)
            return hash(self.type)


def _identity(value: Any) -> Any:
    """``value`` with NaN replaced by a marker that equals itself, nested values as tuples."""
    if isinstance(value, float) and value != value:
        return _NAN
    if isinstance(value, (list, tuple)):
        return tuple(_identity(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _identity(v)) for k, v in value.items())
    return value


_NAN = ("NaN",)


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
        """The call as SQL, parenthesized by precedence: printed and parsed back, it binds to
        this same expression (``a * (1 - b)`` stays ``a * (1 - b)``)."""
        args, func = self.args, self.func
        if func in BINARY_SYMBOLS and len(args) == 2:
            mine = PRECEDENCE[func]
            # left-associative: an equal-precedence right operand needs parentheses
            return f"{_operand(args[0], mine)} {BINARY_SYMBOLS[func]} " \
                   f"{_operand(args[1], mine + 1)}"
        if func in ("and", "or") and len(args) > 2:
            return f" {func.upper()} ".join(_operand(a, PRECEDENCE[func] + 1) for a in args)
        if func == "not" and len(args) == 1:
            return f"NOT {_operand(args[0], PRECEDENCE['not'])}"
        if func == "negate" and len(args) == 1:
            return f"-{_operand(args[0], UNARY_MINUS + 1)}"
        if func in ("is_null", "is_not_null") and len(args) == 1:
            suffix = "IS NULL" if func == "is_null" else "IS NOT NULL"
            return f"{_operand(args[0], PRECEDENCE['eq'] + 1)} {suffix}"
        if func in ("like", "ilike") and len(args) == 2:
            return f"{_operand(args[0], PRECEDENCE['eq'] + 1)} {func.upper()} " \
                   f"{_operand(args[1], PRECEDENCE['eq'] + 1)}"
        if func == "in_list" and len(args) > 1:
            return f"{_operand(args[0], PRECEDENCE['eq'] + 1)} IN " \
                   f"({', '.join(map(str, args[1:]))})"
        if func == "case" and len(args) % 2 == 1:
            whens = " ".join(f"WHEN {c} THEN {v}" for c, v in zip(args[0:-1:2], args[1:-1:2]))
            return f"CASE {whens} ELSE {args[-1]} END"
        return f"{func}({', '.join(map(str, args))})"


BINARY_SYMBOLS = {
    "add": "+", "subtract": "-", "multiply": "*", "divide": "/", "integer_divide": "//",
    "modulo": "%", "eq": "=", "neq": "!=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">=",
    "and": "AND", "or": "OR", "concat_strict": "||",
}

# SQL precedence, loosest first (PostgreSQL's and DuckDB's order); a higher number binds tighter
PRECEDENCE = {
    "or": 1, "and": 2, "not": 3,
    "eq": 4, "neq": 4, "lt": 4, "lte": 4, "gt": 4, "gte": 4,
    "concat_strict": 5,
    "add": 6, "subtract": 6,
    "multiply": 7, "divide": 7, "integer_divide": 7, "modulo": 7,
}
UNARY_MINUS = 8
_POSTFIX_OR_INFIX = {"is_null": 4, "is_not_null": 4, "like": 4, "ilike": 4, "in_list": 4}


def _precedence(expr: Expr) -> int:
    """How tightly ``expr``'s printed form binds (atoms: columns, literals, calls, tightest)."""
    if isinstance(expr, Call):
        if expr.func in PRECEDENCE and (len(expr.args) == 2 or expr.func in ("and", "or")) \
                or expr.func == "not":
            return PRECEDENCE[expr.func]
        if expr.func == "negate":
            return UNARY_MINUS
        return _POSTFIX_OR_INFIX.get(expr.func, 100)
    if isinstance(expr, Literal) and isinstance(expr.value, (int, float)) and \
            not isinstance(expr.value, bool) and expr.value < 0:
        return UNARY_MINUS  # -1 prints like a unary minus
    return 100


def _operand(expr: Expr, needed: int) -> str:
    """``expr`` printed as an operand of an operator that binds at ``needed``; an AND inside
    an OR is parenthesized too (correct without, but it reads ambiguously)."""
    text = str(expr)
    and_in_or = needed in (PRECEDENCE["or"], PRECEDENCE["or"] + 1) and \
        isinstance(expr, Call) and expr.func == "and"
    return f"({text})" if _precedence(expr) < needed or and_in_or else text


def sql_value(value: Any) -> str:
    """A Python value (from statistics or a filter's bounds) as a SQL literal of its type.

    Example:
        >>> import datetime
        >>> sql_value(datetime.date(1994, 1, 1)), sql_value(3), sql_value("x")
        ("DATE '1994-01-01'", '3', "'x'")
    """
    try:
        type_ = pa.scalar(value).type
    except (pa.ArrowException, TypeError, ValueError):
        return str(value)
    return sql_literal(value, type_)


_SQL_TYPES = {
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
    pa.uint8(): "UTINYINT", pa.uint16(): "USMALLINT", pa.uint32(): "UINTEGER",
    pa.uint64(): "UBIGINT", pa.float32(): "REAL", pa.float64(): "DOUBLE",
    pa.string(): "VARCHAR", pa.large_string(): "VARCHAR", pa.bool_(): "BOOLEAN",
    pa.date32(): "DATE", pa.binary(): "BLOB", pa.null(): "NULL",
    pa.month_day_nano_interval(): "INTERVAL", pa.time64("us"): "TIME",
}


def sql_type(type_: pa.DataType) -> str:
    """The SQL name of an Arrow type (``DECIMAL(12, 2)``, ``TIMESTAMP``, ``VARCHAR``).

    Example:
        >>> sql_type(pa.decimal128(12, 2)), sql_type(pa.timestamp("us")), sql_type(pa.string())
        ('DECIMAL(12, 2)', 'TIMESTAMP', 'VARCHAR')
    """
    if type_ in _SQL_TYPES:
        return _SQL_TYPES[type_]
    if pa.types.is_decimal(type_):
        return f"DECIMAL({type_.precision}, {type_.scale})"
    if pa.types.is_timestamp(type_):
        return "TIMESTAMPTZ" if type_.tz else "TIMESTAMP"
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return f"{sql_type(type_.value_type)}[]"
    return str(type_).upper()


def sql_literal(value: Any, type_: pa.DataType) -> str:
    """``value`` written as a SQL literal of ``type_`` (never a Python repr).

    Example:
        >>> import datetime
        >>> sql_literal(datetime.date(1994, 1, 1), pa.date32()), sql_literal("it's", pa.string())
        ("DATE '1994-01-01'", "'it''s'")
        >>> sql_literal(True, pa.bool_()), sql_literal(None, pa.int64())
        ('TRUE', 'NULL')
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if pa.types.is_date(type_):
        return f"DATE '{value.isoformat()}'"
    if pa.types.is_timestamp(type_):
        text = value.isoformat(sep=" ") if hasattr(value, "isoformat") else str(value)
        return f"{sql_type(type_)} '{text}'"
    if pa.types.is_time(type_):
        return f"TIME '{value.isoformat()}'"
    if pa.types.is_interval(type_):
        months, days, nanoseconds = value
        parts = [f"{months} months" if months else "", f"{days} days" if days else "",
                 f"{nanoseconds // 1000} microseconds" if nanoseconds else ""]
        return f"INTERVAL '{' '.join(p for p in parts if p) or '0 days'}'"
    if isinstance(value, float) and not math.isfinite(value):
        return f"CAST('{value}' AS DOUBLE)"
    if isinstance(value, bytes):
        return "'" + "".join(f"\\x{b:02x}" for b in value) + "'::BLOB"
    return str(value)


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
        return f"{'TRY_CAST' if self.safe else 'CAST'}({self.expr} AS {sql_type(self.type)})"


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
