"""MIN and MAX over a whole window partition with NaN inputs, against DuckDB, warning-free.

DuckDB orders NaN above every number: MAX over a partition holding a NaN is NaN, MIN ignores
it unless every value is NaN. The broadcast path folds partitions with ``np.maximum.at`` /
``np.fmin.at``, which numpy reports as an "invalid value" RuntimeWarning when it meets a NaN;
a user must never see that, so warnings are errors here. Checked at partitions 1/2/3/8 and batch
sizes 1/3/7/8192, with NULLs, NaN-only, NULL-only and empty window partitions and an empty table.
"""

from __future__ import annotations

import math
import warnings

import pyarrow as pa
import pytest

from tests.differential.harness import assert_same, run_both
from tests.differential.test_regressions import CONFIGS

NAN = math.nan
TABLES = {"t": pa.table({
    "id": pa.array(range(1, 11), pa.int64()),
    "g": pa.array([1, 1, 1, 2, 2, 3, 3, 4, 5, 5], pa.int64()),
    "x": pa.array([1.5, NAN, -2.0, NAN, NAN, None, 7.0, None, -0.0, float("inf")],
                  pa.float64()),
}), "e": pa.table({"id": pa.array([], pa.int64()), "g": pa.array([], pa.int64()),
                   "x": pa.array([], pa.float64())})}

EXPRESSIONS = [
    "max(x) OVER (PARTITION BY g)",
    "min(x) OVER (PARTITION BY g)",
    "max(x) OVER ()",
    "min(x) OVER ()",
    "max(CAST(x AS REAL)) OVER (PARTITION BY g)",
    "min(x) FILTER (WHERE id > 1) OVER (PARTITION BY g)",
]


@pytest.mark.parametrize("partitions,batch_size", CONFIGS)
@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_nan_extrema_match_duckdb(expression: str, partitions: int, batch_size: int) -> None:
    for table in ("t", "e"):
        sql = f"SELECT id, {expression} AS x FROM {table}"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            mine, theirs = run_both(sql, TABLES, target_partitions=partitions,
                                    batch_size=batch_size)
        assert mine.schema.field("x").type == theirs.schema.field("x").type, sql
        assert_same(mine, theirs, ordered=False, sql=sql)
