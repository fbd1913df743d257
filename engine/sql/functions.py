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
from plansight.engine.functions.scalar.nested import resolve_struct
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
    exp.BitwiseAnd: "bitwise_and", exp.BitwiseOr: "bitwise_or", exp.BitwiseXor: "bitwise_xor",
    exp.BitwiseLeftShift: "shift_left", exp.BitwiseRightShift: "shift_right",
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

    Dispatches on the node's class (the nearest class in its MRO that has a binder in
    ``NODE_BINDERS``, so ``TryCast`` uses ``Cast``'s and ``ConcatWs`` its own). Raises
    PlanError for type mismatches and unknown functions, NotSupportedError for valid SQL that
    plansight does not implement.

    Example:
        >>> import sqlglot
        >>> node = sqlglot.parse_one("SELECT 1 + 2.5", read="duckdb").expressions[0]
        >>> e = bind_scalar_node(node, lambda n: bind_scalar_node(n, None, {}), {})
        >>> str(e), e.type
        ('1 + 2.5', Decimal128Type(decimal128(12, 1)))
    """
    binding = _Binding(bind, options)
    for cls in type(node).__mro__:
        binder = NODE_BINDERS.get(cls)
        if binder is not None:
            return binder(node, binding)
    raise NotSupportedError(f"expression '{node.sql(dialect='duckdb')}' is not supported yet")


class _Binding:
    """What a node binder needs: its children bound, and operators/functions resolved."""

    def __init__(self, bind: Bind | None, options: Mapping[str, Any]):
        self.bind, self.options = bind, options

    def child(self, node: exp.Expression) -> Expr:
        if self.bind is not None:
            return self.bind(node)
        return bind_scalar_node(node, None, self.options)

    def operator(self, name: str, *args: Expr) -> Expr:
        return resolve_operator(name, list(args), self.options)

    def function(self, name: str, args: list[exp.Expression]) -> Expr:
        return resolve_function(name, [self.child(a) for a in args], self.options)

    def call(self, name: str, args: list[Expr]) -> Expr:
        """A function over arguments already bound (or made here, e.g. a unit literal)."""
        return resolve_function(name, args, self.options)


NodeBinder = Callable[[exp.Expression, _Binding], Expr]


def _literal(node: exp.Literal, b: _Binding) -> Expr:
    if node.is_string:
        return Literal(node.this, pa.string())
    if node.meta.get("bare_fraction"):  # written .5, which sqlglot spells 0.5 (sql/parser.py)
        return number_literal(node.this.removeprefix("0"))
    return number_literal(node.this)


def _cast(node: exp.Cast, b: _Binding) -> Expr:  # also TryCast
    target = sql_type_to_arrow(node.to)
    safe = isinstance(node, exp.TryCast) or bool(node.args.get("safe"))
    return cast_expr(b.child(node.this), target, safe=safe, explicit=True)


def _bracket(node: exp.Bracket, b: _Binding) -> Expr:
    """``l[i]`` (list_extract, counted from 1) and ``s['name']`` (struct_extract). sqlglot's
    DuckDB dialect reads an integer literal index 0-based (``l[1]`` holds 0) but any other
    index as written, so only a literal is moved back to DuckDB's 1-based count."""
    if len(node.expressions) != 1 or isinstance(node.expressions[0], exp.Slice):
        raise NotSupportedError(f"expression '{node.sql(dialect='duckdb')}' is not supported "
                                "yet (one index or field name in brackets)")
    (index,) = node.expressions
    if isinstance(index, exp.Literal) and index.is_string:
        return b.call("struct_extract", [b.child(node.this), Literal(index.this, pa.string())])
    literal = index.this if isinstance(index, exp.Neg) else index
    if isinstance(literal, exp.Literal) and not literal.is_string and \
            literal.this.lstrip("-").isdigit():
        value = -int(literal.this) if literal is not index else int(literal.this)
        return b.call("list_extract", [b.child(node.this), number_literal(str(value + 1))])
    return b.call("list_extract", [b.child(node.this), b.child(index)])


def _escape(node: exp.Escape, b: _Binding) -> Expr:
    like = node.this
    if not isinstance(like, (exp.Like, exp.ILike)):
        raise NotSupportedError("ESCAPE outside LIKE / ILIKE is not supported yet")
    result = b.operator(_BINARY[type(like)], b.child(like.this), b.child(like.expression),
                        b.child(node.expression))
    return b.operator("not", result) if like.args.get("negate") else result


