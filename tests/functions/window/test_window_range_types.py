"""RANGE frames with offsets over every supported ORDER BY key type, against DuckDB.

Ints (incl. fractional offsets, which DuckDB applies exactly), small and unsigned ints, floats
with NaN/+-inf keys, float32 (arithmetic in float32), decimals, dates with day counts and
INTERVALs (month arithmetic clamps the day), timestamps with INTERVALs and timedeltas, all in
ASC and DESC with NULLs first and last.
"""

from __future__ import annotations

import datetime
import decimal
import itertools
import zlib

import pyarrow as pa
import pytest
from window_oracle import Call, compare, oracle, order_sql, ours, random_table, sort_rows

from plansight.engine.functions.window import FrameBound, FrameSpec

D = decimal.Decimal
HOUR_NS = 3600 * 10**9

# key type -> [(SQL literal, python offset)]
OFFSETS = {
    "int": [("0", 0), ("1", 1), ("2", 2), ("0.5", 0.5), ("1.5", D("1.5")), ("2.49", D("2.49"))],
    "int8": [("1", 1), ("3", 3)],
    "uint": [("2", 2), ("4", 4), ("0.5", 0.5)],
    "float": [("0", 0), ("0.75", 0.75), ("1.5", 1.5), ("2", 2)],
    "float32": [("0.1", 0.1), ("0.2", 0.2), ("0.3", 0.3)],
    "decimal": [("0.37", D("0.37")), ("0.5", D("0.5")), ("1", 1), ("0.369", D("0.369")),
                ("0.74", 0.74)],
    "date": [("9", 9), ("10", 10), ("INTERVAL '1 month'", pa.MonthDayNano([1, 0, 0])),
             ("INTERVAL '10 days'", datetime.timedelta(days=10)),
             ("INTERVAL '1 month 2 days'", pa.MonthDayNano([1, 2, 0])),
             ("INTERVAL '36 hours'", datetime.timedelta(hours=36)),
             ("INTERVAL '8 days 12 hours'", pa.MonthDayNano([0, 8, 12 * HOUR_NS]))],
    "timestamp": [("INTERVAL '1 day'", datetime.timedelta(days=1)),
                  ("INTERVAL '29 hours'", pa.MonthDayNano([0, 0, 29 * HOUR_NS])),
                  ("INTERVAL '1 month'", pa.MonthDayNano([1, 0, 0])),
                  ("INTERVAL '2 days 5 hours'", pa.MonthDayNano([0, 2, 5 * HOUR_NS])),
                  ("INTERVAL '1 month 1 hour'", pa.MonthDayNano([1, 0, HOUR_NS])),
                  ("INTERVAL '3 days'", datetime.timedelta(days=3))],
}

SHAPES = [
    ("preceding", "following"), ("preceding", "current_row"),
    ("unbounded_preceding", "preceding"), ("following", "unbounded_following"),
    ("current_row", "following"), ("preceding", "preceding"), ("following", "following"),
]

CALLS = [
    Call("count(*)", "count_star"),
    Call("sum(xi)", "sum", ("xi",)),
    Call("min(xs)", "min", ("xs",)),
    Call("max(xf)", "max", ("xf",)),
    Call("avg(xd)", "avg", ("xd",), float_result=True),
    Call("count(DISTINCT xi)", "count", ("xi",), distinct=True),
    Call("sum(xi)", "sum", ("xi",), filter_sql="xb"),
    Call("min(o)", "min", ("o",)),
    Call("max(o)", "max", ("o",)),
    Call("count(DISTINCT o)", "count", ("o",), distinct=True),
]


def _bound_sql(kind: str, offset_sql: str | None) -> str:
    words = kind.replace("_", " ").upper()
    return f"{offset_sql} {words}" if offset_sql is not None else words


def _cases():
    for key_type, offsets in OFFSETS.items():
        for (start, end), desc in itertools.product(SHAPES, (False, True)):
            salt = zlib.crc32(f"{key_type}{start}{end}{desc}".encode())
            first = offsets[salt % len(offsets)]
            second = offsets[(salt // 7) % len(offsets)]
            yield pytest.param(key_type, start, end, first, second, desc,
                               id=f"{key_type}-{start}-{end}-{'desc' if desc else 'asc'}")


@pytest.mark.parametrize("key_type,start,end,first,second,descending", list(_cases()))
def test_range_offsets_by_key_type(key_type, start, end, first, second, descending) -> None:
    def bound(kind, offset):
        if kind in ("preceding", "following"):
            return FrameBound(kind, offset[1]), _bound_sql(kind, offset[0])
        return FrameBound(kind), _bound_sql(kind, None)

    start_bound, start_sql = bound(start, first)
    end_bound, end_sql = bound(end, second)
    frame = FrameSpec("range", start_bound, end_bound)
    frame_sql = f"RANGE BETWEEN {start_sql} AND {end_sql}"
    seed = zlib.crc32(f"{key_type}{frame_sql}{descending}".encode())
    table = random_table(seed, "independent", n=int(seed % 50) + 10, key_type=key_type)
    order = [("o", descending, bool(seed % 2))]
    sorted_table = sort_rows(table, order)
    over = f"{order_sql(order)} {frame_sql}"
    expected = oracle(table, CALLS, over, order_sql(order))
    for i, call in enumerate(CALLS):
        got = ours(sorted_table, call, order, frame)
        compare(expected, f"r{i}", sorted_table, got, False, call.float_result,
                f"{call.sql} OVER ({over})")


@pytest.mark.parametrize("exclude", ["current_row", "group", "ties"])
@pytest.mark.parametrize("key_type", ["float", "date", "decimal"])
def test_range_offsets_with_exclusion(key_type: str, exclude: str) -> None:
    offset_sql, offset = OFFSETS[key_type][1]
    frame = FrameSpec("range", FrameBound("preceding", offset), FrameBound("following", offset),
                      exclude)
    frame_sql = (f"RANGE BETWEEN {offset_sql} PRECEDING AND {offset_sql} FOLLOWING "
                 f"EXCLUDE {exclude.replace('_', ' ').upper()}")
    seed = zlib.crc32(f"{key_type}{exclude}".encode())
    table = random_table(seed, "independent", n=60, key_type=key_type)
    order = [("o", bool(seed % 2), bool(seed % 3))]
    sorted_table = sort_rows(table, order)
    over = f"{order_sql(order)} {frame_sql}"
    expected = oracle(table, CALLS, over, order_sql(order))
    for i, call in enumerate(CALLS):
        got = ours(sorted_table, call, order, frame)
        compare(expected, f"r{i}", sorted_table, got, False, call.float_result,
                f"{call.sql} OVER ({over})")


def test_scalar_offset_accepted() -> None:
    frame = FrameSpec("range", FrameBound("preceding", pa.scalar(2)), FrameBound("current_row"))
    table = random_table(7, "independent", n=30)
    order = [("o", False, False)]
    sorted_table = sort_rows(table, order)
    call = Call("count(*)", "count_star")
    over = f"{order_sql(order)} RANGE BETWEEN 2 PRECEDING AND CURRENT ROW"
    expected = oracle(table, [call], over, order_sql(order))
    compare(expected, "r0", sorted_table, ours(sorted_table, call, order, frame), False, False,
            over)
