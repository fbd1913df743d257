"""Date and time functions: EXTRACT / date_part, year() & co, date_trunc, date_diff, make_date,
strftime / strptime, epoch, to_timestamp, current_date, and INTERVAL values.

DATE is Arrow date32, TIMESTAMP is timestamp[us], INTERVAL is month_day_nano (three
independent fields, like DuckDB's). Calendar arithmetic lives in ``calendar``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import ExecutionError, NotSupportedError, PlanError, did_you_mean
from plansight.engine.functions.scalar import calendar as C
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import cast_expr
from plansight.engine.functions.scalar.registry import (
    binder,
    call,
    coerce,
    expect_arity,
    kernel,
    signature_error,
)
from plansight.engine.functions.scalar.temporal_values import (
    UNIT_FIELDS,
    make_date_values,
)
from plansight.engine.functions.scalar.vector import (
    Value,
    broadcast,
    finish,
    from_numpy,
    is_scalar,
    to_numpy,
)
from plansight.engine.logical.expr import Call, Expr, Literal

# ----------------------------------------------------------------------------- binding helpers

def _temporal_arg(name: str, args: list[Expr], arg: Expr) -> Expr:
    """A DATE or TIMESTAMP argument (string literals parse as TIMESTAMP)."""
    if T.is_date(arg.type) or T.is_timestamp(arg.type):
        return arg
    if T.is_string_literal(arg) or (T.is_null_literal(arg) and T.is_null_type(arg.type)):
        return cast_expr(arg, T.TIMESTAMP)  # a typed NULL of another type is refused
    raise signature_error(name, args, "DATE or TIMESTAMP")


def _unit_arg(name: str, args: list[Expr], arg: Expr) -> str:
    if not isinstance(arg, Literal) or not T.is_string(arg.type) or arg.value is None:
        raise NotSupportedError(f"{name} with a non-constant date part is not supported")
    return arg.value.lower()


# ----------------------------------------------------------------------------- date_part

_PART_ALIASES = {
    "year": "year", "years": "year", "y": "year", "yr": "year", "yrs": "year",
    "month": "month", "months": "month", "mon": "month", "mons": "month",
    "day": "day", "days": "day", "d": "day", "dayofmonth": "day",
    "quarter": "quarter", "quarters": "quarter",
    "dow": "dow", "dayofweek": "dow", "weekday": "dow", "isodow": "isodow",
    "doy": "doy", "dayofyear": "doy", "week": "week", "weeks": "week", "w": "week",
    "weekofyear": "week", "isoyear": "isoyear", "yearweek": "yearweek",
    "hour": "hour", "hours": "hour", "h": "hour", "hr": "hour",
    "minute": "minute", "minutes": "minute", "min": "minute", "m": "minute",
    "second": "second", "seconds": "second", "sec": "second", "s": "second",
    "millisecond": "millisecond", "milliseconds": "millisecond", "ms": "millisecond",
    "microsecond": "microsecond", "microseconds": "microsecond", "us": "microsecond",
    "epoch": "epoch", "decade": "decade", "decades": "decade", "century": "century",
    "centuries": "century", "millennium": "millennium", "millennia": "millennium",
    "era": "era",
}


def part_name(unit: str) -> str:
    if unit not in _PART_ALIASES:
        raise PlanError(f"unknown date part '{unit}'." + did_you_mean(unit, _PART_ALIASES))
    return _PART_ALIASES[unit]


@binder("date_part", "datepart", "extract")
def bind_date_part(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("date_part", args, 2)
    part = part_name(_unit_arg("date_part", args, args[0]))
    return _bind_part(part, args[1], args)


def _bind_part(part: str, x: Expr, args: list[Expr]) -> Expr:
    result = pa.float64() if part == "epoch" else pa.int64()
    if T.is_interval(x.type) or T.is_duration(x.type):
        if part not in ("year", "month", "day", "hour", "minute", "second", "millisecond",
                        "microsecond", "epoch"):
            raise NotSupportedError(f"date part '{part}' of an INTERVAL is not supported")
        if T.is_duration(x.type):
            x = cast_expr(x, T.INTERVAL)
        return call("date_part", [Literal(part, pa.string()), x], result)
    x = _temporal_arg(f"date_part('{part}')", args, x)
    if T.is_date(x.type) and part in ("hour", "minute", "second", "millisecond",
                                      "microsecond"):
        x = cast_expr(x, T.TIMESTAMP)
    return call("date_part", [Literal(part, pa.string()), x], result)


def _part_binder(part: str):
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        expect_arity(part, args, 1)
        return _bind_part(part_name(part), args[0], args)
    return bind


for _name in ("year", "month", "day", "dayofmonth", "quarter", "dayofweek", "weekday",
              "isodow", "dayofyear", "week", "weekofyear", "yearweek", "isoyear", "hour",
              "minute", "second", "millisecond", "microsecond", "decade", "century",
              "millennium", "era"):
    binder(_name)(_part_binder(_name))


@kernel("date_part")
def date_part_kernel(args: list[Value], call_: Call) -> Value:
    part = args[0].as_py() if is_scalar(args[0]) else args[0][0].as_py()
    x = args[1]
    if T.is_interval(x.type):
        return _interval_part(part, x)
    fields = {
        "year": pc.year, "month": pc.month, "day": pc.day, "quarter": pc.quarter,
        "doy": pc.day_of_year, "week": pc.iso_week, "isoyear": pc.iso_year,
        "hour": pc.hour, "minute": pc.minute, "second": pc.second,
    }
    if part in fields:
        return pc.cast(fields[part](x), pa.int64())
    if part == "dow":
        return pc.cast(pc.day_of_week(x, count_from_zero=True, week_start=7), pa.int64())
    if part == "isodow":
        return pc.cast(pc.day_of_week(x, count_from_zero=False, week_start=1), pa.int64())
    if part == "yearweek":
        return pc.add(pc.multiply(pc.cast(pc.iso_year(x), pa.int64()), 100),
                      pc.cast(pc.iso_week(x), pa.int64()))
    if part in ("millisecond", "microsecond"):
        seconds = pc.cast(pc.second(x), pa.int64())
        micros = pc.add(pc.multiply(pc.cast(pc.millisecond(x), pa.int64()), 1000),
                        pc.cast(pc.microsecond(x), pa.int64()))
        if part == "millisecond":
            return pc.add(pc.multiply(seconds, 1000), pc.divide(micros, 1000))
        return pc.add(pc.multiply(seconds, 1_000_000), micros)
    if part == "epoch":
        return _epoch_seconds(x)
    year = pc.cast(pc.year(x), pa.int64())
    (years,), scalar = broadcast([year])
    y = to_numpy(years).astype(np.int64)
    valid = np.asarray(years.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if part == "decade":
        out = y // 10
    elif part == "century":
        out = np.where(y > 0, (y - 1) // 100 + 1, y // 100 - 1)
    elif part == "millennium":
        out = np.where(y > 0, (y - 1) // 1000 + 1, y // 1000 - 1)
    else:  # era
        out = (y > 0).astype(np.int64)
    return finish(from_numpy(out, valid, pa.int64()), scalar)


def _epoch_seconds(x: Value) -> Value:
    if T.is_date(x.type):
        days = pc.cast(pc.cast(x, pa.int32()), pa.float64())
        return pc.multiply(days, 86400.0)
    micros = pc.cast(pc.cast(x, pa.timestamp("us", tz=x.type.tz)), pa.int64())
    return pc.divide(pc.cast(micros, pa.float64()), 1e6)


def _interval_part(part: str, x: Value) -> Value:
    (array,), scalar = broadcast([x])
    months, days, nanos, valid = C.interval_parts(array)
    out = {
        "year": lambda: np.trunc(months / 12).astype(np.int64),
        "month": lambda: np.fmod(months, 12),
        "day": lambda: days,
        "hour": lambda: np.trunc(nanos / 3.6e12).astype(np.int64),
        "minute": lambda: np.fmod(np.trunc(nanos / 6e10).astype(np.int64), 60),
        "second": lambda: np.fmod(np.trunc(nanos / 1e9).astype(np.int64), 60),
        "millisecond": lambda: np.fmod(np.trunc(nanos / 1e6).astype(np.int64), 60_000),
        "microsecond": lambda: np.fmod(np.trunc(nanos / 1e3).astype(np.int64), 60_000_000),
    }
    if part == "epoch":
        seconds = months * 30 * 86400.0 + days * 86400.0 + nanos / 1e9
        return finish(from_numpy(seconds, valid, pa.float64()), scalar)
    return finish(from_numpy(out[part](), valid, pa.int64()), scalar)


# ----------------------------------------------------------------------------- names, last_day

def _name_binder(func: str):
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        expect_arity(func, args, 1)
        x = _temporal_arg(func, args, args[0])
        return call(func, [cast_expr(x, T.TIMESTAMP) if T.is_date(x.type) else x], pa.string())
    return bind


binder("dayname")(_name_binder("dayname"))
binder("monthname")(_name_binder("monthname"))


@kernel("dayname", "monthname")
def names_kernel(args: list[Value], call_: Call) -> Value:
    fmt = "%A" if call_.func == "dayname" else "%B"
    return pc.strftime(args[0], format=fmt, locale="C")


@binder("last_day")
def bind_last_day(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("last_day", args, 1)
    return call("last_day", [_temporal_arg("last_day", args, args[0])], pa.date32())


@kernel("last_day")
def last_day_kernel(args: list[Value], call_: Call) -> Value:
    (x,), scalar = broadcast(args)
    days = _days(x)
    valid = np.asarray(x.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    y, m, _ = C.civil_from_days(days)
    last = C.days_from_civil(y, m, C.days_in_month(y, m))
    return finish(pc.cast(from_numpy(last.astype(np.int32), valid, pa.int32()), pa.date32()),
                  scalar)


def _days(x: pa.Array) -> np.ndarray:
    """Days since the epoch of a date or timestamp array (nulls read 0)."""
    if T.is_date(x.type):
        return to_numpy(pc.cast(x, pa.int32())).astype(np.int64)
    micros = to_numpy(pc.cast(pc.cast(x, pa.timestamp("us", tz=x.type.tz)), pa.int64()))
    return np.floor_divide(micros.astype(np.int64), C.MICROS_PER_DAY)


# ----------------------------------------------------------------------------- date_trunc

_TRUNC_UNITS = {
    "year": "year", "quarter": "quarter", "month": "month", "week": "week", "day": "day",
    "hour": "hour", "minute": "minute", "second": "second", "millisecond": "millisecond",
    "microsecond": "microsecond", "decade": "decade", "century": "century",
    "millennium": "millennium",
}


@binder("date_trunc", "datetrunc")
def bind_date_trunc(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("date_trunc", args, 2)
    part = part_name(_unit_arg("date_trunc", args, args[0]))
    if part not in _TRUNC_UNITS:
        raise PlanError(f"date_trunc does not support the date part '{part}'")
    x = _temporal_arg("date_trunc", args, args[1])
    stamp = cast_expr(x, T.TIMESTAMP) if T.is_date(x.type) else x
    return call("date_trunc", [Literal(part, pa.string()), stamp], stamp.type)


@kernel("date_trunc")
def date_trunc_kernel(args: list[Value], call_: Call) -> Value:
    part = args[0].as_py() if is_scalar(args[0]) else args[0][0].as_py()
    x = args[1]
    if part in ("decade", "century", "millennium"):
        (array,), scalar = broadcast([x])
        y, _, _ = C.civil_from_days(_days(array))
        step = {"decade": 10, "century": 100, "millennium": 1000}[part]
        start = (y // step) * step  # DuckDB truncates to multiples: 1995 -> 1900 (century)
        days = C.days_from_civil(start, np.ones_like(start), np.ones_like(start))
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        micros = from_numpy(days * C.MICROS_PER_DAY, valid, pa.int64())
        result = pc.cast(pc.cast(micros, pa.timestamp("us")), x.type)
        return finish(result, scalar)
    return pc.floor_temporal(x, unit=part, week_starts_monday=True)


# ----------------------------------------------------------------------------- date_diff

@binder("date_diff", "datediff", "date_sub", "datesub")
def bind_date_diff(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("date_diff", args, 3)
    part = part_name(_unit_arg("date_diff", args, args[0]))
    a = _temporal_arg("date_diff", args, args[1])
    b = _temporal_arg("date_diff", args, args[2])
    if T.is_timestamp(a.type) or T.is_timestamp(b.type) or part in (
            "hour", "minute", "second", "millisecond", "microsecond"):
        target = T.common_supertype([a.type, b.type, T.TIMESTAMP], "date_diff")
        a, b = cast_expr(a, target), cast_expr(b, target)
    return call("date_diff", [Literal(part, pa.string()), a, b], pa.int64())


@kernel("date_diff")
def date_diff_kernel(args: list[Value], call_: Call) -> Value:
    """Boundaries crossed between a and b (DuckDB's date_diff); weeks are whole 7-day spans."""
    part = args[0].as_py() if is_scalar(args[0]) else args[0][0].as_py()
    (a, b), scalar = broadcast(args[1:])
    valid = np.asarray(pc.and_(a.is_valid(), b.is_valid()).to_numpy(zero_copy_only=False),
                       dtype=bool)
    if part in ("hour", "minute", "second", "millisecond", "microsecond"):
        per = {"hour": 3_600_000_000, "minute": 60_000_000, "second": 1_000_000,
               "millisecond": 1_000, "microsecond": 1}[part]
        ua = to_numpy(pc.cast(pc.cast(a, pa.timestamp("us")), pa.int64())).astype(np.int64)
        ub = to_numpy(pc.cast(pc.cast(b, pa.timestamp("us")), pa.int64())).astype(np.int64)
        out = ub // per - ua // per
        return finish(from_numpy(out, valid, pa.int64()), scalar)
    if part in ("month", "quarter", "year", "isoyear"):  # Arrow's calendar fields are fastest
        ya, yb = (pc.cast(pc.year(x), pa.int64()) for x in (a, b))
        if part in ("year", "isoyear"):
            return finish(pc.subtract(yb, ya), scalar)
        ma, mb = (pc.cast(pc.month(x), pa.int64()) for x in (a, b))
        if part == "month":
            return finish(pc.subtract(pc.add(pc.multiply(yb, 12), mb),
                                      pc.add(pc.multiply(ya, 12), ma)), scalar)
        qa, qb = (pc.cast(pc.quarter(x), pa.int64()) for x in (a, b))
        return finish(pc.subtract(pc.add(pc.multiply(yb, 4), qb),
                                  pc.add(pc.multiply(ya, 4), qa)), scalar)
    da, db = _days(a), _days(b)
    if part in ("day", "doy", "dow", "isodow"):
        out = db - da
    elif part == "week":
        out = np.trunc((db - da) / 7).astype(np.int64)
    else:
        ya, ma, _ = C.civil_from_days(da)
        yb, mb, _ = C.civil_from_days(db)
        if part == "month":
            out = (yb * 12 + mb) - (ya * 12 + ma)
        elif part == "quarter":
            out = (yb * 4 + (mb - 1) // 3) - (ya * 4 + (ma - 1) // 3)
        elif part in ("year", "isoyear"):
            out = yb - ya
        elif part == "decade":
            out = yb // 10 - ya // 10
        elif part == "century":
            out = yb // 100 - ya // 100
        elif part == "millennium":
            out = yb // 1000 - ya // 1000
        else:
            raise ExecutionError(f"date_diff does not support the date part '{part}'")
    return finish(from_numpy(np.asarray(out, dtype=np.int64), valid, pa.int64()), scalar)


# ----------------------------------------------------------------------------- constructors

@binder("make_date")
def bind_make_date(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("make_date", args, 3)
    typed = [coerce(a, pa.int64(), "make_date", args, "BIGINT") for a in args]
    return call("make_date", typed, pa.date32())


@kernel("make_date")
def make_date_kernel(args: list[Value], call_: Call) -> Value:
    (y, m, d), scalar = broadcast(args)
    result, possible = make_date_values(y, m, d)
    if not pc.all(possible).as_py():
        bad = np.flatnonzero(~np.asarray(possible.to_numpy(zero_copy_only=False)))[0]
        raise ExecutionError(f"Date out of range: {y[bad]}-{m[bad]}-{d[bad]}")
    return finish(result, scalar)


@binder("current_date", "today")
def bind_current_date(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("current_date", args, 0)
    return call("current_date", [], pa.date32())


@kernel("current_date")
def current_date_kernel(args: list[Value], call_: Call) -> Value:
    return pa.scalar(datetime.now(timezone.utc).date(), pa.date32())


@binder("now", "current_timestamp", "get_current_timestamp", "transaction_timestamp")
def bind_now(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("now", args, 0)
    return call("now", [], pa.timestamp("us", tz="UTC"))


@kernel("now")
def now_kernel(args: list[Value], call_: Call) -> Value:
    return pa.scalar(datetime.now(timezone.utc), pa.timestamp("us", tz="UTC"))


def _interval_unit_binder(unit: str):
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        expect_arity(f"to_{unit}", args, 1)
        x = coerce(args[0], pa.int64(), f"to_{unit}", args, "an integer")
        return call(f"to_{unit}", [x], T.INTERVAL)
    return bind


for _unit in ("years", "months", "weeks", "days", "hours", "minutes", "seconds",
              "milliseconds", "microseconds", "quarters", "decades", "centuries", "millennia"):
    binder(f"to_{_unit}")(_interval_unit_binder(_unit))


def _interval_kernel(args: list[Value], call_: Call) -> Value:
    unit = call_.func[3:]
    months, days, micros = UNIT_FIELDS[unit]
    (x,), scalar = broadcast(args)
    n = to_numpy(x).astype(np.int64)
    valid = np.asarray(x.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return finish(C.make_intervals(n * months, n * days, n * micros * 1000, valid), scalar)


for _unit in UNIT_FIELDS:
    kernel(f"to_{_unit}")(_interval_kernel)


# ----------------------------------------------------------------------------- epoch & formats

@binder("epoch")
def bind_epoch(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("epoch", args, 1)
    x = args[0]
    if T.is_interval(x.type) or T.is_duration(x.type):
        return _bind_part("epoch", x, args)
    return call("date_part", [Literal("epoch", pa.string()),
                              _temporal_arg("epoch", args, x)], pa.float64())


@binder("epoch_ms")
def bind_epoch_ms(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    """``epoch_ms(timestamp)`` -> milliseconds; ``epoch_ms(bigint)`` -> TIMESTAMP."""
    expect_arity("epoch_ms", args, 1)
    x = args[0]
    if T.is_integer(x.type) or T.is_null_type(x.type):  # CAST(NULL AS DATE): a DATE
        return call("epoch_ms_to_timestamp", [coerce(x, pa.int64(), "epoch_ms", args)],
                    T.TIMESTAMP)
    return call("epoch_ms", [_temporal_arg("epoch_ms", args, x)], pa.int64())


@kernel("epoch_ms")
def epoch_ms_kernel(args: list[Value], call_: Call) -> Value:
    x = args[0]
    if T.is_date(x.type):
        return pc.multiply(pc.cast(pc.cast(x, pa.int32()), pa.int64()), 86_400_000)
    micros = pc.cast(pc.cast(x, pa.timestamp("us", tz=x.type.tz)), pa.int64())
    (array,), scalar = broadcast([micros])
    # DuckDB rounds microseconds to the nearest millisecond, halves away from zero
    micros_np = to_numpy(array).astype(np.int64)
    values = np.sign(micros_np) * ((np.abs(micros_np) + 500) // 1000)
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return finish(from_numpy(values, valid, pa.int64()), scalar)


@kernel("epoch_ms_to_timestamp")
def epoch_ms_to_timestamp_kernel(args: list[Value], call_: Call) -> Value:
    return pc.cast(pc.cast(pc.multiply_checked(args[0], 1000), pa.int64()), T.TIMESTAMP)


@binder("to_timestamp")
def bind_to_timestamp(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("to_timestamp", args, 1)
    x = coerce(args[0], pa.float64(), "to_timestamp", args, "a number of seconds")
    return call("to_timestamp", [x], pa.timestamp("us", tz="UTC"))


@kernel("to_timestamp")
def to_timestamp_kernel(args: list[Value], call_: Call) -> Value:
    micros = pc.round(pc.multiply(args[0], 1e6))
    return pc.cast(pc.cast(micros, pa.int64()), call_.type)


@binder("strftime")
def bind_strftime(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("strftime", args, 2)
    x, fmt = args
    if T.is_string(x.type) and not T.is_string(fmt.type):
        x, fmt = fmt, x  # DuckDB accepts strftime(format, value) too
    x = _temporal_arg("strftime", args, x)
    fmt = coerce(fmt, pa.string(), "strftime", args, "a format string")
    return call("strftime", [x, fmt], pa.string())


@kernel("strftime")
def strftime_kernel(args: list[Value], call_: Call) -> Value:
    x, fmt = args
    if not is_scalar(fmt):
        raise NotSupportedError("strftime with a per-row format is not supported")
    if not fmt.is_valid:
        return pa.scalar(None, pa.string()) if is_scalar(x) else pa.nulls(len(x), pa.string())
    text = fmt.as_py()
    if T.is_date(x.type):
        x = pc.cast(x, T.TIMESTAMP)
    # Arrow's %S prints fractional seconds for sub-second units; DuckDB's %f is microseconds
    seconds = pc.cast(pc.floor_temporal(x, unit="second"), pa.timestamp("s", tz=x.type.tz))
    if "%f" in text:
        micros = pc.utf8_lpad(pc.cast(pc.add(pc.multiply(
            pc.cast(pc.millisecond(x), pa.int64()), 1000),
            pc.cast(pc.microsecond(x), pa.int64())), pa.string()), 6, "0")
        pieces = text.split("%f")
        parts = [pc.strftime(seconds, format=p, locale="C") if p else pa.scalar("")
                 for p in pieces]
        joined = parts[0]
        for piece in parts[1:]:
            joined = pc.binary_join_element_wise(joined, micros, piece, "")
        return joined
    text = text.replace("%-d", "%e").replace("%-m", "%m")
    return pc.strftime(seconds, format=text, locale="C")


@binder("strptime")
def bind_strptime(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    expect_arity("strptime", args, 2)
    typed = [coerce(a, pa.string(), "strptime", args, "VARCHAR") for a in args]
    return call("strptime", typed, T.TIMESTAMP)


@kernel("strptime")
def strptime_kernel(args: list[Value], call_: Call) -> Value:
    x, fmt = args
    if not is_scalar(fmt):
        raise NotSupportedError("strptime with a per-row format is not supported")
    if not fmt.is_valid:
        return pa.scalar(None, T.TIMESTAMP) if is_scalar(x) else pa.nulls(len(x), T.TIMESTAMP)
    try:
        return pc.strptime(x, format=fmt.as_py(), unit="us")
    except pa.ArrowInvalid as e:
        raise ExecutionError(f"strptime: {e}") from e
