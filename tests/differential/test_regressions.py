"""Regression tests for bugs found by random SQL (issue #12 and the fuzzer in tools/fuzz).

Each case is the minimal query that went wrong, on tiny tables, checked against DuckDB at
partitions 1/2/3/8 and batch sizes 1/3/7/8192.
"""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from tests.differential.harness import check

TABLES = {
    "t": pa.table({"k": pa.array([1, 2, 3], pa.int64()),
                   "s": pa.array(["a", None, "b"]),
                   "a": pa.array([1, None, 3], pa.int64())}),
    "tn": pa.table({"a": pa.array([1, None, 2], pa.int64())}),
    "e": pa.table({"a": pa.array([], pa.int64())}),
    "a": pa.table({"x": pa.array([1, 2], pa.int64())}),
    "b": pa.table({"y": pa.array([1, 3], pa.int64())}),
    "c": pa.table({"z": pa.array([1, 5], pa.int64())}),
    "f": pa.table({"x": pa.array([1.0, float("inf"), -0.0, 0.0, None, float("nan")])}),
    "m": pa.table({"i": pa.array([1, None, 2, 2], pa.int64()),
                   "d": pa.array([Decimal("1.00"), Decimal("2.00"), None, Decimal("2.00")],
                                 pa.decimal128(10, 2)),
                   "j": pa.array([1, 2, 2, None], pa.int32())}),
    "big": pa.table({"v": pa.array([2**62, 2**62, 2**62, -5], pa.int64()),
                     "g": pa.array([1, 1, 1, 2], pa.int64())}),
}

CASES = {
    # wrong results
    "concat_ws-null-row": "SELECT concat_ws('-', s) FROM t",
    "concat_ws-with-columns": "SELECT k, concat_ws('-', s, s) FROM t",
    "concat_ws-null-separator": "SELECT k, concat_ws(NULL, s) FROM t",
    "concat_ws-all-constant-null": "SELECT concat_ws('-', NULL, NULL)",
    "concat_ws-column-separator": "SELECT concat_ws(s, s, 'x') FROM t",
    "rollup-no-aggregate": "SELECT a, GROUPING(a) FROM tn GROUP BY ROLLUP (a)",
    "grouping-sets-empty-set": "SELECT NULL FROM t GROUP BY GROUPING SETS (())",
    "grouping-sets-empty-set-empty-table": "SELECT NULL FROM e GROUP BY GROUPING SETS (())",
    "cube-null": "SELECT 1 FROM t GROUP BY CUBE (NULL)",
    "pruned-global-aggregate": "SELECT n FROM (SELECT 1 AS n, count(*) FROM t) d",
    "pruned-global-aggregate-empty": "SELECT n FROM (SELECT 1 AS n, count(*) FROM e) d",
    "having-without-group-by": "SELECT 1 FROM t HAVING TRUE",
    "having-without-group-by-empty": "SELECT 1 FROM e HAVING TRUE",
}


CONFIGS = [pytest.param(p, b, id=f"p{p}-b{b}") for p in (1, 2, 3, 8) for b in (1, 3, 7, 8192)]


@pytest.mark.parametrize("partitions,batch_size", CONFIGS)
@pytest.mark.parametrize("sql", [pytest.param(q, id=name) for name, q in CASES.items()])
def test_regression(sql: str, partitions: int, batch_size: int) -> None:
    check(sql, TABLES, target_partitions=partitions, batch_size=batch_size)
