"""evaluate_window against DuckDB: every function x frame unit x bound pair x EXCLUDE x ASC/DESC."""

from __future__ import annotations

import itertools
import zlib

import pyarrow as pa
import pytest
from window_oracle import (
    Call,
    Const,
    compare,
    oracle,
    order_sql,
    ours,
    random_table,
    sort_rows,
)

from plansight.engine.functions.window import FrameBound, FrameSpec

# (start kind, end kind) pairs SQL allows
_BOUND_PAIRS = [
    ("unbounded_preceding", "preceding"), ("unbounded_preceding", "current_row"),
    ("unbounded_preceding", "following"), ("unbounded_preceding", "unbounded_following"),
    ("preceding", "preceding"), ("preceding", "current_row"), ("preceding", "following"),
    ("preceding", "unbounded_following"), ("current_row", "current_row"),
    ("current_row", "following"), ("current_row", "unbounded_following"),
    ("following", "following"), ("following", "unbounded_following"),
]
_EXCLUDES = ["no_others", "current_row", "group", "ties"]


def _frame(unit: str, start: str, end: str, exclude: str, salt: int) -> FrameSpec:
    offsets = [0, 1, 2, 3, 5]

    def bound(kind: str, k: int) -> FrameBound:
        if kind in ("preceding", "following"):
            return FrameBound(kind, offsets[k % len(offsets)])
        return FrameBound(kind)

    return FrameSpec(unit, bound(start, salt), bound(end, salt // 5 + 1), exclude)


def _frames():
    for unit, (start, end), exclude in itertools.product(("rows", "range", "groups"),
                                                         _BOUND_PAIRS, _EXCLUDES):
        salt = zlib.crc32(f"{unit}{start}{end}{exclude}".encode())
        yield pytest.param(_frame(unit, start, end, exclude, salt),
                           id=f"{unit}-{start}-{end}-{exclude}")


# frame-aware functions; values depend on (p, o) only, so peers are interchangeable
FRAME_CALLS = [
    Call("first_value(xi)", "first_value", ("xi",)),
    Call("last_value(xs)", "last_value", ("xs",)),
    Call("nth_value(xi, 2)", "nth_value", ("xi", Const(2))),
    Call("first_value(xi IGNORE NULLS)", "first_value", ("xi",), ignore_nulls=True),
    Call("last_value(xf IGNORE NULLS)", "last_value", ("xf",), ignore_nulls=True),
    Call("nth_value(xs, 3 IGNORE NULLS)", "nth_value", ("xs", Const(3)), ignore_nulls=True),
    Call("count(*)", "count_star"),
    Call("count(xi)", "count", ("xi",)),
    Call("sum(xi)", "sum", ("xi",)),
    Call("sum(xf)", "sum", ("xf",), float_result=True),
    Call("sum(xd)", "sum", ("xd",)),
    Call("avg(xi)", "avg", ("xi",), float_result=True),
    Call("avg(xd)", "avg", ("xd",), float_result=True),
    Call("min(xi)", "min", ("xi",)),
    Call("max(xf)", "max", ("xf",)),
    Call("min(xs)", "min", ("xs",)),
    Call("max(xd)", "max", ("xd",)),
    Call("stddev_samp(xf)", "stddev_samp", ("xf",), float_result=True),
    Call("stddev_pop(xi)", "stddev_pop", ("xi",), float_result=True),
    Call("var_samp(xi)", "var_samp", ("xi",), float_result=True),
    Call("var_pop(xf)", "var_pop", ("xf",), float_result=True),
    Call("bool_and(xb)", "bool_and", ("xb",)),
    Call("bool_or(xb)", "bool_or", ("xb",)),
    Call("string_agg(xs, '|')", "string_agg", ("xs", Const("|", pa.string()))),
    Call("count(DISTINCT xi)", "count", ("xi",), distinct=True),
    Call("sum(DISTINCT xi)", "sum", ("xi",), distinct=True),
    Call("avg(DISTINCT xf)", "avg", ("xf",), distinct=True, float_result=True),
    Call("var_pop(DISTINCT xi)", "var_pop", ("xi",), distinct=True, float_result=True),
    # DuckDB concatenates DISTINCT values in no particular order
    Call("string_agg(DISTINCT xs, ',')", "string_agg", ("xs", Const(",", pa.string())),
         distinct=True, unordered=","),
    Call("sum(xi)", "sum", ("xi",), filter_sql="xi > 0"),
    Call("count(*)", "count_star", filter_sql="xb"),
    Call("max(xs)", "max", ("xs",), filter_sql="xi % 2 = 0"),
    Call("count(DISTINCT xs)", "count", ("xs",), distinct=True, filter_sql="xi < 3"),
    Call("nth_value(xs, xi)", "nth_value", ("xs", "xi")),
    Call("string_agg(xi, '-')", "string_agg", ("xi", Const("-", pa.string()))),
]


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("frame", list(_frames()))
def test_frame_functions_by_key(frame: FrameSpec, descending: bool) -> None:
    """Every frame-aware function on tables whose values depend only on (p, o)."""
    seed = zlib.crc32(f"{frame.sql()}{descending}".encode())
    nulls_first = bool(seed % 2)
    table = random_table(seed, "by_key")
    order = [("o", descending, nulls_first)]
    sorted_table = sort_rows(table, order)
    over = f"{order_sql(order)} {frame.sql()}"
    expected = oracle(table, FRAME_CALLS, over, order_sql(order))
    for i, call in enumerate(FRAME_CALLS):
        got = ours(sorted_table, call, order, frame)
        compare(expected, f"r{i}", sorted_table, got, True, call.float_result,
                f"{call.sql} OVER ({over})", call.unordered)


# results that do not depend on the order inside a peer group, for independent values
PEER_SAFE_CALLS = [c for c in FRAME_CALLS
                   if c.func not in ("first_value", "last_value", "nth_value", "string_agg")]


def _peer_safe_frames():
    for param in _frames():
        frame = param.values[0]
        if frame.unit != "rows":
            yield param


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("frame", list(_peer_safe_frames()))
def test_range_groups_aggregates_independent(frame: FrameSpec, descending: bool) -> None:
    """RANGE/GROUPS aggregates over random values, compared row by row (by id)."""
    seed = zlib.crc32(f"indep{frame.sql()}{descending}".encode())
    nulls_first = bool(seed % 3 == 0)
    table = random_table(seed, "independent")
    order = [("o", descending, nulls_first)]
    sorted_table = sort_rows(table, order)
    over = f"{order_sql(order)} {frame.sql()}"
    expected = oracle(table, PEER_SAFE_CALLS, over, order_sql(order))
    for i, call in enumerate(PEER_SAFE_CALLS):
        got = ours(sorted_table, call, order, frame)
        compare(expected, f"r{i}", sorted_table, got, False, call.float_result,
                f"{call.sql} OVER ({over})", call.unordered)


def _rows_frames():
    for param in _frames():
        frame = param.values[0]
        if frame.unit == "rows" and frame.exclude in ("no_others", "current_row"):
            yield param


@pytest.mark.parametrize("frame", list(_rows_frames()))
def test_rows_frames_with_unique_order(frame: FrameSpec) -> None:
    """ROWS frames over random values with ORDER BY o, id (a total order): every function."""
    seed = zlib.crc32(f"rows{frame.sql()}".encode())
    table = random_table(seed, "independent")
    order = [("o", bool(seed % 2), bool(seed % 3)), ("id", False, False)]
    sorted_table = sort_rows(table, order)
    over = f"{order_sql(order)} {frame.sql()}"
    expected = oracle(table, FRAME_CALLS, over, order_sql(order))
    for i, call in enumerate(FRAME_CALLS):
        got = ours(sorted_table, call, order, frame)
        compare(expected, f"r{i}", sorted_table, got, False, call.float_result,
                f"{call.sql} OVER ({over})", call.unordered)


RANK_CALLS = [
    Call("rank()", "rank", rank_like=True),
    Call("dense_rank()", "dense_rank", rank_like=True),
    Call("percent_rank()", "percent_rank", rank_like=True, float_result=True),
    Call("cume_dist()", "cume_dist", rank_like=True, float_result=True),
]
ORDERED_CALLS = [
    Call("row_number()", "row_number", rank_like=True),
    Call("ntile(3)", "ntile", (Const(3),), rank_like=True),
    Call("ntile(7)", "ntile", (Const(7),), rank_like=True),
    Call("lag(xi)", "lag", ("xi",), rank_like=True),
    Call("lead(xs)", "lead", ("xs",), rank_like=True),
    Call("lag(xi, 2, -100)", "lag", ("xi", Const(2), Const(-100)), rank_like=True),
    Call("lead(xf, 3, 0.5)", "lead", ("xf", Const(3), Const(0.5, pa.float64())),
         rank_like=True),
    Call("lag(xi, 0)", "lag", ("xi", Const(0)), rank_like=True),
    Call("lag(xi, -2)", "lag", ("xi", Const(-2)), rank_like=True),
    Call("lag(xi IGNORE NULLS)", "lag", ("xi",), ignore_nulls=True, rank_like=True),
    Call("lead(xi, 2 IGNORE NULLS)", "lead", ("xi", Const(2)), ignore_nulls=True,
         rank_like=True),
    Call("lag(xs, 3, 'none' IGNORE NULLS)", "lag",
         ("xs", Const(3), Const("none", pa.string())), ignore_nulls=True, rank_like=True),
    Call("lag(xi, 0 IGNORE NULLS)", "lag", ("xi", Const(0)), ignore_nulls=True,
         rank_like=True),
    Call("lead(xi, -1 IGNORE NULLS)", "lead", ("xi", Const(-1)), ignore_nulls=True,
         rank_like=True),
    # per-row offsets, negative and NULL ones included
    Call("lag(xi, xi, -7)", "lag", ("xi", "xi", Const(-7)), rank_like=True),
    Call("lead(xs, xi, 'd' IGNORE NULLS)", "lead", ("xs", "xi", Const("d", pa.string())),
         ignore_nulls=True, rank_like=True),
] + RANK_CALLS


@pytest.mark.parametrize("seed", range(24))
def test_ranking_and_lag_lead(seed: int) -> None:
    """Ranking and lag/lead (frame ignored): rank-like per id with ties; the rest with a
    total order (o, id)."""
    table = random_table(seed, "independent")
    desc, nulls_first = bool(seed % 2), bool(seed // 2 % 2)
    order = [("o", desc, nulls_first)]
    sorted_table = sort_rows(table, order)
    expected = oracle(table, RANK_CALLS, "", order_sql(order))
    for i, call in enumerate(RANK_CALLS):
        got = ours(sorted_table, call, order, None)
        compare(expected, f"r{i}", sorted_table, got, False, call.float_result, call.sql)
    order = [("o", desc, nulls_first), ("id", False, False)]
    sorted_table = sort_rows(table, order)
    expected = oracle(table, ORDERED_CALLS, "", order_sql(order))
    for i, call in enumerate(ORDERED_CALLS):
        got = ours(sorted_table, call, order, None)
        compare(expected, f"r{i}", sorted_table, got, False, call.float_result, call.sql)


DEFAULT_FRAME_CALLS = PEER_SAFE_CALLS


@pytest.mark.parametrize("with_order", [False, True], ids=["no-order", "order"])
@pytest.mark.parametrize("seed", range(6))
def test_default_frames(seed: int, with_order: bool) -> None:
    """frame=None: RANGE UNBOUNDED PRECEDING..CURRENT ROW with ORDER BY, else the partition."""
    table = random_table(100 + seed, "independent")
    order = [("o", bool(seed % 2), bool(seed % 3 == 1))] if with_order else []
    sorted_table = sort_rows(table, order)
    expected = oracle(table, DEFAULT_FRAME_CALLS, order_sql(order), order_sql(order))
    for i, call in enumerate(DEFAULT_FRAME_CALLS):
        got = ours(sorted_table, call, order, None)
        compare(expected, f"r{i}", sorted_table, got, False, call.float_result, call.sql)
