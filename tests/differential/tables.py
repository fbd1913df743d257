"""Adversarial tables for the differential suites.

Small tables (``SMALL``): NULLs in keys, values and strings; duplicates; all-equal keys;
Unicode (é, 中文, emoji, the empty string); int64 values near 2**62 chosen so that every
subset sum fits in BIGINT; negatives; float ties; dates across month and year ends (and a leap
day); DECIMAL(15, 2); an empty table per schema. ``big`` / ``big2``: deterministic random
tables (5,000 and 200 rows) for multi-batch, multi-group work.

    t       id, k (int32 group key), v, big, f, s, d, ts, dec, b     14 rows
    u       uid, k, name, w, s                                       10 rows (join partner)
    e       id, k, v, s                                               6 rows, all k = 7
    n       x (int32: 1, 2, NULL)                                     for NOT IN with NULLs
    fl      id, x (NaN, +-inf, -0.0, NULL)                            float edge cases
    t_empty, u_empty                                                  0 rows, schemas of t, u
    big     id, g, h, x, y, dt, flag                                  5,000 rows
    big2    g, label, weight                                          200 rows
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa

D = dt.date


def _t() -> pa.Table:
    return pa.table({
        "id": pa.array(range(1, 15), pa.int64()),
        "k": pa.array([1, 1, 2, 2, 2, 3, None, None, 4, 1, 5, 3, None, 2], pa.int32()),
        "v": pa.array([10, -5, None, 0, 7, 7, 3, None, -100, 10, 2, 2, 1, 8], pa.int64()),
        # positives sum to < 2**63: no subset sum overflows BIGINT
        "big": pa.array([2**62, -(2**62), 2**61 + 1, None, -3, 2**60 + 3, -(2**61) - 5,
                         17, None, 0, -1, 123456789, 2**40, -(2**40)], pa.int64()),
        "f": pa.array([1.5, 1.5, -2.25, None, 0.0, 3.125, 1e10, 1.5, -0.5, None, 2.0, 2.0,
                       1e-3, 7.75], pa.float64()),
        "s": pa.array(["a", "B", None, "", "é", "中文", "🎉", "a", "abc", "A", None, "résumé",
                       "x y", "zz"], pa.string()),
        "d": pa.array([D(2023, 12, 31), D(2024, 1, 1), D(2024, 2, 29), D(2024, 3, 1), None,
                       D(2023, 1, 31), D(2000, 2, 28), D(1999, 12, 31), D(2024, 12, 31),
                       D(2024, 1, 31), D(2023, 12, 31), None, D(1970, 1, 1), D(2024, 3, 31)],
                      pa.date32()),
        "ts": pa.array([dt.datetime(2023, 12, 31, 23, 59, 59), dt.datetime(2024, 1, 1),
                        dt.datetime(2024, 2, 29, 12, 30), None,
                        dt.datetime(2024, 3, 10, 1, 2, 3, 456789),
                        dt.datetime(2023, 1, 31, 6), dt.datetime(2000, 2, 28, 23),
                        dt.datetime(1999, 12, 31, 23, 59, 59, 999999),
                        dt.datetime(2024, 12, 31, 18), dt.datetime(2024, 1, 31, 0, 0, 1),
                        None, dt.datetime(2023, 12, 31, 23, 59, 59),
                        dt.datetime(1970, 1, 1), dt.datetime(2024, 6, 15, 12)],
                       pa.timestamp("us")),
        "dec": pa.array([Decimal(x) if x is not None else None for x in
                         ["12.34", "-0.05", None, "100.00", "2.50", "-7.25", "0.00",
                          "99999.99", "12.34", None, "1.01", "3.33", "-3.33", "0.10"]],
                        pa.decimal128(15, 2)),
        "b": pa.array([True, False, None, True, True, False, None, False, True, True, False,
                       None, True, False]),
    })


def _u() -> pa.Table:
    return pa.table({
        "uid": pa.array(range(101, 111), pa.int64()),
        "k": pa.array([1, 2, 2, None, 3, 9, 1, None, 6, 4], pa.int32()),
        "name": pa.array(["one", "two", "deux", "null", "three", "nine", "uno", None, "six",
                          "four"]),
        "w": pa.array([5, 7, None, 1, 7, -2, 10, 3, 0, 100], pa.int64()),
        "s": pa.array(["a", "é", "B", None, "zz", "", "a", "中文", "q", None]),
    })


def _e() -> pa.Table:
    return pa.table({
        "id": pa.array(range(1, 7), pa.int64()),
        "k": pa.array([7] * 6, pa.int32()),
        "v": pa.array([1, 1, 1, 2, None, 1], pa.int64()),
        "s": pa.array(["same"] * 6),
    })


def _n() -> pa.Table:
    return pa.table({"x": pa.array([1, 2, None], pa.int32())})


def _fl() -> pa.Table:
    return pa.table({
        "id": pa.array(range(1, 9), pa.int64()),
        "x": pa.array([1.0, float("nan"), float("inf"), float("-inf"), -0.0, 0.0, None,
                       float("nan")], pa.float64()),
    })


def _big(rows: int = 5000, seed: int = 20240601) -> pa.Table:
    rng = np.random.default_rng(seed)

    def nulls(fraction: float) -> np.ndarray:
        return rng.random(rows) < fraction

    labels = np.array(["alpha", "beta", "gamma", "delta", "épsilon", "zeta", "eta", "θ",
                       "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho",
                       "σ", "tau", "中"], dtype=object)
    g = rng.integers(0, 50, rows)
    h = labels[rng.integers(0, len(labels), rows)]
    x = np.round(rng.normal(0, 100, rows), 2)  # two decimals: many ties
    y = rng.integers(-1000, 1001, rows)
    days = rng.integers(0, 1500, rows)
    flag = rng.random(rows) < 0.4
    return pa.table({
        "id": pa.array(np.arange(rows), pa.int64()),
        "g": pa.array(g, pa.int64(), mask=nulls(0.05)),
        "h": pa.array(h.tolist(), pa.string(), mask=nulls(0.05)),
        "x": pa.array(x, pa.float64(), mask=nulls(0.03)),
        "y": pa.array(y, pa.int64(), mask=nulls(0.03)),
        "dt": pa.array((np.datetime64("2020-01-01") + days).astype("datetime64[D]"),
                       pa.date32(), mask=nulls(0.02)),
        "flag": pa.array(flag, pa.bool_(), mask=nulls(0.1)),
    })


def _big2(rows: int = 200, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 60, rows)  # 50..59 match nothing in big
    return pa.table({
        "g": pa.array(g, pa.int64(), mask=rng.random(rows) < 0.05),
        "label": pa.array([f"L{i % 13}" for i in range(rows)]),
        "weight": pa.array(rng.integers(1, 10, rows), pa.int64()),
    })


def intervals(rows: int, seed: int) -> pa.Table:
    """INTERVALs written many ways: 1 month, 30 days and 720 hours are equal to DuckDB (it
    normalizes a month to 30 days before comparing), and so are negative mixes."""
    rng = np.random.default_rng(seed)
    hour = 3_600_000_000_000
    shapes = [(1, 0, 0), (0, 30, 0), (0, 0, 720 * hour), (0, 1, 0), (0, 0, 24 * hour),
              (0, 0, 36 * hour), (0, 1, 12 * hour), (-1, 45, 0), (0, 15, 0), (12, 0, 0),
              (0, 360, 0), (0, -1, 0), (0, 0, -hour), (1, -30, 5 * hour), (0, 29, 30 * hour),
              (2, 0, -1000)]
    picks = rng.integers(0, len(shapes), rows)
    values = [pa.MonthDayNano(list(shapes[p])) for p in picks]
    return pa.table({"id": pa.array(np.arange(rows)),
                     "iv": pa.array(values, pa.month_day_nano_interval(),
                                    mask=rng.random(rows) < 0.1)})


def _empty_like(table: pa.Table) -> pa.Table:
    return table.schema.empty_table()


T = _t()
U = _u()

SMALL: dict[str, pa.Table] = {
    "t": T, "u": U, "e": _e(), "n": _n(), "fl": _fl(),
    "t_empty": _empty_like(T), "u_empty": _empty_like(U),
}
BIG: dict[str, pa.Table] = {"big": _big(), "big2": _big2()}
ALL: dict[str, pa.Table] = {**SMALL, **BIG}
