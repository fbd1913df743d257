"""Result types of typed NULLs, NULLs beside dates and decimal literals, against DuckDB.

A typed NULL (``CAST(NULL AS SMALLINT)``) is typed as a column of that type is: a literal 2
beside it takes its type (``% 2`` stays SMALLINT). An untyped NULL added to a DATE or
TIMESTAMP, or subtracted from one, is the span DuckDB reads it as (days, an INTERVAL). A
decimal literal counts every digit, leading zeros too (``0.5`` is DECIMAL(2, 1), so
``DECIMAL(10, 2) * 0.5`` is DECIMAL(12, 3)), and only the digits written (``.5``, which sqlglot
spells ``0.5``, is DECIMAL(1, 1)). Each expression's ``typeof`` and values are
compared with DuckDB's, and the Arrow result types too, at partitions 1/2/3/8 and batch sizes
1/3/7/8192 (NULL and non-NULL rows; an empty table).
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from tests.differential.harness import check_expression_types
from tests.differential.test_regressions import CONFIGS

TABLES = {"t": pa.table({
    "id": pa.array([1, 2, 3, 4], pa.int64()),
    "s": pa.array([3, None, -7, 3], pa.int16()),
    "d": pa.array([12, None, -5, 12], pa.int64()),
    "dt": pa.array([dt.date(2024, 2, 29), None, dt.date(1999, 12, 31), dt.date(2024, 2, 29)]),
    "ts": pa.array([dt.datetime(2024, 2, 29, 13, 5), None, dt.datetime(1970, 1, 1),
                    dt.datetime(2024, 2, 29, 13, 5)], pa.timestamp("us")),
}), "e": pa.table({"id": pa.array([], pa.int64()), "s": pa.array([], pa.int16()),
                "d": pa.array([], pa.int64()), "dt": pa.array([], pa.date32()),
                "ts": pa.array([], pa.timestamp("us"))})}

EXPRESSIONS = [
    # a typed NULL beside an integer literal keeps its type
    "CAST(NULL AS SMALLINT) % 2",
    "2 % CAST(NULL AS SMALLINT)",
    "CAST(NULL AS SMALLINT) + 2",
    "CAST(NULL AS TINYINT) * 2",
    "CAST(NULL AS SMALLINT) // 2",
    "CAST(NULL AS SMALLINT) + 100000",  # a literal that does not fit widens it
    "COALESCE(CAST(NULL AS SMALLINT), 2)",
    "greatest(CAST(NULL AS SMALLINT), 2)",
    "CASE WHEN id > 2 THEN CAST(NULL AS SMALLINT) ELSE 2 END",
    "COALESCE(CAST(NULL AS SMALLINT), s % 2)",
    # decimal literals: every digit counts
    "CAST(d AS DECIMAL(10, 2)) * 0.5",
    "CAST(NULL AS DECIMAL(10, 2)) * 0.5",
    "0.05 * CAST(d AS DECIMAL(10, 2))",
    "CAST(s % 1 AS DECIMAL(3, 3)) + 0.5",
    "CAST(d AS DECIMAL(10, 2)) * 0.0",
    "0.500",
    "-0.25",
    ".5",
    "-.25",
    ".50",
    ".0",
    "CAST(d AS DECIMAL(10, 2)) * .5",
    ".05 + CAST(s AS DECIMAL(4, 0))",
    "1 + .5",
    ".12345678901234567890123456789012345678",
    "0.12345678901234567890123456789012345678",
    # an untyped NULL beside a DATE is days, beside a TIMESTAMP an INTERVAL
    "dt + NULL",
    "NULL + dt",
    "dt - NULL",
    "NULL - dt",
    "ts + NULL",
    "NULL + ts",
    "ts - NULL",
    "CAST(NULL AS DATE) + NULL",
    # typed temporal NULLs
    "epoch_ms(CAST(NULL AS TIMESTAMP))",
    "epoch_ms(CAST(NULL AS DATE))",
    "epoch_ms(NULL)",
    "CAST(NULL AS DATE) + INTERVAL 1 DAY",
    "CAST(NULL AS DATE) - 1",
    "date_trunc('month', CAST(NULL AS DATE))",
]


@pytest.mark.parametrize("partitions,batch_size", CONFIGS)
@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_result_types_match_duckdb(expression: str, partitions: int, batch_size: int) -> None:
    check_expression_types(expression, TABLES, ("t", "e"), target_partitions=partitions,
                           batch_size=batch_size)
