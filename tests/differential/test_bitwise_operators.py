"""Bitwise operators & | xor << >> ~ on integers, against DuckDB.

Both operands come to one integer type as they do for + (SMALLINT & TINYINT is SMALLINT,
UTINYINT & TINYINT BIGINT, a literal that fits keeps a column's type, a typed NULL keeps its
type); ``<<`` refuses a negative value or shift, a shift of the type's width or more and a
result that does not fit; ``>>`` outside [0, width) is 0. Each expression's ``typeof``, values
and Arrow type are compared at partitions 1/2/3/8 and batch sizes 1/3/7/8192, on rows with NULLs
and on an empty table; the refusals are errors in both engines. Arithmetic on a signed and an
unsigned column resolves its operand type the same way (TINYINT + UTINYINT is BIGINT).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from plansight.engine.errors import ExecutionError, NotSupportedError, PlanError
from tests.differential.harness import check_expression_types, run_duckdb, run_plansight
from tests.differential.test_regressions import CONFIGS

COLUMNS = {
    "id": (pa.int64(), [1, 2, 3, 4, 5, 6]),
    "i8": (pa.int8(), [5, -8, None, 127, -128, 0]),
    "i16": (pa.int16(), [3, None, -7, 32767, -1, 12]),
    "i32": (pa.int32(), [None, 6, -2147483648, 2147483647, -1, 9]),
    "i64": (pa.int64(), [-9223372036854775808, 5, None, 9223372036854775807, -1, 10]),
    "u8": (pa.uint8(), [255, 0, None, 1, 128, 7]),
    "u16": (pa.uint16(), [65535, None, 3, 0, 1, 9]),
    "u32": (pa.uint32(), [4294967295, 2, 3, None, 0, 1]),
    "u64": (pa.uint64(), [18446744073709551615, 1, 0, None, 5, 3]),
    "small": (pa.int8(), [1, 0, None, 3, 6, 2]),  # non-negative values that shift safely
    "sh": (pa.int32(), [0, 1, 3, None, 7, 2]),  # shifts below 8
    "wide": (pa.int32(), [0, 8, 63, 64, -1, None]),  # shifts past the width, for >>
}
TABLES = {
    "t": pa.table({name: pa.array(values, typ) for name, (typ, values) in COLUMNS.items()}),
    "e": pa.table({name: pa.array([], typ) for name, (typ, _) in COLUMNS.items()}),
}
_INTEGERS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]

EXPRESSIONS = [
    "5 & 3", "5 | 3", "xor(5, 3)", "~5", "1 << 3", "-8 >> 1",
    "CAST(NULL AS SMALLINT) & 3", "3 | CAST(NULL AS SMALLINT)", "xor(CAST(NULL AS TINYINT), 1)",
    "CAST(NULL AS SMALLINT) << 2", "CAST(NULL AS SMALLINT) >> 2", "~CAST(NULL AS SMALLINT)",
    "CAST(NULL AS SMALLINT) | CAST(NULL AS TINYINT)", "NULL & 3", "NULL & NULL", "~NULL",
    "i16 & NULL", "i8 << NULL", "NULL >> i8",
    "i8 & 300", "i16 & 3", "u8 | 1", "'3' & i32",
    *[f"{x} & {y}" for x in _INTEGERS for y in _INTEGERS
      if x <= y and not (x.startswith("i") and y == "u64")],
    *[f"{x} | {y}" for x, y in [("i8", "u8"), ("i16", "u16"), ("i32", "u32"), ("i64", "u32"),
                                ("u8", "u64"), ("i16", "u8")]],
    *[f"xor({x}, {y})" for x, y in [("i8", "i16"), ("u16", "u32"), ("i64", "i8"),
                                    ("u8", "i32")]],
    *[f"~{x}" for x in _INTEGERS],
    *[f"{x} >> sh" for x in _INTEGERS if x != "u64"],
    *[f"{x} >> wide" for x in _INTEGERS if x != "u64"],
    "u64 >> CAST(sh AS UTINYINT)", "u64 >> CAST(sh + 60 AS UINTEGER)",
    "small << sh", "CAST(small AS UTINYINT) << sh", "CAST(small AS BIGINT) << 56",
    "CAST(small AS UBIGINT) << 61", "u8 >> 7", "i64 >> 63",
    "(i16 & 7) | (i8 >> 1)", "~(u8 & 15)",
    # arithmetic resolves a signed and an unsigned column the same way (BIGINT unless the
    # signed type is wider), where COALESCE's common type is narrower
    "i8 + u8", "u8 - i8", "i16 * u16", "i8 + u16", "CAST(sh AS SMALLINT) + u8", "sh - u16",
    "i32 + u32", "i64 + u32", "u8 * CAST(NULL AS TINYINT)", "i16 // CAST(sh + 1 AS UTINYINT)",
    "i8 % CAST(sh + 1 AS USMALLINT)", "i8 / u8", "COALESCE(i8, u8)", "u8 // 2 + 1",
    "u8 + -1",
]


@pytest.mark.parametrize("partitions,batch_size", CONFIGS)
@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_bitwise_matches_duckdb(expression: str, partitions: int, batch_size: int) -> None:
    check_expression_types(expression, TABLES, ("t", "e"), target_partitions=partitions,
                           batch_size=batch_size)


@pytest.mark.parametrize("expression", [
    "1 << 31", "1 << 32", "-1 << 1", "1 << -1", "i8 << wide", "small << (sh - 1)",
    "u8 << 1", "i8 << 1", "small << 7", "CAST(3 AS UBIGINT) << 63",
])
def test_left_shift_refusals(expression: str) -> None:
    """What DuckDB refuses at run time plansight refuses too (an ExecutionError)."""
    sql = f"SELECT {expression} FROM t"
    with pytest.raises(duckdb.OutOfRangeException):
        run_duckdb(sql, TABLES)
    with pytest.raises(ExecutionError):
        run_plansight(sql, TABLES).to_pylist()


@pytest.mark.parametrize("expression", ["1.5 & 3", "CAST(1 AS DOUBLE) | 1", "true & 1",
                                        "~CAST(1 AS DOUBLE)"])
def test_non_integers_refused(expression: str) -> None:
    with pytest.raises(PlanError):
        run_plansight(f"SELECT {expression} FROM t", TABLES)


@pytest.mark.parametrize("expression", ["i8 & u64", "u64 | i64", "xor(i32, u64)", "u64 >> sh"])
def test_signed_beside_ubigint_not_supported(expression: str) -> None:
    """DuckDB types these HUGEINT, which plansight has no type for: a clear refusal, not a
    BIGINT that fails on large UBIGINT values."""
    run_duckdb(f"SELECT {expression} FROM t", TABLES)
    with pytest.raises(NotSupportedError):
        run_plansight(f"SELECT {expression} FROM t", TABLES)
