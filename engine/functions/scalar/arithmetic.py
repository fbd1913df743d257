"""Arithmetic operators: + - * / // % and unary minus, on numbers, dates, timestamps and
intervals, typed like DuckDB.

    INTEGER + INTEGER        -> INTEGER (overflow is an error, never wrap-around)
    INTEGER + DECIMAL(2,1)   -> DECIMAL(12,1)   (INTEGER counts as DECIMAL(10,0))
    DECIMAL * DECIMAL        -> DECIMAL(p1+p2, s1+s2)
    anything / anything      -> DOUBLE (1/0 = inf), or integer division with integer_division
    INTEGER // INTEGER       -> INTEGER, truncating toward zero; // or % by zero is an error
    DATE + INTEGER           -> DATE,   DATE - DATE -> BIGINT (days)
    DATE|TIMESTAMP ± INTERVAL -> TIMESTAMP (months are calendar months, clamped to month end)
    TIMESTAMP - TIMESTAMP    -> INTERVAL (an Arrow duration[us])
    INTERVAL * number, number * INTERVAL, INTERVAL / number -> INTERVAL (see scale_interval)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import ExecutionError
from plansight.engine.functions.scalar import calendar as C
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import cast_expr
from plansight.engine.functions.scalar.registry import call, kernel, operator, operator_error
from plansight.engine.functions.scalar.vector import (
    Value,
    broadcast,
    finish,
    from_numpy,
    is_scalar,
    to_numpy,
)
from plansight.engine.kernels import decimal as D
from plansight.engine.logical.expr import Call, Expr, Literal

SYMBOLS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/",
           "integer_divide": "//", "modulo": "%", "negate": "-"}
_VERBS = {"add": "addition", "subtract": "subtraction", "multiply": "multiplication",
          "divide": "division", "integer_divide": "division", "modulo": "modulo",
          "negate": "negation"}


# ----------------------------------------------------------------------------- binding

def _literal_sides(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """String literals and NULLs take the other operand's type (``date_col - '1995-01-01'``)."""
    def untyped(x: Expr) -> bool:  # a typed NULL (CAST(NULL AS DATE)) keeps its type
        return T.is_string_literal(x) or T.is_null_type(x.type)

    def adapt(x: Expr, other: Expr) -> Expr:
        if untyped(x) and not untyped(other):
            return cast_expr(x, other.type)
        return x
    return adapt(a, b), adapt(b, a)


def _numeric_args(op: str, a: Expr, b: Expr) -> tuple[list[Expr], pa.DataType]:
    """Arguments cast for a numeric operator, and the operand type."""
    if T.is_null_type(a.type) and T.is_null_type(b.type):
        a, b = Literal(None, pa.int32()), Literal(None, pa.int32())
    # an untyped NULL takes the other operand's type; a typed one (CAST(NULL AS
    # DECIMAL(10, 2))) keeps its own, which decides the result's type as a column's would
    a, b = (Literal(None, b.type) if T.is_null_type(a.type) else a,
            Literal(None, a.type) if T.is_null_type(b.type) else b)
    if not (T.is_numeric(a.type) and T.is_numeric(b.type)):
        raise operator_error(SYMBOLS[op], [a, b])
    decimal = T.is_decimal(a.type) or T.is_decimal(b.type)
    if decimal and not (T.is_float(a.type) or T.is_float(b.type)):
        return [cast_expr(x, T.as_decimal(x.type)) for x in (a, b)], None
    args, target = T.unify([a, b], f"operator '{SYMBOLS[op]}'", cast=cast_expr)
    mixed = T.mixed_sign_operator_type(a, b)  # TINYINT + UTINYINT is BIGINT, as in DuckDB
    if mixed is not None:
        return [cast_expr(x, mixed) for x in (a, b)], mixed
    return args, target