def _nearest(table: dict[type, Any], node: exp.Expression) -> Any:
    """``table``'s entry for the nearest class of ``node`` (dispatch found one)."""
    return next(table[cls] for cls in type(node).__mro__ if cls in table)


def _binary(node: exp.Binary, b: _Binding) -> Expr:
    name = _nearest(_BINARY, node)
    if name in ("and", "or"):
        return b.operator(name, *_flatten(node, type(node), b.child))
    result = b.operator(name, b.child(node.this), b.child(node.expression))
    return b.operator("not", result) if node.args.get("negate") else result


def _not(node: exp.Not, b: _Binding) -> Expr:
    inner = node.this
    if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
        return b.operator("is_not_null", b.child(inner.this))
    return b.operator("not", b.child(inner))


def _is(node: exp.Is, b: _Binding) -> Expr:
    if isinstance(node.expression, exp.Null):
        return b.operator("is_null", b.child(node.this))
    return b.operator("is_not_distinct_from", b.child(node.this), b.child(node.expression))


def _in(node: exp.In, b: _Binding) -> Expr:
    if node.args.get("query") is not None or node.args.get("unnest") is not None:
        raise NotSupportedError("IN with a subquery must be bound by the query binder")
    return b.operator("in_list", b.child(node.this), *[b.child(e) for e in node.expressions])


def _if(node: exp.If, b: _Binding) -> Expr:
    default = node.args.get("false")
    return bind_case([b.child(node.this)], [b.child(node.args["true"])],
                     b.child(default) if default is not None else None)


def _trim(node: exp.Trim, b: _Binding) -> Expr:
    position = (node.args.get("position") or "BOTH").upper()
    name = {"BOTH": "trim", "LEADING": "ltrim", "TRAILING": "rtrim"}[position]
    return b.function(name, [node.this] + ([node.expression] if node.expression else []))


def _pad(node: exp.Pad, b: _Binding) -> Expr:
    args = [node.this, node.expression]
    if node.args.get("fill_pattern") is not None:
        args.append(node.args["fill_pattern"])
    return b.function("lpad" if node.args.get("is_left") else "rpad", args)


def _date_trunc(node: exp.Expression, b: _Binding) -> Expr:
    unit = _unit_name(node.args.get("unit"))
    return b.call("date_trunc", [Literal(unit, pa.string()), b.child(node.this)])


def _date_diff(node: exp.DateDiff, b: _Binding) -> Expr:
    unit = _unit_name(node.args.get("unit")) if node.args.get("unit") else "day"
    return b.call("date_diff", [Literal(unit, pa.string()), b.child(node.expression),
                                b.child(node.this)])


def _unix_to_time(node: exp.UnixToTime, b: _Binding) -> Expr:
    scale = node.args.get("scale")
    if scale is not None and not (isinstance(scale, exp.Literal) and not scale.is_string):
        return b.function("strptime", [node.this, scale])  # to_timestamp(text, format)
    if scale is not None and str(scale.this) != "3":
        raise NotSupportedError(f"to_timestamp with scale {scale.this} is not supported")
    return b.function("to_timestamp" if scale is None else "epoch_ms", [node.this])


def _regexp_like(node: exp.RegexpLike, b: _Binding) -> Expr:
    flag = [node.args["flag"]] if node.args.get("flag") else []
    return b.function("regexp_matches", [node.this, node.expression] + flag)


def _mapped_function(node: exp.Func, b: _Binding) -> Expr:
    name, keys = _nearest(_FUNCTIONS, node)
    return b.function(name, [node.args[k] for k in keys if node.args.get(k) is not None])


def _generic_function(node: exp.Func, b: _Binding) -> Expr:
    name = node.sql_name().lower()
    if name not in BINDERS and name.replace("_", "") in BINDERS:
        name = name.replace("_", "")  # sqlglot's WEEK_OF_YEAR is DuckDB's weekofyear
    if name not in BINDERS:
        # name the function as the user wrote it (sqlglot reads unnest as explode)
        written = node.meta.get("written", "").lower()
        name = written if written.isidentifier() else name
    return b.function(name, _generic_args(node))


def _struct(node: exp.Struct, b: _Binding) -> Expr:
    """``{'a': 1, 'b': x}``: a struct_pack call whose options name the fields."""
    names, values = [], []
    for item in node.expressions:
        if not isinstance(item, (exp.PropertyEQ, exp.Slice)) or item.this is None:
            raise NotSupportedError(f"struct value {node.sql()!r}: each field needs a name")
        names.append(item.this.name)
        values.append(b.child(item.expression))
    return resolve_struct(names, values)


