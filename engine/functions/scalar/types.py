"""SQL type logic for scalar expressions: type families, DuckDB type names, literal typing and
the common supertype used by comparisons, CASE, COALESCE, IN and UNION.

The rules follow DuckDB (checked with ``SELECT typeof(...)``):

- integers widen to the wider type; a signed/unsigned mix goes to the next signed type
- integer with decimal -> decimal wide enough for both (an INTEGER counts as DECIMAL(10,0))
- anything numeric with a float -> that float (FLOAT stays FLOAT unless a DOUBLE is involved)
- DATE with TIMESTAMP -> TIMESTAMP
- VARCHAR never mixes implicitly with another type; string *literals* do, but that is decided
  where the literal is known (``unify`` in this module), not on bare types.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import pyarrow as pa

from plansight.engine.errors import PlanError
from plansight.engine.logical.expr import Cast, Expr, Literal

MAX_DECIMAL_PRECISION = 38

# Decimal width that holds every value of an integer type (DuckDB's rule).
_INTEGER_DECIMAL_WIDTH = {8: 3, 16: 5, 32: 10, 64: 19}
_UNSIGNED_DECIMAL_WIDTH = {8: 3, 16: 5, 32: 10, 64: 20}

INTERVAL = pa.month_day_nano_interval()
TIMESTAMP = pa.timestamp("us")

_SIGNED = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}
_UNSIGNED = {8: pa.uint8(), 16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}


# ----------------------------------------------------------------------------- families

def is_null_type(t: pa.DataType) -> bool:
    return pa.types.is_null(t)


def is_integer(t: pa.DataType) -> bool:
    return pa.types.is_integer(t)


def is_float(t: pa.DataType) -> bool:
    return pa.types.is_floating(t)


def is_decimal(t: pa.DataType) -> bool:
    return pa.types.is_decimal(t)


def is_numeric(t: pa.DataType) -> bool:
    return is_integer(t) or is_float(t) or is_decimal(t)


def is_string(t: pa.DataType) -> bool:
    """VARCHAR: Arrow string, large_string, string_view, or dictionary-encoded strings
    (evaluate_call decodes dictionaries before kernels see them)."""
    if pa.types.is_dictionary(t):
        return is_string(t.value_type)
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def is_boolean(t: pa.DataType) -> bool:
    return pa.types.is_boolean(t)


def is_date(t: pa.DataType) -> bool:
    return pa.types.is_date(t)


def is_timestamp(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t)


def is_interval(t: pa.DataType) -> bool:
    return pa.types.is_interval(t)


def is_duration(t: pa.DataType) -> bool:
    return pa.types.is_duration(t)


def is_temporal(t: pa.DataType) -> bool:
    return is_date(t) or is_timestamp(t) or pa.types.is_time(t)


def is_string_literal(expr: Expr) -> bool:
    return isinstance(expr, Literal) and is_string(expr.type) and expr.value is not None


def is_null_literal(expr: Expr) -> bool:
    return isinstance(expr, Literal) and expr.value is None


def integer_decimal_width(t: pa.DataType) -> int:
    table = _INTEGER_DECIMAL_WIDTH if pa.types.is_signed_integer(t) else _UNSIGNED_DECIMAL_WIDTH
    return table[t.bit_width]


def as_decimal(t: pa.DataType) -> pa.DataType:
    """The decimal type an integer or decimal type converts to without loss."""
    if is_decimal(t):
        return t
    if is_boolean(t):
        return pa.decimal128(1, 0)
    return pa.decimal128(integer_decimal_width(t), 0)


def zero_of(t: pa.DataType) -> pa.Scalar:
    """A zero scalar of numeric type ``t`` (built directly: casting an int64 0 to a narrow
    decimal fails in Arrow)."""
    return pa.scalar(Decimal(0) if is_decimal(t) else 0.0 if is_float(t) else 0, t)


def decimal_type(precision: int, scale: int) -> pa.DataType:
    """A decimal type with precision capped at 38 (DuckDB's maximum)."""
    precision = max(1, min(precision, MAX_DECIMAL_PRECISION))
    return pa.decimal128(precision, min(scale, precision))


# ----------------------------------------------------------------------------- names

_NAMES = {
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
    pa.uint8(): "UTINYINT", pa.uint16(): "USMALLINT", pa.uint32(): "UINTEGER",
    pa.uint64(): "UBIGINT", pa.float16(): "FLOAT", pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN", pa.string(): "VARCHAR",
    pa.large_string(): "VARCHAR", pa.string_view(): "VARCHAR", pa.binary(): "BLOB",
    pa.large_binary(): "BLOB", pa.date32(): "DATE", pa.date64(): "DATE", pa.null(): "NULL",
    INTERVAL: "INTERVAL",
}


def rounding_room(t: pa.DataType, digits: int) -> pa.DataType:
    """The decimal type wide enough to round a ``t`` value to ``digits`` places: the carry
    can add an integer digit (round(9.5::DECIMAL(2, 1)) = 10), and a negative ``digits``
    needs the digits of 10**-digits (round(0.25, -1) is a multiple of 10). Arrow refuses a
    rounding whose result does not fit the source precision."""
    integer_digits = max(t.precision - t.scale, -digits + 1) + 1
    precision = min(38, max(t.precision, integer_digits + t.scale))
    return t if precision == t.precision else pa.decimal128(precision, t.scale)


def type_name(t: pa.DataType) -> str:
    """The DuckDB spelling of an Arrow type, as used in messages and ``typeof``.

    Example:
        >>> type_name(pa.decimal128(15, 2)), type_name(pa.int32())
        ('DECIMAL(15,2)', 'INTEGER')
    """
    if t in _NAMES:
        return _NAMES[t]
    if is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if is_timestamp(t):
        if t.tz is not None:
            return "TIMESTAMP WITH TIME ZONE"
        return {"s": "TIMESTAMP_S", "ms": "TIMESTAMP_MS", "us": "TIMESTAMP",
                "ns": "TIMESTAMP_NS"}[t.unit]
    if pa.types.is_time(t):
        return "TIME"
    if is_duration(t) or is_interval(t):
        return "INTERVAL"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"{type_name(t.value_type)}[]"
    if pa.types.is_struct(t):
        return "STRUCT(" + ", ".join(f"{f.name} {type_name(f.type)}" for f in t) + ")"
    if pa.types.is_dictionary(t):
        return type_name(t.value_type)
    return str(t).upper()


# ----------------------------------------------------------------------------- literals

def integer_literal_type(value: int) -> pa.DataType:
    """DuckDB's type for an integer literal: INTEGER, BIGINT, HUGEINT (as DECIMAL(38,0)), DOUBLE.

    Example:
        >>> integer_literal_type(1), integer_literal_type(3_000_000_000)
        (DataType(int32), DataType(int64))
    """
    if -(2**31) <= value < 2**31:
        return pa.int32()
    if -(2**63) <= value < 2**63:
        return pa.int64()
    if abs(value) < 10**38:
        return pa.decimal128(38, 0)
    return pa.float64()


def number_literal(text: str) -> Literal:
    """Type a numeric literal's text the way DuckDB does (``2.5`` -> DECIMAL(2,1), ``1e3`` ->
    DOUBLE).

    Example:
        >>> number_literal("2.5")
        Literal(value=Decimal('2.5'), type=Decimal128Type(decimal128(2, 1)))
    """
    lowered = text.lower()
    if "e" in lowered or "inf" in lowered or "nan" in lowered:
        return Literal(float(text), pa.float64())
    if "." not in text:
        value = int(text)
        t = integer_literal_type(value)
        return Literal(float(value) if is_float(t) else value, t)
    # every digit counts, leading zeros too: DuckDB types 0.5 DECIMAL(2, 1), .5 DECIMAL(1, 1)
    whole, _, fraction = text.lstrip("+-").partition(".")
    scale = len(fraction)
    precision = max(len(whole) + scale, 1)
    if precision > MAX_DECIMAL_PRECISION:
        return Literal(float(text), pa.float64())
    return Literal(Decimal(text), pa.decimal128(precision, scale))


def mixed_sign_operator_type(a: Expr, b: Expr) -> pa.DataType | None:
    """DuckDB's operand type for an operator (+ - * // % & | << ...) on a signed and an
    unsigned integer, neither a bare literal: the signed type when it is wider, else BIGINT.

    DuckDB's operators have overloads for like-signed types only, so TINYINT + UTINYINT
    resolves to BIGINT, where the common type (COALESCE, CASE, comparisons) is SMALLINT. Beside
    a UBIGINT DuckDB answers HUGEINT, which plansight has no type for: None here (as for any
    other pair), and the caller decides.

    Example:
        >>> mixed_sign_operator_type(Cast(Literal(1, pa.int64()), pa.int8()),
        ...                          Cast(Literal(1, pa.int64()), pa.uint8()))
        DataType(int64)
    """
    def column(x: Expr) -> bool:
        return is_integer(x.type) and not (isinstance(x, Literal) and x.value is not None)

    if not (column(a) and column(b)):
        return None
    signed = [x.type for x in (a, b) if pa.types.is_signed_integer(x.type)]
    unsigned = [x.type for x in (a, b) if pa.types.is_unsigned_integer(x.type)]
    if len(signed) != 1 or unsigned[0].bit_width == 64:
        return None
    return signed[0] if signed[0].bit_width > unsigned[0].bit_width else pa.int64()


def literal_fits(value: int, t: pa.DataType) -> bool:
    """Whether an integer value is representable in integer type ``t``."""
    if pa.types.is_signed_integer(t):
        return -(2 ** (t.bit_width - 1)) <= value < 2 ** (t.bit_width - 1)
    return 0 <= value < 2**t.bit_width


# ----------------------------------------------------------------------------- supertype

def _integer_supertype(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    sa, sb = pa.types.is_signed_integer(a), pa.types.is_signed_integer(b)
    if sa == sb:
        return a if a.bit_width >= b.bit_width else b
    signed, unsigned = (a, b) if sa else (b, a)
    if signed.bit_width > unsigned.bit_width:
        return signed
    return _SIGNED[min(64, unsigned.bit_width * 2)]


def _decimal_supertype(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    a, b = as_decimal(a), as_decimal(b)
    scale = max(a.scale, b.scale)
    digits = max(a.precision - a.scale, b.precision - b.scale)
    if digits + scale > MAX_DECIMAL_PRECISION:
        # beyond 38 digits the integer digits win and the scale gives way (as DuckDB):
        # DECIMAL(38, 0) and DECIMAL(10, 2) meet at DECIMAL(38, 0), not DECIMAL(38, 2)
        scale = max(0, MAX_DECIMAL_PRECISION - digits)
    return decimal_type(digits + scale, scale)


def supertype_pair(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The common type of two types, or None when SQL has none (e.g. VARCHAR and INTEGER)."""
    if a == b:
        return a
    if is_null_type(a):
        return b
    if is_null_type(b):
        return a
    if pa.types.is_dictionary(a):
        return supertype_pair(a.value_type, b)
    if pa.types.is_dictionary(b):
        return supertype_pair(a, b.value_type)
    if pa.types.is_list(a) and pa.types.is_list(b):
        element = supertype_pair(a.value_type, b.value_type)
        return pa.list_(element) if element is not None else None
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        # field by field, by name in order (DuckDB: field order is part of the type)
        if [f.name for f in a] != [f.name for f in b]:
            return None
        fields = [supertype_pair(x.type, y.type) for x, y in zip(a, b)]
        if any(f is None for f in fields):
            return None
        return pa.struct([pa.field(x.name, t) for x, t in zip(a, fields)])
    if is_string(a) and is_string(b):
        return pa.large_string() if pa.large_string() in (a, b) else pa.string()
    if is_boolean(a) and is_integer(b):
        return b
    if is_boolean(b) and is_integer(a):
        return a
    if is_numeric(a) and is_numeric(b):
        if is_float(a) or is_float(b):
            if pa.float64() in (a, b):
                return pa.float64()
            return pa.float32()
        if is_decimal(a) or is_decimal(b):
            return _decimal_supertype(a, b)
        return _integer_supertype(a, b)
    if (is_date(a) or is_timestamp(a)) and (is_date(b) or is_timestamp(b)):
        if is_date(a) and is_date(b):
            return pa.date32()
        stamps = [t for t in (a, b) if is_timestamp(t)]
        units = ["s", "ms", "us", "ns"]
        unit = max((t.unit for t in stamps), key=units.index)
        unit = "us" if units.index(unit) < units.index("us") else unit
        return pa.timestamp(unit, tz=stamps[0].tz)
    if pa.types.is_time(a) and pa.types.is_time(b):
        return pa.time64("us") if "ns" not in (str(a), str(b)) else pa.time64("ns")
    if (is_duration(a) or is_interval(a)) and (is_duration(b) or is_interval(b)):
        if is_interval(a) and is_interval(b):
            return INTERVAL
        # a fixed duration (timestamp - timestamp) wins: Arrow compares durations, and an
        # interval without months converts to one exactly
        return pa.duration("us")
    if (pa.types.is_binary(a) or pa.types.is_large_binary(a)) and (
            pa.types.is_binary(b) or pa.types.is_large_binary(b)):
        return pa.large_binary()
    return None


def common_supertype(types: Sequence[pa.DataType], context: str) -> pa.DataType:
    """The type every one of ``types`` converts to implicitly; PlanError naming ``context``.

    Example:
        >>> common_supertype([pa.int32(), pa.decimal128(2, 1)], "CASE")
        Decimal128Type(decimal128(11, 1))
    """
    if not types:
        return pa.null()
    result = types[0]
    for t in types[1:]:
        merged = supertype_pair(result, t)
        if merged is None:
            names = ", ".join(dict.fromkeys(type_name(x) for x in types))
            raise PlanError(f"{context}: cannot find a common type for {names}; "
                            f"an explicit CAST is required")
        result = merged
    return result


def unify(args: Sequence[Expr], context: str, *, cast) -> tuple[list[Expr], pa.DataType]:
    """Bring ``args`` to one type, treating literals the way DuckDB does.

    String literals and NULLs take the type of the other arguments (``o_orderdate <
    '1995-03-15'``); integer literals that fit a narrower integer column take its type
    (``tinyint_col + 1`` stays TINYINT). ``cast`` is ``cast_expr`` (passed in to avoid an
    import cycle).
    """
    # untyped NULLs (literals and NULL-typed expressions such as a VALUES column of NULLs)
    # take any type; a typed NULL (CAST(NULL AS DATE)) keeps its own
    typed = [a for a in args if not is_null_type(a.type) and not is_string_literal(a)]
    if not typed:
        strings = [a for a in args if is_string_literal(a)]
        target = pa.string() if strings else pa.null()
    else:
        # a typed NULL (CAST(NULL AS SMALLINT)) is typed as a column is: a literal 2 beside
        # it takes its type, as DuckDB's does
        non_literal = [a for a in typed if not isinstance(a, Literal) or a.value is None]
        kinds = non_literal or typed
        target = common_supertype([a.type for a in kinds], context)
        # integer literals do not widen an integer column's type if they fit it
        if non_literal and is_integer(target):
            for lit in typed:
                if not isinstance(lit, Literal) or lit.value is None:
                    continue
                if not is_integer(lit.type) or not literal_fits(lit.value, target):
                    target = common_supertype([target, lit.type], context)
        elif non_literal:
            target = common_supertype([target] + [a.type for a in typed
                                                  if isinstance(a, Literal)], context)
    if is_null_type(target):
        target = pa.int32()  # all NULL: DuckDB's default type for an untyped NULL
    if pa.types.is_dictionary(target):
        target = target.value_type
    out = [a if a.type == target else cast(a, target) for a in args]
    return out, target


def strip_cast(expr: Expr) -> Expr:
    while isinstance(expr, Cast):
        expr = expr.expr
    return expr