def _decimal_result(op: str, a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if op == "multiply":
        scale = a.scale + b.scale
        width = a.precision + b.precision
        if width > 18 and max(a.precision, b.precision) <= 18 and scale < 18:
            width = 18  # DuckDB keeps a product of two BIGINT-backed decimals in BIGINT
        return T.decimal_type(max(width, scale), scale)
    scale = max(a.scale, b.scale)
    digits = max(a.precision - a.scale, b.precision - b.scale)
    extra = 0 if op == "modulo" else 1
    return T.decimal_type(digits + scale + extra, scale)


def _bind_numeric(op: str, a: Expr, b: Expr) -> Expr:
    args, target = _numeric_args(op, a, b)
    if target is None:  # decimal arithmetic
        return call(op, args, _decimal_result(op, args[0].type, args[1].type))
    return call(op, args, target)


def _bind_temporal(op: str, a: Expr, b: Expr) -> Expr | None:
    """Date/time arithmetic, or None when neither side is temporal."""
    ta, tb = a.type, b.type
    temporal = (T.is_date, T.is_timestamp, T.is_interval, T.is_duration)
    if not any(f(ta) or f(tb) for f in temporal):
        return None
    timeish_a, timeish_b = T.is_date(ta) or T.is_timestamp(ta), T.is_date(tb) or T.is_timestamp(tb)
    span_a = T.is_interval(ta) or T.is_duration(ta)
    span_b = T.is_interval(tb) or T.is_duration(tb)
    if op == "add" and (span_a or T.is_integer(ta)) and timeish_b:
        a, b, ta, tb, timeish_a, span_b = b, a, tb, ta, True, span_a
    if op in ("add", "subtract") and T.is_date(ta) and T.is_integer(tb):
        return call(op, [a, b], pa.date32())
    if op in ("add", "subtract") and timeish_a and span_b:
        stamp = a if T.is_timestamp(ta) else cast_expr(a, T.TIMESTAMP)
        return call(op, [stamp, b], stamp.type)
    if op == "subtract" and T.is_date(ta) and T.is_date(tb):
        return call("date_subtract", [a, b], pa.int64())
    if op == "subtract" and timeish_a and timeish_b:
        target = T.common_supertype([ta, tb, T.TIMESTAMP], "operator '-'")
        return call("subtract", [cast_expr(a, target), cast_expr(b, target)],
                    pa.duration(target.unit))
    if op in ("add", "subtract") and span_a and span_b:
        target = T.common_supertype([ta, tb], f"operator '{SYMBOLS[op]}'")
        return call(op, [cast_expr(a, target), cast_expr(b, target)], target)
    if op == "multiply" and T.is_numeric(ta) and span_b:
        a, b, ta, tb, span_a = b, a, tb, ta, True
    if op in ("multiply", "divide") and span_a and T.is_numeric(tb):
        # DuckDB's two overloads: INTERVAL * BIGINT (exact, each field overflow-checked) for
        # integers that fit BIGINT, INTERVAL * DOUBLE otherwise; a division is always DOUBLE.
        # A TIMESTAMP difference (a duration here) is the INTERVAL DuckDB makes of it: whole
        # days and the rest, so (ts1 - ts2) * 1.5 cascades the half day as DuckDB does
        exact = op == "multiply" and T.is_integer(tb) and tb != pa.uint64()
        span = cast_expr(a, T.INTERVAL) if T.is_duration(ta) else a
        return call(op, [span, cast_expr(b, pa.int64() if exact else pa.float64())], T.INTERVAL)
    raise operator_error(SYMBOLS[op], [a, b])


def _null_beside_temporal(op: str, a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """An untyped NULL added to a DATE or TIMESTAMP, or subtracted from one, is the span
    DuckDB reads it as: days (INTEGER) beside a DATE, an INTERVAL beside a TIMESTAMP, so
    ``date_col + NULL`` and ``date_col - NULL`` are DATEs, ``ts_col - NULL`` a TIMESTAMP.
    ``NULL - date_col`` keeps the other reading (a DATE: a difference in days)."""
    def span(other: Expr) -> pa.DataType | None:
        if T.is_date(other.type):
            return pa.int32()
        if T.is_timestamp(other.type):
            return T.INTERVAL
        return None

    if op not in ("add", "subtract"):
        return a, b
    if T.is_null_type(b.type) and span(a) is not None:
        return a, cast_expr(b, span(a))
    if op == "add" and T.is_null_type(a.type) and span(b) is not None:
        return cast_expr(a, span(b)), b
    return a, b


def _null_beside_interval(op: str, a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """An untyped NULL multiplying an INTERVAL, or dividing one, is a number (BIGINT), so
    ``INTERVAL '1 day' * NULL`` is an INTERVAL NULL (DuckDB) and not INTERVAL * INTERVAL."""
    if op == "multiply" and T.is_null_type(a.type) and T.is_interval(b.type):
        return cast_expr(a, pa.int64()), b
    if op in ("multiply", "divide") and T.is_null_type(b.type) and T.is_interval(a.type):
        return a, cast_expr(b, pa.int64())
    return a, b


def _arith_binder(op: str):
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        args = _null_beside_interval(op, *args)
        a, b = _literal_sides(*_null_beside_temporal(op, *args))
        temporal = _bind_temporal(op, a, b)
        if temporal is not None:
            return temporal
        if op == "divide":
            both_int = T.is_integer(a.type) and T.is_integer(b.type)
            if both_int and options.get("integer_division"):
                return _bind_numeric("integer_divide", a, b)
            args, target = _numeric_args(op, a, b)
            result = pa.float32() if target == pa.float32() else pa.float64()
            return call("divide", [cast_expr(x, result) for x in args], result)
        if op == "integer_divide":
            args, target = _numeric_args(op, a, b)
            if target is not None and T.is_integer(target):
                return call(op, args, target)
            result = pa.float32() if target == pa.float32() else pa.float64()
            return call(op, [cast_expr(x, result) for x in args], result)
        return _bind_numeric(op, a, b)
    return bind


for _op in ("add", "subtract", "multiply", "divide", "integer_divide", "modulo"):
    operator(_op)(_arith_binder(_op))


@operator("negate")
def bind_negate(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    (a,) = args
    if T.is_null_literal(a):  # keeps its type when it has one (CAST(NULL AS DECIMAL(10, 2)))
        return Literal(None, pa.int32() if T.is_null_type(a.type) else a.type)
    if pa.types.is_null(a.type):  # a NULL-typed column (SELECT NULL AS c): BIGINT, as DuckDB
        a = cast_expr(a, pa.int64())
    if isinstance(a, Literal) and T.is_numeric(a.type) and a.value is not None:
        value = -a.value
        if T.is_integer(a.type) and not T.literal_fits(value, a.type):
            return Literal(value, T.integer_literal_type(value))
        return Literal(value, a.type)
    if not (T.is_numeric(a.type) or T.is_interval(a.type) or T.is_duration(a.type)):
        raise operator_error("-", [a])
    return call("negate", [a], a.type)


# ----------------------------------------------------------------------------- kernels

def _checked(op: str, fn, *args: Value, call_: Call) -> Value:
    try:
        return fn(*args)
    except pa.ArrowInvalid as e:
        message = str(e).lower()
        if "zero" in message:
            raise ExecutionError(f"division by zero in '{SYMBOLS[op]}'") from e
        types = ", ".join(T.type_name(a.type) for a in call_.args)
        raise ExecutionError(f"Overflow in {_VERBS[op]} of {types}") from e


def _to_result(value: Value, call_: Call, op: str) -> Value:
    if value.type == call_.type:
        return value
    try:
        return pc.cast(value, call_.type)
    except pa.ArrowInvalid as e:
        raise ExecutionError(
            f"Overflow in {_VERBS[op]}: result does not fit {T.type_name(call_.type)}") from e


def _check_zero(op: str, divisor: Value) -> None:
    if T.is_float(divisor.type) and op == "modulo":
        return  # DuckDB: DOUBLE % 0 is NaN
    zero = pc.equal(divisor, T.zero_of(divisor.type))
    hit = zero.as_py() if is_scalar(zero) else pc.any(zero).as_py()
    if hit:
        raise ExecutionError(f"division by zero in '{SYMBOLS[op]}'")


def _unscaled_operand(value: Value, scale: int) -> tuple[np.ndarray, int] | None:
    """(the kernels' operand: an array's decimal128 words, step 1, or a constant's int64
    unscaled value, step 0) of a decimal operand; None for a NULL constant."""
    if is_scalar(value):
        if not value.is_valid:
            return None
        return np.array([int(value.as_py().scaleb(scale))], dtype=np.int64), 0
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    return D.words(value), 1


def _decimal_on_int64(op: str, a: Value, b: Value, to: pa.DataType) -> Value | None:
    """DECIMAL(p <= 18) +, -, * as scaled int64 in one compiled pass, straight into the
    result type; None (Arrow's decimal128 path decides) for other types, constants only, or
    a result that overflows."""
    if not (D.fits_int64(a.type) and D.fits_int64(b.type) and pa.types.is_decimal128(to)) \
            or (is_scalar(a) and is_scalar(b)):
        return None
    x, y = _unscaled_operand(a, a.type.scale), _unscaled_operand(b, b.type.scale)
    if x is None or y is None:
        return None
    n = len(a) if not is_scalar(a) else len(b)
    valid = None  # no NULLs: the kernels read no mask
    for v in (a, b):
        if not is_scalar(v) and v.null_count:
            if valid is None:
                valid = np.ones(n, dtype=bool)
            valid &= np.asarray(v.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    mask = valid if valid is not None else np.ones(0, dtype=bool)
    bound = 10 ** to.precision if to.precision <= D.MAX_INT64_PRECISION else 0
    if op == "multiply":
        if to.scale != a.type.scale + b.type.scale:
            return None
        check = a.type.precision + b.type.precision > D.MAX_INT64_PRECISION
        out, ok = D.multiply_scaled(x[0], x[1], y[0], y[1], mask, bound, check)
    else:
        if to.scale < max(a.type.scale, b.type.scale) or any(
                t.precision - t.scale + to.scale > D.MAX_INT64_PRECISION
                for t in (a.type, b.type)):
            return None  # a rescaled operand might not fit int64
        fa, fb = 10 ** (to.scale - a.type.scale), 10 ** (to.scale - b.type.scale)
        out, ok = D.add_scaled(x[0], x[1], fa, y[0], y[1], -fb if op == "subtract" else fb,
                               mask, bound)
    if not ok:
        return None
    return D.from_words(out, valid, to)


@kernel("add", "subtract", "multiply")
def arithmetic_kernel(args: list[Value], call_: Call) -> Value:
    op = call_.func
    a, b = args
    if T.is_decimal(a.type) and T.is_decimal(b.type):
        fast = _decimal_on_int64(op, a, b, call_.type)
        if fast is not None:
            return fast
    if T.is_date(a.type) and T.is_integer(b.type):
        days = pc.cast(a, pa.int32())
        fn = pc.add_checked if op == "add" else pc.subtract_checked
        return pc.cast(_checked(op, fn, days, pc.cast(b, pa.int32()), call_=call_), pa.date32())
    if T.is_timestamp(a.type) and T.is_interval(b.type):
        return shift_timestamp(a, b, -1 if op == "subtract" else 1)
    if T.is_interval(a.type) and T.is_interval(b.type):
        return _interval_add(a, b, -1 if op == "subtract" else 1)
    if T.is_interval(a.type):
        return scale_interval(a, b, divide=False)
    fn = {"add": pc.add_checked, "subtract": pc.subtract_checked,
          "multiply": pc.multiply_checked}[op]
    if T.is_decimal(a.type) and T.is_decimal(b.type) and _arrow_decimal_digits(
            op, a.type, b.type) > 38:
        # Arrow's decimal128 result would need more than 38 digits of precision: compute in
        # decimal256 and narrow to the (capped) result type, failing only on real overflow
        a, b = (pc.cast(x, pa.decimal256(x.type.precision, x.type.scale)) for x in (a, b))
    return _to_result(_checked(op, fn, a, b, call_=call_), call_, op)


def _arrow_decimal_digits(op: str, a: pa.DataType, b: pa.DataType) -> int:
    """The precision Arrow gives the result of ``a op b`` (before any cap)."""
    if op == "multiply":
        return a.precision + b.precision + 1
    scale = max(a.scale, b.scale)
    return max(a.precision - a.scale, b.precision - b.scale) + scale + 1


@kernel("date_subtract")
def date_subtract_kernel(args: list[Value], call_: Call) -> Value:
    a, b = (pc.cast(pc.cast(x, pa.int32()), pa.int64()) for x in args)
    return pc.subtract(a, b)


@kernel("divide")
def divide_kernel(args: list[Value], call_: Call) -> Value:
    a, b = args
    if T.is_interval(a.type):
        return scale_interval(a, b, divide=True)
    return pc.divide(a, b)


@operator("average")
def bind_average(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    """``average(sum, count, mode)``: an AVG's one final division (optimizer/exact_avg.py,
    kernels/decimal.py); internal, not callable from SQL."""
    return call("average", args, pa.float64())


@kernel("average")
def average_kernel(args: list[Value], call_: Call) -> Value:
    """DuckDB's AVG finalization over an exact sum (kernels/decimal.py: ``average``)."""
    (sums, counts, mode), all_scalar = broadcast(args)
    return finish(D.average(sums, counts, mode[0].as_py()), all_scalar)


@kernel("integer_divide")
def integer_divide_kernel(args: list[Value], call_: Call) -> Value:
    a, b = args
    _check_zero("integer_divide", b)
    if T.is_integer(call_.type):
        return _checked("integer_divide", pc.divide_checked, a, b, call_=call_)
    return pc.divide(a, b)  # DuckDB: // on non-integers is plain division


@kernel("modulo")
def modulo_kernel(args: list[Value], call_: Call) -> Value:
    a, b = args
    _check_zero("modulo", b)
    result = _checked("modulo", pc.remainder_checked, a, b, call_=call_)
    return _to_result(result, call_, "modulo")


@kernel("negate")
def negate_kernel(args: list[Value], call_: Call) -> Value:
    (a,) = args
    if T.is_interval(a.type):
        arrays, scalar = broadcast([a])
        months, days, nanos, valid = C.interval_parts(arrays[0])
        return finish(C.make_intervals(-months, -days, -nanos, valid), scalar)
    return _checked("negate", pc.negate_checked, a, call_=call_)


# ----------------------------------------------------------------------------- temporal helpers

def shift_timestamp(stamp: Value, interval: Value, sign: int) -> Value:
    """``stamp`` ± ``interval``: calendar months first (clamped), then days, then time."""
    if is_scalar(interval) and interval.is_valid and interval.as_py().months == 0:
        value = interval.as_py()  # no months: a fixed duration, one Arrow kernel
        micros = value.days * C.MICROS_PER_DAY + value.nanoseconds // 1000
        shifted = pc.add(stamp, pa.scalar(sign * micros, pa.duration("us")))
        return pc.cast(shifted, stamp.type) if shifted.type != stamp.type else shifted
    (stamps, intervals), scalar = broadcast([stamp, interval])
    unit = stamps.type.unit
    per_day = {"s": 86_400, "ms": 86_400_000, "us": C.MICROS_PER_DAY,
               "ns": C.NANOS_PER_DAY}[unit]
    nanos_per_unit = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}[unit]
    ticks = to_numpy(pc.cast(stamps, pa.int64())).astype(np.int64)
    months, days, nanos, valid = C.interval_parts(intervals)
    valid = valid & np.asarray(stamps.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    day, time_of_day = np.divmod(ticks, per_day)
    day = C.add_months(day, sign * months) + sign * days
    out = day * per_day + time_of_day + sign * (nanos // nanos_per_unit)
    result = pc.cast(from_numpy(out, valid, pa.int64()), stamps.type)
    return finish(result, scalar)


def _interval_add(a: Value, b: Value, sign: int) -> Value:
    (x, y), scalar = broadcast([a, b])
    m1, d1, n1, v1 = C.interval_parts(x)
    m2, d2, n2, v2 = C.interval_parts(y)
    return finish(C.make_intervals(m1 + sign * m2, d1 + sign * d2, n1 + sign * n2, v1 & v2),
                  scalar)


_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1
_INT64_BOUND = 2.0 ** 63


def _round_micro(x: np.ndarray) -> np.ndarray:
    """Rounded to a millionth (PostgreSQL's TSROUND), so near-whole products stay whole."""
    return np.rint(x * 1e6) / 1e6


def scale_interval(interval: Value, factor: Value, divide: bool) -> Value:
    """``interval * factor`` or ``interval / factor`` as DuckDB computes it.

    A BIGINT factor multiplies months, days and microseconds exactly (the factor must fit
    INTEGER, each field its own range, else an error). A DOUBLE factor (and every division,
    a product with ``1 / factor``) follows PostgreSQL's ``interval_mul``: whole months and days
    are truncated products, the fraction of a month cascades down as 30 days, the fraction of
    a day as 86400 seconds (each rounded to a millionth first), and the microseconds are
    rounded half to even. A result out of range (or a NaN factor) is an error, never wrapped.
    Vectorized over numpy; NULL in either operand is NULL.
    """
    (spans, factors), scalar = broadcast([interval, factor])
    months, days, nanos, valid = C.interval_parts(spans)
    valid = valid & np.asarray(factors.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    micros = nanos // 1000  # DuckDB's intervals count microseconds
    if pa.types.is_integer(factors.type) and not divide:
        k = to_numpy(factors, 1).astype(np.int64)
        if np.any(valid & ((k < _INT32_MIN) | (k > _INT32_MAX))):
            raise ExecutionError("Overflow in multiplication of INTERVAL: the factor does not "
                                 "fit INTEGER")
        k = np.where(valid, k, 0)
        out_months, out_days = months * k, days * k  # |int32 * int32| fits int64
        try:
            out_micros = to_numpy(pc.multiply_checked(pa.array(micros), pa.array(k)))
        except pa.ArrowInvalid as e:
            raise ExecutionError("Overflow in multiplication of INTERVAL") from e
        bad = np.zeros(len(k), dtype=bool)
    else:
        k = to_numpy(factors, 1.0).astype(np.float64)
        if divide:
            if np.any(valid & (k == 0)):
                raise ExecutionError("division by zero in '/'")
            with np.errstate(divide="ignore"):
                k = 1.0 / k
        with np.errstate(invalid="ignore", over="ignore"):
            m, d = months * k, days * k
            bad = ~((m >= _INT32_MIN) & (m <= _INT32_MAX) & (d >= _INT32_MIN) & (d <= _INT32_MAX))
            m, d = np.where(bad, 0.0, m), np.where(bad, 0.0, d)
            out_months, out_days = np.trunc(m), np.trunc(d)
            month_rest = _round_micro((m - out_months) * 30.0)
            day_rest = np.trunc(month_rest)
            seconds = _round_micro((d - out_days + month_rest - day_rest) * 86400.0)
            carry = np.where(np.abs(seconds) >= 86400.0, np.trunc(seconds / 86400.0), 0.0)
            out_days = out_days + carry + day_rest
            seconds = seconds - carry * 86400.0
            exact = np.rint(micros.astype(np.float64) * k + seconds * 1e6)
            bad |= ~((exact >= -_INT64_BOUND) & (exact < _INT64_BOUND))
            out_micros = np.where(bad, 0.0, exact).astype(np.int64)
        out_months, out_days = out_months.astype(np.int64), out_days.astype(np.int64)
    bad |= (out_months < _INT32_MIN) | (out_months > _INT32_MAX)
    bad |= (out_days < _INT32_MIN) | (out_days > _INT32_MAX)
    # the Arrow interval holds nanoseconds in int64: a narrower range than DuckDB's micros
    bad |= np.abs(out_micros) > np.iinfo(np.int64).max // 1000
    if np.any(bad & valid):
        raise ExecutionError("Overflow in " + ("INTERVAL division" if divide
                                               else "multiplication of INTERVAL"))
    zero = ~valid | bad
    out = C.make_intervals(np.where(zero, 0, out_months), np.where(zero, 0, out_days),
                           np.where(zero, 0, out_micros) * 1000, valid)
    return finish(out, scalar)