def _not_here(message: str) -> NodeBinder:
    def refuse(node: exp.Expression, b: _Binding) -> Expr:
        raise NotSupportedError(message)
    return refuse


NODE_BINDERS: dict[type, NodeBinder] = {
    exp.Paren: lambda node, b: b.child(node.this),
    exp.Alias: lambda node, b: b.child(node.this),
    exp.Literal: _literal,
    exp.Boolean: lambda node, b: Literal(bool(node.this), pa.bool_()),
    exp.Null: lambda node, b: Literal(None, pa.null()),
    exp.Cast: _cast,
    exp.Interval: lambda node, b: _bind_interval(node, b.child, b.options),
    exp.Escape: _escape,
    **{binary: _binary for binary in _BINARY},
    exp.Neg: lambda node, b: b.operator("negate", b.child(node.this)),
    exp.BitwiseNot: lambda node, b: b.operator("bitwise_not", b.child(node.this)),
    exp.Not: _not,
    exp.Is: _is,
    exp.In: _in,
    exp.Between: lambda node, b: b.operator("between", b.child(node.this),
                                            b.child(node.args["low"]),
                                            b.child(node.args["high"])),
    exp.Case: lambda node, b: _bind_case(node, b.child, b.options),
    exp.If: _if,
    exp.Coalesce: lambda node, b: b.function("coalesce", [node.this, *node.expressions]),
    exp.Greatest: lambda node, b: b.function("greatest", [node.this, *node.expressions]),
    exp.Least: lambda node, b: b.function("least", [node.this, *node.expressions]),
    exp.Nullif: lambda node, b: b.function("nullif", [node.this, node.expression]),
    exp.Extract: lambda node, b: b.call("date_part", [Literal(_unit_name(node.this),
                                                              pa.string()),
                                                      b.child(node.expression)]),
    exp.Trim: _trim,
    exp.Pad: _pad,
    exp.TimestampTrunc: _date_trunc,
    exp.DateTrunc: _date_trunc,
    exp.DateDiff: _date_diff,
    exp.DateAdd: lambda node, b: b.operator("add", b.child(node.this), b.child(node.expression)),
    exp.DateSub: lambda node, b: b.operator("subtract", b.child(node.this),
                                            b.child(node.expression)),
    exp.UnixToTime: _unix_to_time,
    exp.ConcatWs: lambda node, b: b.function("concat_ws", list(node.expressions)),
    exp.Concat: lambda node, b: b.function("concat", list(node.expressions)),
    exp.RegexpLike: _regexp_like,
    exp.Chr: lambda node, b: b.function("chr", list(node.expressions)),
    exp.Initcap: lambda node, b: b.function("initcap", [node.this]),
    exp.Array: lambda node, b: b.call("list_value", [b.child(e) for e in node.expressions]),
    exp.Struct: lambda node, b: _struct(node, b),
    exp.Bracket: _bracket,
    exp.Dot: lambda node, b: b.call("struct_extract", [b.child(node.this),
                                                       Literal(node.name, pa.string())]),
    exp.Anonymous: lambda node, b: b.function(str(node.this), list(node.expressions)),
    **{func: _mapped_function for func in _FUNCTIONS},
    exp.Func: _generic_function,
    exp.Subquery: _not_here("subqueries must be bound by the query binder"),
    exp.Exists: _not_here("subqueries must be bound by the query binder"),
    exp.Select: _not_here("subqueries must be bound by the query binder"),
}


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
    if kind in (exp.DataType.Type.ARRAY, exp.DataType.Type.LIST) and \
            len(data_type.expressions) == 1 and not data_type.args.get("values"):
        # INTEGER[] (a fixed-size INTEGER[3] is DuckDB's ARRAY type, not a list)
        return pa.list_(sql_type_to_arrow(data_type.expressions[0]))
    if kind == exp.DataType.Type.STRUCT and data_type.expressions and all(
            isinstance(f, exp.ColumnDef) and f.args.get("kind") is not None
            for f in data_type.expressions):
        return pa.struct([pa.field(f.name, sql_type_to_arrow(f.args["kind"]))
                          for f in data_type.expressions])
    raise NotSupportedError(f"type {data_type.sql(dialect='duckdb')} is not supported yet")
