"""Binding of scalar SQL expressions: sqlglot nodes -> typed ``Literal`` / ``Call`` / ``Cast``.

The binder proper resolves columns, stars, subqueries, aggregates and windows, and hands every
other node to ``bind_scalar_node``. This module only translates sqlglot's vocabulary (node
classes, keyword syntax such as ``EXTRACT(year FROM x)`` or ``TRIM(LEADING 'x' FROM s)``) into
DuckDB function names and arguments; the typing rules live in ``engine.functions.scalar``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import sqlglot.expressions as exp

from plansight.engine.errors import NotSupportedError, PlanError
from plansight.engine.functions.scalar import (
    BINDERS,
    cast_expr,
    number_literal,
    resolve_function,
    resolve_operator,
)
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.conditional import bind_case
from plansight.engine.functions.scalar.temporal_values import interval_literal, parse_interval_text
from plansight.engine.logical.expr import Expr, Literal

Bind = Callable[[exp.Expression], Expr]

_BINARY = {
    exp.Add: "add", exp.Sub: "subtract", exp.Mul: "multiply", exp.Div: "divide",
    exp.IntDiv: "integer_divide", exp.Mod: "modulo", exp.DPipe: "concat_operator",
    exp.EQ: "eq", exp.NEQ: "neq", exp.LT: "lt", exp.LTE: "lte", exp.GT: "gt", exp.GTE: "gte",
    exp.And: "and", exp.Or: "or", exp.NullSafeEQ: "is_not_distinct_from",
    exp.NullSafeNEQ: "is_distinct_from", exp.Like: "like", exp.ILike: "ilike",
    exp.SimilarTo: "similar_to", exp.Glob: "glob",
}

# sqlglot node class -> (DuckDB function name, argument keys in call order)
_FUNCTIONS: dict[type, tuple[str, tuple[str, ...]]] = {
    exp.Pow: ("power", ("this", "expression")),
    exp.Substring: ("substring", ("this", "start", "length")),
    exp.StrPosition: ("strpos", ("this", "substr")),
    exp.Round: ("round", ("this", "decimals")),
    exp.Ceil: ("ceil", ("this", "decimals")),
    exp.Floor: ("floor", ("this", "decimals")),
    exp.TimeToStr: ("strftime", ("this", "format")),
    exp.StrToTime: ("strptime", ("this", "format")),
    exp.TimeToUnix: ("epoch", ("this",)),
    exp.DateFromParts: ("make_date", ("year", "month", "day")),
    exp.SplitPart: ("split_part", ("this", "delimiter", "part_index")),
    exp.RegexpReplace: ("regexp_replace", ("this", "expression", "replacement", "modifiers")),
    exp.Left: ("left", ("this", "expression")),
    exp.Right: ("right", ("this", "expression")),
    exp.Repeat: ("repeat", ("this", "times")),
    exp.Rand: ("random", ()),
    exp.CurrentDate: ("current_date", ()),
    exp.CurrentTimestamp: ("now", ()),
    exp.Length: ("length", ("this",)),
    exp.StartsWith: ("starts_with", ("this", "expression")),
    exp.EndsWith: ("ends_with", ("this", "expression")),
    exp.Contains: ("contains", ("this", "expression")),
    exp.Replace: ("replace", ("this", "expression", "replacement")),
    exp.Reverse: ("reverse", ("this",)),
    exp.MD5: ("md5", ("this",)),
    exp.Typeof: ("typeof", ("this",)),
    exp.DayOfWeek: ("dayofweek", ("this",)),
    exp.DayOfWeekIso: ("isodow", ("this",)),
    exp.DayOfYear: ("dayofyear", ("this",)),
    exp.DayOfMonth: ("day", ("this",)),
    exp.Log: ("log", ("this", "expression")),
    exp.Ln: ("ln", ("this",)),
    exp.Trunc: ("trunc", ("this", "decimals")),
}


def bind_scalar_node(node: exp.Expression, bind: Bind, options: Mapping[str, Any]) -> Expr:
    """Bind one scalar sqlglot node; ``bind`` binds its children (columns, subqueries, ...).

    Raises PlanError for type mismatches and unknown functions, NotSupportedError for valid
    SQL that plansight does not implement.

    Example:
        >>> import sqlglot
        >>> node = sqlglot.parse_one("SELECT 1 + 2.5", read="duckdb").expressions[0]
        >>> e = bind_scalar_node(node, lambda n: bind_scalar_node(n, None, {}), {})
        >>> str(e), e.type
        ('1 + 2.5', Decimal128Type(decimal128(12, 1)))
    """
    def child(n: exp.Expression) -> Expr:
        return bind(n) if bind is not None else bind_scalar_node(n, bind, options)

    def operator(name: str, *args: Expr) -> Expr:
        return resolve_operator(name, list(args), options)

    def function(name: str, args: list[exp.Expression]) -> Expr:
        return resolve_function(name, [child(a) for a in args], options)

    if isinstance(node, exp.Paren):
        return child(node.this)
    if isinstance(node, exp.Alias):
        return child(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return Literal(node.this, pa.string())
        return number_literal(node.this)
    if isinstance(node, exp.Boolean):
        return Literal(bool(node.this), pa.bool_())
    if isinstance(node, exp.Null):
        return Literal(None, pa.null())
    if isinstance(node, exp.Cast):  # also TryCast
        target = sql_type_to_arrow(node.to)
        safe = isinstance(node, exp.TryCast) or bool(node.args.get("safe"))
        return cast_expr(child(node.this), target, safe=safe)
    if isinstance(node, exp.Interval):
        return _bind_interval(node, child, options)
    if isinstance(node, exp.Escape):
        like = node.this
        if not isinstance(like, (exp.Like, exp.ILike)):
            raise NotSupportedError("ESCAPE outside LIKE / ILIKE is not supported yet")
        result = operator(_BINARY[type(like)], child(like.this), child(like.expression),
                          child(node.expression))
        return operator("not", result) if like.args.get("negate") else result
    if type(node) in _BINARY:
        name = _BINARY[type(node)]
        if name in ("and", "or"):
            return operator(name, *_flatten(node, type(node), child))
        result = operator(name, child(node.this), child(node.expression))
        return operator("not", result) if node.args.get("negate") else result
    if isinstance(node, exp.Neg):
        return operator("negate", child(node.this))
    if isinstance(node, exp.Not):
        inner = node.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return operator("is_not_null", child(inner.this))
        return operator("not", child(inner))
    if isinstance(node, exp.Is):
        target = node.expression
        if isinstance(target, exp.Null):
            return operator("is_null", child(node.this))
        return operator("is_not_distinct_from", child(node.this), child(target))
    if isinstance(node, exp.In):
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise NotSupportedError("IN with a subquery must be bound by the query binder")
        return operator("in_list", child(node.this), *[child(e) for e in node.expressions])
    if isinstance(node, exp.Between):
        return operator("between", child(node.this), child(node.args["low"]),
                        child(node.args["high"]))
    if isinstance(node, exp.Case):
        return _bind_case(node, child, options)
    if isinstance(node, exp.If):
        default = node.args.get("false")
        return bind_case([child(node.this)], [child(node.args["true"])],
                         child(default) if default is not None else None)
    if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
        name = {exp.Coalesce: "coalesce", exp.Greatest: "greatest", exp.Least: "least"}[
            type(node)]
        return function(name, [node.this, *node.expressions])
    if isinstance(node, exp.Nullif):
        return function("nullif", [node.this, node.expression])
    if isinstance(node, exp.Extract):
        unit = _unit_name(node.this)
        return resolve_function("date_part", [Literal(unit, pa.string()),
                                              child(node.expression)], options)
    if isinstance(node, exp.Trim):
        position = (node.args.get("position") or "BOTH").upper()
        name = {"BOTH": "trim", "LEADING": "ltrim", "TRAILING": "rtrim"}[position]
        args = [node.this] + ([node.expression] if node.expression else [])
        return function(name, args)
    if isinstance(node, exp.Pad):
        name = "lpad" if node.args.get("is_left") else "rpad"
        args = [node.this, node.expression]
        if node.args.get("fill_pattern") is not None:
            args.append(node.args["fill_pattern"])
        return function(name, args)
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
        unit = _unit_name(node.args.get("unit"))
        return resolve_function("date_trunc", [Literal(unit, pa.string()), child(node.this)],
                                options)
    if isinstance(node, exp.DateDiff):
        unit = _unit_name(node.args.get("unit")) if node.args.get("unit") else "day"
        return resolve_function("date_diff", [Literal(unit, pa.string()),
                                              child(node.expression), child(node.this)], options)
    if isinstance(node, exp.DateAdd):
        return operator("add", child(node.this), child(node.expression))
    if isinstance(node, exp.DateSub):
        return operator("subtract", child(node.this), child(node.expression))
    if isinstance(node, exp.UnixToTime):
        scale = node.args.get("scale")
        if scale is not None and not (isinstance(scale, exp.Literal) and not scale.is_string):
            return function("strptime", [node.this, scale])  # to_timestamp(text, format)
        args = [node.this] + ([scale] if scale is not None else [])
        name = "to_timestamp" if scale is None else "epoch_ms"
        if scale is not None and str(scale.this) != "3":
            raise NotSupportedError(f"to_timestamp with scale {scale.this} is not supported")
        return function(name, args[:1])
    if isinstance(node, exp.ConcatWs):  # before Concat: ConcatWs subclasses it
        return function("concat_ws", list(node.expressions))
    if isinstance(node, exp.Concat):
        return function("concat", list(node.expressions))
    if isinstance(node, exp.RegexpLike):
        args = [node.this, node.expression] + ([node.args["flag"]] if node.args.get("flag")
                                               else [])
        return function("regexp_matches", args)
    if isinstance(node, exp.Chr):
        return function("chr", list(node.expressions))
    if isinstance(node, exp.Initcap):
        return function("initcap", [node.this])
    if isinstance(node, exp.Array):
        raise NotSupportedError("list values ([...]) are not supported yet")
    if isinstance(node, exp.Anonymous):
        return function(str(node.this), list(node.expressions))
    if type(node) in _FUNCTIONS:
        name, keys = _FUNCTIONS[type(node)]
        args = [node.args[k] for k in keys if node.args.get(k) is not None]
        return function(name, args)
    if isinstance(node, exp.Func):
        name = node.sql_name().lower()
        if name not in BINDERS and name.replace("_", "") in BINDERS:
            name = name.replace("_", "")  # sqlglot's WEEK_OF_YEAR is DuckDB's weekofyear
        return function(name, _generic_args(node))
    if isinstance(node, (exp.Subquery, exp.Exists, exp.Select)):
        raise NotSupportedError("subqueries must be bound by the query binder")
    raise NotSupportedError(f"expression '{node.sql(dialect='duckdb')}' "
                            f"({type(node).__name__}) is not supported yet")


# ----------------------------------------------------------------------------- pieces

def _flatten(node: exp.Expression, kind: type, child) -> list[Expr]:
    """``a AND b AND c`` as one n-ary call (sqlglot nests them left-deep)."""
    out: list[Expr] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is kind:
            stack.extend([current.expression, current.this])
        else:
            out.append(child(current))
    return out


def _generic_args(node: exp.Func) -> list[exp.Expression]:
    args: list[exp.Expression] = []
    for key in node.arg_types:
        value = node.args.get(key)
        if value is None:
            continue
        if isinstance(value, list):
            args.extend(v for v in value if isinstance(v, exp.Expression))
        elif isinstance(value, exp.Expression):
            args.append(value)
    return args


def _unit_name(unit: exp.Expression | str | None) -> str:
    if unit is None:
        raise PlanError("missing date part")
    if isinstance(unit, exp.Expression):
        unit = unit.name if not isinstance(unit, exp.Literal) else unit.this
    return str(unit).lower()


def _bind_case(node: exp.Case, child, options) -> Expr:
    base = node.args.get("this")
    conditions: list[Expr] = []
    values: list[Expr] = []
    bound_base = child(base) if base is not None else None
    for branch in node.args.get("ifs") or []:
        when = child(branch.this)
        if bound_base is not None:
            when = resolve_operator("eq", [bound_base, when], options)
        conditions.append(when)
        values.append(child(branch.args["true"]))
    default = node.args.get("default")
    return bind_case(conditions, values, child(default) if default is not None else None)


_INTERVAL_UNITS = {
    "year": "years", "years": "years", "month": "months", "months": "months",
    "week": "weeks", "weeks": "weeks", "day": "days", "days": "days", "hour": "hours",
    "hours": "hours", "minute": "minutes", "minutes": "minutes", "second": "seconds",
    "seconds": "seconds", "millisecond": "milliseconds", "milliseconds": "milliseconds",
    "microsecond": "microseconds", "microseconds": "microseconds", "quarter": "quarters",
    "quarters": "quarters", "decade": "decades", "century": "centuries",
    "millennium": "millennia",
}


def _bind_interval(node: exp.Interval, child, options) -> Expr:
    unit_node = node.args.get("unit")
    value = node.this
    if unit_node is None:
        if isinstance(value, exp.Literal) and value.is_string:
            return Literal(parse_interval_text(value.this), T.INTERVAL)
        raise NotSupportedError(f"interval '{node.sql(dialect='duckdb')}' is not supported")
    if isinstance(unit_node, exp.IntervalSpan):
        raise NotSupportedError("INTERVAL ... HOUR TO MINUTE spans are not supported yet")
    unit = _unit_name(unit_node)
    if unit not in _INTERVAL_UNITS:
        raise PlanError(f"unknown interval unit '{unit}'")
    if isinstance(value, exp.Literal):
        try:
            return interval_literal(float(value.this) if "." in str(value.this)
                                    else int(value.this), _INTERVAL_UNITS[unit])
        except ValueError as e:
            raise PlanError(f"invalid interval value '{value.this}'") from e
    # INTERVAL (expr) DAY -> to_days(expr)
    return resolve_function("to_" + _INTERVAL_UNITS[unit], [child(value)], options)


# ----------------------------------------------------------------------------- types

_TYPES = {
    exp.DataType.Type.BOOLEAN: pa.bool_(), exp.DataType.Type.TINYINT: pa.int8(),
    exp.DataType.Type.SMALLINT: pa.int16(), exp.DataType.Type.INT: pa.int32(),
    exp.DataType.Type.BIGINT: pa.int64(), exp.DataType.Type.UTINYINT: pa.uint8(),
    exp.DataType.Type.USMALLINT: pa.uint16(), exp.DataType.Type.UINT: pa.uint32(),
    exp.DataType.Type.UBIGINT: pa.uint64(), exp.DataType.Type.INT128: pa.decimal128(38, 0),
    exp.DataType.Type.UINT128: pa.decimal128(38, 0), exp.DataType.Type.FLOAT: pa.float32(),
    exp.DataType.Type.DOUBLE: pa.float64(), exp.DataType.Type.TEXT: pa.string(),
    exp.DataType.Type.VARCHAR: pa.string(), exp.DataType.Type.CHAR: pa.string(),
    exp.DataType.Type.NCHAR: pa.string(), exp.DataType.Type.NVARCHAR: pa.string(),
    exp.DataType.Type.BPCHAR: pa.string(), exp.DataType.Type.NAME: pa.string(),
    exp.DataType.Type.DATE: pa.date32(), exp.DataType.Type.DATE32: pa.date32(),
    exp.DataType.Type.TIMESTAMP: pa.timestamp("us"),
    exp.DataType.Type.TIMESTAMPNTZ: pa.timestamp("us"),
    exp.DataType.Type.DATETIME: pa.timestamp("us"),
    exp.DataType.Type.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
    exp.DataType.Type.TIMESTAMPLTZ: pa.timestamp("us", tz="UTC"),
    exp.DataType.Type.TIMESTAMP_S: pa.timestamp("s"),
    exp.DataType.Type.TIMESTAMP_MS: pa.timestamp("ms"),
    exp.DataType.Type.TIMESTAMP_NS: pa.timestamp("ns"),
    exp.DataType.Type.TIME: pa.time64("us"), exp.DataType.Type.INTERVAL: T.INTERVAL,
    exp.DataType.Type.BLOB: pa.binary(), exp.DataType.Type.VARBINARY: pa.binary(),
    exp.DataType.Type.BINARY: pa.binary(), exp.DataType.Type.NULL: pa.null(),
}


def sql_type_to_arrow(data_type: exp.DataType) -> pa.DataType:
    """The Arrow type of a SQL type name (DuckDB's meanings: DECIMAL = DECIMAL(18,3),
    HUGEINT = DECIMAL(38,0), TIMESTAMP = microseconds).

    Example:
        >>> sql_type_to_arrow(exp.DataType.build("DECIMAL(15,2)", dialect="duckdb"))
        Decimal128Type(decimal128(15, 2))
    """
    kind = data_type.this
    if kind in (exp.DataType.Type.DECIMAL, exp.DataType.Type.BIGDECIMAL,
                exp.DataType.Type.DECIMAL128, exp.DataType.Type.DECIMAL64,
                exp.DataType.Type.DECIMAL32):
        params = [int(p.this.this) if isinstance(p.this, exp.Literal) else int(p.name)
                  for p in data_type.expressions]
        precision = params[0] if params else 18
        scale = params[1] if len(params) > 1 else (3 if not params else 0)
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise PlanError(f"invalid DECIMAL({precision},{scale}): precision must be 1..38 "
                            f"and scale 0..precision")
        return pa.decimal128(precision, scale)
    if kind in _TYPES:
        return _TYPES[kind]
    raise NotSupportedError(f"type {data_type.sql(dialect='duckdb')} is not supported yet")
