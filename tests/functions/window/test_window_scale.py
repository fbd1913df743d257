"""Bigger inputs against DuckDB: long frames (sparse-table blocks, merge-sort tree levels),
one huge partition next to small ones, and thousands of tiny partitions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from window_oracle import Call, Const, compare, oracle, order_sql, ours, sort_rows

from plansight.engine.functions.window import FrameBound, FrameSpec

P, F = (lambda k: FrameBound("preceding", k)), (lambda k: FrameBound("following", k))
UP, UF, CR = (FrameBound("unbounded_preceding"), FrameBound("unbounded_following"),
              FrameBound("current_row"))


def _table(n: int, partition_sizes: np.ndarray, key_range: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    p = np.repeat(np.arange(len(partition_sizes)), partition_sizes)
    rng.shuffle(p)
    o = rng.integers(0, key_range, n)
    base = rng.integers(-1000, 1000, n)
    null = rng.random(n) < 0.1
    return pa.table({
        "p": pa.array(p, pa.int64()),
        "o": pa.array(o, pa.int64(), mask=rng.random(n) < 0.05),
        "id": pa.array(rng.permutation(n), pa.int64()),
        "xi": pa.array(base % 97, pa.int64(), mask=null),
        "xf": pa.array(base * 0.37 + 1e4, pa.float64(), mask=null),
        "xs": pa.array([f"v{v % 300:03d}" for v in base], pa.string(), mask=null),
    })


ROWS_CALLS = [
    Call("min(xi)", "min", ("xi",)), Call("max(xf)", "max", ("xf",)),
    Call("min(xs)", "min", ("xs",)), Call("sum(xf)", "sum", ("xf",), float_result=True),
    Call("var_samp(xf)", "var_samp", ("xf",), float_result=True),
    Call("count(DISTINCT xi)", "count", ("xi",), distinct=True),
    Call("sum(DISTINCT xi)", "sum", ("xi",), distinct=True),
    Call("avg(DISTINCT xf)", "avg", ("xf",), distinct=True, float_result=True),
    Call("first_value(xi IGNORE NULLS)", "first_value", ("xi",), ignore_nulls=True),
    Call("nth_value(xs, 7)", "nth_value", ("xs", Const(7))),
    Call("last_value(xf)", "last_value", ("xf",)),
]
PEER_SAFE = [c for c in ROWS_CALLS if c.func not in ("first_value", "nth_value", "last_value")]

FRAMES = [
    ("rows", FrameSpec("rows", P(100), CR)),
    ("rows", FrameSpec("rows", P(300), F(40), "current_row")),
    ("rows", FrameSpec("rows", UP, P(5))),
    ("rows", FrameSpec("rows", F(2), F(700))),
    ("range", FrameSpec("range", P(30), F(10))),
    ("range", FrameSpec("range", P(200), P(20), "group")),
    ("groups", FrameSpec("groups", P(50), CR, "ties")),
    ("groups", FrameSpec("groups", CR, F(400))),
]


@pytest.mark.parametrize("kind,frame", FRAMES, ids=[f.sql() for _, f in FRAMES])
def test_long_frames_one_huge_partition(kind: str, frame: FrameSpec) -> None:
    sizes = np.array([3000, 700, 1, 299])
    table = _table(int(sizes.sum()), sizes, 900, seed=len(frame.sql()))
    if kind == "rows":
        order, calls = [("o", False, True), ("id", False, False)], ROWS_CALLS
    else:
        order, calls = [("o", True, False)], PEER_SAFE
    if frame.exclude in ("group", "ties"):
        # DISTINCT with EXCLUDE GROUP/TIES materializes frames; keep it to the cheap calls
        calls = [c for c in calls if not c.distinct or c.func == "count"]
    sorted_table = sort_rows(table, order)
    over = f"{order_sql(order)} {frame.sql()}"
    expected = oracle(table, calls, over, order_sql(order))
    for i, call in enumerate(calls):
        got = ours(sorted_table, call, order, frame)
        compare(expected, f"r{i}", sorted_table, got, False, call.float_result,
                f"{call.sql} OVER ({over})")


TINY_CALLS = [
    Call("row_number()", "row_number", rank_like=True),
    Call("rank()", "rank", rank_like=True),
    Call("ntile(2)", "ntile", (Const(2),), rank_like=True),
    Call("lag(xi, 1, -1)", "lag", ("xi", Const(1), Const(-1)), rank_like=True),
    Call("sum(xi)", "sum", ("xi",)), Call("min(xs)", "min", ("xs",)),
    Call("count(DISTINCT xi)", "count", ("xi",), distinct=True),
    Call("string_agg(xs, ';')", "string_agg", ("xs", Const(";", pa.string()))),
    Call("stddev_pop(xf)", "stddev_pop", ("xf",), float_result=True),
]


@pytest.mark.parametrize("frame", [None, FrameSpec("rows", P(1), F(1)),
                                   FrameSpec("rows", UP, UF)], ids=["default", "moving", "all"])
def test_many_tiny_partitions(frame: FrameSpec | None) -> None:
    rng = np.random.default_rng(11)
    sizes = rng.integers(1, 6, 6000)
    table = _table(int(sizes.sum()), sizes, 4, seed=12)
    order = [("o", False, False), ("id", False, False)]
    sorted_table = sort_rows(table, order)
    over = f"{order_sql(order)} {frame.sql() if frame else ''}"
    expected = oracle(table, TINY_CALLS, over, order_sql(order))
    for i, call in enumerate(TINY_CALLS):
        got = ours(sorted_table, call, order, frame)
        compare(expected, f"r{i}", sorted_table, got, False, call.float_result,
                f"{call.sql} OVER ({over})")


def test_float_sums_stay_accurate_deep_into_a_partition() -> None:
    """Small frames far from the partition start: plain float prefix sums would cancel."""
    n = 200_000
    rng = np.random.default_rng(3)
    values = rng.normal(1e9, 1.0, n)
    got = ours_sum(values, FrameSpec("rows", P(2), CR))
    exact = np.array([np.sum(values[max(0, i - 2):i + 1], dtype=np.longdouble) for i in
                      range(n - 50, n)], dtype=np.float64)
    np.testing.assert_allclose(np.array(got[-50:]), exact, rtol=1e-15)
    variance = ours_sum(values, FrameSpec("rows", P(9), CR), "var_samp")[-50:]
    expected = [np.var(values[i - 9:i + 1], ddof=1) for i in range(n - 50, n)]
    np.testing.assert_allclose(variance, expected, rtol=1e-9)


def ours_sum(values: np.ndarray, frame: FrameSpec, func: str = "sum") -> list:
    from plansight.engine.functions.window import evaluate_window

    return evaluate_window(func, [pa.array(values)], partition_starts=np.array([0, len(values)]),
                           order_keys=[], descending=[], nulls_first=[], frame=frame).to_pylist()
