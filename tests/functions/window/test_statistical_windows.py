"""corr, covar_*, regr_*, bit_and / bit_or / bit_xor and any_value over every frame, vs DuckDB.

The shared window tables (NULL partition keys, NULL values, many ties) get two more columns:
``r``, runs of four equal values in ``id`` order (frames where x is constant, so corr is
NaN and regr_r2 NULL or 1 as DuckDB has it), and ``c``, one constant that binary cannot hold
exactly (0.1).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.differential.harness import check
from tests.windows.window_cases import TABLES


def _with_runs(table: pa.Table) -> pa.Table:
    runs = pc.multiply(pc.divide(table["id"], 4).cast(pa.float64()), 0.1)
    return table.append_column("r", runs).append_column(
        "c", pa.array([0.1] * table.num_rows, pa.float64()))


STATISTICS = ["corr", "covar_pop", "covar_samp", "regr_slope", "regr_intercept", "regr_count",
              "regr_r2", "regr_avgx", "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy"]
COLUMNS = ", ".join([f"{f}(v, o) OVER w" for f in STATISTICS] +
                    [f"{f}(v, r) OVER w" for f in ("corr", "regr_r2", "regr_slope",
                                                   "regr_intercept")] +
                    ["regr_r2(r, v) OVER w", "corr(c, v) OVER w", "regr_sxx(v, c) OVER w",
                     "bit_and(o) OVER w", "bit_or(o) OVER w", "bit_xor(o) OVER w"])

FRAMES = [
    "",
    "ORDER BY o, id",
    "ORDER BY o, id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW",
    "ORDER BY o, id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING",
    "ORDER BY o, id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
    "ORDER BY o, id ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING",
    "ORDER BY o, id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE GROUP",
    "ORDER BY o RANGE BETWEEN 3 PRECEDING AND 1 FOLLOWING",
    "ORDER BY o RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE TIES",
    "ORDER BY o GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW",
]

# (table, partitions, batch size)
RUNS = [("mixed", 1, 8192), ("mixed", 2, 3), ("mixed", 8, 1), ("tiny_partitions", 3, 7),
        ("one_partition", 1, 8192), ("one_partition", 2, 3), ("empty", 3, 7)]


@pytest.mark.parametrize(("table", "partitions", "batch_size"), RUNS)
@pytest.mark.parametrize("frame", FRAMES)
def test_statistics_over_frames_match_duckdb(frame, table, partitions, batch_size):
    sql = f"SELECT id, {COLUMNS} FROM t WINDOW w AS (PARTITION BY p {frame})"
    check(sql, {"t": _with_runs(TABLES[table])}, target_partitions=partitions,
          batch_size=batch_size)


# any_value takes the frame's first non-NULL value: only frames whose rows are in one
# definite order make the answer engine-independent
@pytest.mark.parametrize("frame", [f for f in FRAMES if "ROWS" in f])
@pytest.mark.parametrize(("table", "partitions", "batch_size"), RUNS[:4])
def test_any_value_over_ordered_frames_matches_duckdb(frame, table, partitions, batch_size):
    sql = (f"SELECT id, any_value(v) OVER w AS a, any_value(v) FILTER (WHERE o > 3) OVER w "
           f"AS f FROM t WINDOW w AS (PARTITION BY p {frame})")
    check(sql, {"t": TABLES[table]}, target_partitions=partitions, batch_size=batch_size)


@pytest.mark.parametrize("sql", [
    "SELECT id, corr(v, o) FILTER (WHERE id % 3 > 0) OVER w AS a, "
    "bit_xor(o) FILTER (WHERE v > 0) OVER w AS b, regr_count(v, o) FILTER (WHERE v > 0) OVER w "
    "AS c FROM t WINDOW w AS (PARTITION BY p ORDER BY o, id ROWS 3 PRECEDING)",
    "SELECT id, bit_or(DISTINCT o) OVER (PARTITION BY p ORDER BY o) AS a FROM t",
    # over aggregates of a GROUP BY
    "SELECT p, corr(sum(v), count(*)) OVER () AS a, regr_slope(sum(v), p) OVER "
    "(ORDER BY p ROWS 2 PRECEDING) AS b, bit_or(bit_and(o)) OVER () AS c FROM t GROUP BY p",
])
@pytest.mark.parametrize("partitions", [1, 3])
def test_statistics_with_filter_distinct_and_grouping_match_duckdb(sql, partitions):
    check(sql, {"t": TABLES["mixed"]}, target_partitions=partitions, batch_size=7)


@pytest.mark.parametrize("executor", ["sorted", "partition", "hash"])
@pytest.mark.parametrize("frame", FRAMES[:4])
def test_statistics_match_duckdb_in_every_window_executor(frame, executor):
    sql = f"SELECT id, {COLUMNS} FROM t WINDOW w AS (PARTITION BY p {frame})"
    check(sql, {"t": _with_runs(TABLES["mixed"])}, target_partitions=2, batch_size=7,
          window_executor=executor)
