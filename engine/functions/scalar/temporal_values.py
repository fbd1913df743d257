"""Temporal values: intervals from units and text, intervals as text, dates from parts.

Shared by casts (``CAST('1 day' AS INTERVAL)``, ``CAST(interval AS VARCHAR)``) and the
temporal functions; it sits below both so neither imports the other.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.functions.scalar import calendar as C
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.vector import (
    Value,
    broadcast,
    finish,
    from_numpy,
    to_numpy,
)
from plansight.engine.logical.expr import Literal

UNIT_FIELDS = {  # unit -> (months, days, microseconds) per 1
    "years": (12, 0, 0), "quarters": (3, 0, 0), "months": (1, 0, 0), "weeks": (0, 7, 0),
    "days": (0, 1, 0), "hours": (0, 0, 3_600_000_000), "minutes": (0, 0, 60_000_000),
    "seconds": (0, 0, 1_000_000), "milliseconds": (0, 0, 1_000), "microseconds": (0, 0, 1),
    "decades": (120, 0, 0), "centuries": (1200, 0, 0), "millennia": (12000, 0, 0),
}
TEXT_UNITS = {
    "y": "years", "yr": "years", "yrs": "years", "year": "years", "years": "years",
    "mon": "months", "mons": "months", "month": "months", "months": "months",
    "w": "weeks", "week": "weeks", "weeks": "weeks", "d": "days", "day": "days",
    "days": "days", "h": "hours", "hr": "hours", "hrs": "hours", "hour": "hours",
    "hours": "hours", "m": "minutes", "min": "minutes", "mins": "minutes", "minute": "minutes",
    "minutes": "minutes", "s": "seconds", "sec": "seconds", "secs": "seconds",
    "second": "seconds", "seconds": "seconds", "ms": "milliseconds", "msec": "milliseconds",
    "millisecond": "milliseconds", "milliseconds": "milliseconds", "us": "microseconds",
    "microsecond": "microseconds", "microseconds": "microseconds", "quarter": "quarters",
    "quarters": "quarters", "decade": "decades", "decades": "decades",
    "century": "centuries", "centuries": "centuries",
}


# ----------------------------------------------------------------------------- intervals

def interval_value(amount: float, unit: str) -> pa.MonthDayNano:
    """``amount`` ``unit``s (a plural unit name, see UNIT_FIELDS) as a MonthDayNano."""
    months, days, micros = UNIT_FIELDS[unit]
    if months:
        whole = int(amount)
        frac_days = round((amount - whole) * months * 30)  # DuckDB: fraction of a month = 30d
        return pa.MonthDayNano([whole * months, frac_days, 0])
    if days:
        whole = int(amount)
        nanos = round((amount - whole) * days * C.NANOS_PER_DAY)
        return pa.MonthDayNano([0, whole * days, nanos])
    return pa.MonthDayNano([0, 0, round(amount * micros * 1000)])


def interval_literal(amount: float, unit: str) -> Literal:
    return Literal(interval_value(amount, unit), T.INTERVAL)


def parse_interval_text(text: str) -> pa.MonthDayNano:
    """Parse ``'1 year 2 months 3 days'`` / ``'90 days'`` / ``'01:30:00'`` like DuckDB.

    Example:
        >>> parse_interval_text("1 year 2 months 3 days")
        MonthDayNano(months=14, days=3, nanoseconds=0)
    """
    months = days = nanos = 0
    rest = text.strip().lower()
    clock = re.search(r"(-?)(\d+):(\d{1,2})(?::(\d{1,2}(?:\.\d+)?))?$", rest)
    if clock:
        sign = -1 if clock.group(1) else 1
        seconds = (int(clock.group(2)) * 3600 + int(clock.group(3)) * 60
                   + float(clock.group(4) or 0))
        nanos += sign * round(seconds * 1e9)
        rest = rest[:clock.start()].strip()
    tokens = re.findall(r"([+-]?\d+(?:\.\d+)?)\s*([a-z]+)", rest)
    if re.sub(r"([+-]?\d+(?:\.\d+)?)\s*([a-z]+)", "", rest).strip(" ,"):
        raise ValueError(f"invalid interval '{text}'")
    if not tokens and not clock:
        raise ValueError(f"invalid interval '{text}'")
    for amount, unit in tokens:
        if unit not in TEXT_UNITS:
            raise ValueError(f"unknown interval unit '{unit}'")
        value = interval_value(float(amount) if "." in amount else int(amount), TEXT_UNITS[unit])
        months, days, nanos = (months + value.months, days + value.days,
                               nanos + value.nanoseconds)
    return pa.MonthDayNano([months, days, nanos])


def interval_to_string(value: Value) -> Value:
    """DuckDB's text form of intervals: ``1 year 2 months 3 days 01:02:03``."""
    (array,), scalar = broadcast([value])
    if T.is_duration(array.type):
        micros = to_numpy(pc.cast(pc.cast(array, pa.duration("us")), pa.int64()))
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        days = np.sign(micros) * (np.abs(micros) // C.MICROS_PER_DAY)  # toward zero
        months, nanos = np.zeros_like(days), (micros - days * C.MICROS_PER_DAY) * 1000
    else:
        months, days, nanos, valid = C.interval_parts(array)
    years, rem_months = np.divmod(np.abs(months), 12)
    years, rem_months = years * np.sign(months), rem_months * np.sign(months)

    def part(count: np.ndarray, singular: str) -> pa.Array:
        text = pc.cast(pa.array(count), pa.string())
        plural = pc.if_else(pa.array(np.abs(count) == 1), f" {singular}", f" {singular}s")
        word = pc.binary_join_element_wise(text, plural, "")
        return pc.if_else(pa.array(count != 0), word, "")

    sign = np.where(nanos < 0, "-", "")
    total_seconds = np.abs(nanos) // 1_000_000_000
    frac = np.abs(nanos) % 1_000_000_000 // 1000
    hh, mm, ss = total_seconds // 3600, total_seconds // 60 % 60, total_seconds % 60
    hms = pc.binary_join_element_wise(
        pa.array(sign), pc.utf8_lpad(pc.cast(pa.array(hh), pa.string()), 2, "0"), ":",
        pc.utf8_lpad(pc.cast(pa.array(mm), pa.string()), 2, "0"), ":",
        pc.utf8_lpad(pc.cast(pa.array(ss), pa.string()), 2, "0"), "")
    hms = pc.if_else(pa.array(frac != 0), pc.binary_join_element_wise(
        hms, pc.utf8_rtrim(pc.utf8_lpad(pc.cast(pa.array(frac), pa.string()), 6, "0"), "0"),
        "."), hms)
    hms = pc.if_else(pa.array(nanos != 0), hms, "")
    pieces = [part(years, "year"), part(rem_months, "month"), part(days, "day"), hms]
    joined = pc.binary_join_element_wise(*pieces, " ")
    joined = pc.utf8_trim(pc.replace_substring_regex(joined, r" +", " "), " ")
    joined = pc.if_else(pc.equal(joined, ""), "00:00:00", joined)
    result = pc.if_else(pa.array(valid), joined, pa.scalar(None, pa.string()))
    return finish(result, scalar)


# ----------------------------------------------------------------------------- dates

def make_date_values(y: pa.Array, m: pa.Array, d: pa.Array) -> tuple[pa.Array, pa.Array]:
    """date32 array from year/month/day int arrays, and a validity flag per row (False for an
    impossible date such as 1995-02-30); rows with a NULL part are NULL."""
    valid = np.ones(len(y), dtype=bool)
    for part in (y, m, d):
        valid &= np.asarray(part.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    yy, mm, dd = (to_numpy(p, 1).astype(np.int64) for p in (y, m, d))
    possible = (mm >= 1) & (mm <= 12) & (dd >= 1) & (dd <= C.days_in_month(yy, mm))
    days = np.where(possible, C.days_from_civil(yy, np.clip(mm, 1, 12), dd), 0)
    result = from_numpy(days.astype(np.int32), valid & possible, pa.int32())
    return pc.cast(result, pa.date32()), pa.array(possible | ~valid)
