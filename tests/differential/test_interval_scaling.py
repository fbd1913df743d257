"""INTERVAL * number, number * INTERVAL and INTERVAL / number, against DuckDB.

DuckDB multiplies by an integer exactly (months, days and microseconds each times the factor)
and by anything else, or divides, the PostgreSQL way: fractions of a month cascade down as 30
days, fractions of a day as 86400 seconds, microseconds round half to even. Each expression's
``typeof``, values and Arrow type are compared at partitions 1/2/3/8 and batch sizes 1/3/7/8192,
with NULL intervals, NULL factors, typed and untyped NULLs, and an empty table; a TIMESTAMP
difference scales as the INTERVAL DuckDB makes of it (whole days and the rest).
"""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from plansight.engine.errors import ExecutionError
from tests.differential.harness import check_expression_types, run_plansight
from tests.differential.test_regressions import CONFIGS

_US = 1000  # nanoseconds


def _iv(months: int, days: int, micros: int) -> pa.MonthDayNano:
    return pa.MonthDayNano([months, days, micros * _US])


COLUMNS = {
    "id": (pa.int64(), [1, 2, 3, 4, 5, 6]),
    "iv": (pa.month_day_nano_interval(), [_iv(1, 1, 0), None, _iv(13, -5, 7),
                                          _iv(-3, 0, -7), _iv(0, 3, 86_399_999_999),
                                          _iv(0, 0, 5)]),
    "i8": (pa.int8(), [2, 3, None, -2, 7, 0]),
    "i16": (pa.int16(), [-3, None, 4, 1, 2, 5]),
    "i32": (pa.int32(), [7, 1, None, -1, 3, 2]),
    "i64": (pa.int64(), [None, 2, 3, -4, 1, 9]),
    "u8": (pa.uint8(), [3, 200, None, 1, 0, 2]),
    "u32": (pa.uint32(), [3, 2, 1, None, 4, 5]),
    "u64": (pa.uint64(), [3, 2, 1, None, 4, 5]),
    "f": (pa.float64(), [0.5, None, -1.5, 0.3, 2.5, 1 / 3]),
    "r": (pa.float32(), [0.25, 1.5, None, -2.0, 3.0, 0.1]),
    "dec": (pa.decimal128(5, 2), [decimal.Decimal("1.50"), None, decimal.Decimal("-0.15"),
                                  decimal.Decimal("2.00"), decimal.Decimal("0.07"),
                                  decimal.Decimal("3.33")]),
    "nz": (pa.int32(), [3, 7, -2, None, 9, 6]),  # a divisor that is never zero
    "nzf": (pa.float64(), [7.0, 0.3, None, -2.5, 1 / 7, 3.0]),
    "ts": (pa.timestamp("us"), [dt.datetime(2024, 3, 3, 5), dt.datetime(2023, 12, 31, 23, 59),
                                None, dt.datetime(2024, 1, 1), dt.datetime(2020, 2, 29, 0, 0, 1),
                                dt.datetime(2024, 1, 1, 0, 0, 0, 7)]),
}
TABLES = {
    "t": pa.table({name: pa.array(values, typ) for name, (typ, values) in COLUMNS.items()}),
    "e": pa.table({name: pa.array([], typ) for name, (typ, _) in COLUMNS.items()}),
}

EXPRESSIONS = [
    "INTERVAL '2 days' * 2",
    "2 * INTERVAL '2 days'",
    "INTERVAL '3 days' / 2",
    "INTERVAL '1 month' / 7",
    "INTERVAL '13 months' / 2",
    "INTERVAL '1 month' * 1.5",
    "INTERVAL '10 months' * 0.15",
    "INTERVAL '7 microseconds' / 2",
    "INTERVAL '-7 microseconds' / 2",
    "INTERVAL '1 day' * NULL",
    "NULL * INTERVAL '1 day'",
    "INTERVAL '1 day' / NULL",
    "INTERVAL '1 day' * CAST(NULL AS INTEGER)",
    "CAST(NULL AS INTERVAL) * 2",
    "iv * 2",
    "3 * iv",
    "iv / 3",
    "iv * 0.5",
    "iv * i8", "i16 * iv", "iv * i32", "i64 * iv", "iv * u8", "iv * u32", "iv * u64",
    "iv * f", "f * iv", "iv * r", "iv * dec", "dec * iv",
    "iv / nz", "iv / nzf", "INTERVAL '1 month 1 day' / nz", "INTERVAL '5 days' * f",
    "iv * NULL", "iv / CAST(NULL AS DOUBLE)",
    "-(iv * 2)",
    "CAST('2024-01-31' AS DATE) + iv * 2",
    # a TIMESTAMP difference is an INTERVAL of whole days and the rest
    "(ts - TIMESTAMP '2024-01-01') * 1.5",
    "(ts - TIMESTAMP '2024-01-01') * 2",
    "2 * (ts - TIMESTAMP '2024-01-01')",
    "(ts - TIMESTAMP '2024-01-01') / 7",
    "(ts - TIMESTAMP '2024-01-01') / nzf",
    "(ts - TIMESTAMP '2024-01-01') * i32",
    "(TIMESTAMP '2024-01-03 05:00' - TIMESTAMP '2024-01-01') / 0.7",
]


@pytest.mark.parametrize("partitions,batch_size", CONFIGS)
@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_interval_scaling_matches_duckdb(expression: str, partitions: int,
                                         batch_size: int) -> None:
    check_expression_types(expression, TABLES, ("t", "e"), target_partitions=partitions,
                           batch_size=batch_size)


@pytest.mark.parametrize("expression", [
    "INTERVAL '1 day' / 0",
    "iv / (nz - nz)",
    "INTERVAL '1 day' * 3000000000",
    "INTERVAL '2147483647 months' * 2",
    "INTERVAL '1 day' * 1e300",
    "INTERVAL '1 day' * CAST('nan' AS DOUBLE)",
])
def test_interval_scaling_errors(expression: str) -> None:
    """Out-of-range results and division by zero are errors, as in DuckDB, never wrapped."""
    with pytest.raises(ExecutionError):
        run_plansight(f"SELECT {expression} FROM t", TABLES).to_pylist()
