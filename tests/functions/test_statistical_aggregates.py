"""corr, covar_*, regr_*, bit_and / bit_or / bit_xor and any_value as aggregates, vs DuckDB.

Single and two-phase (Partial -> Final across partitions) aggregation, spilled state runs,
and the edge cases DuckDB defines: pairs with a NULL are skipped, one pair (covar_samp NULL,
corr NaN), a constant variable (corr NaN, regr_r2 1 or NULL), groups without any pair, no rows.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.errors import PlanError
from tests.differential.harness import assert_same, check, run_duckdb

STATISTICS = ["corr", "covar_pop", "covar_samp", "regr_slope", "regr_intercept", "regr_count",
              "regr_r2", "regr_avgx", "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy"]


def _table() -> pa.Table:
    """Random groups plus hand-made ones: g = 100 one pair, 101 constant x, 102 constant y,
    103 no complete pair, 104 both constant (0.1: not exact in binary), NULL keys."""
    rng = np.random.default_rng(7)
    n = 120
    g = rng.integers(0, 8, n).astype(object)
    g[rng.random(n) < 0.1] = None
    x = np.round(rng.normal(size=n) * 10 + 1000, 2).astype(object)  # far from zero
    x[rng.random(n) < 0.15] = None
    y = np.round(rng.normal(size=n) * 3, 2).astype(object)
    y[rng.random(n) < 0.15] = None
    b = rng.integers(-1000, 1000, n).astype(object)
    b[rng.random(n) < 0.15] = None
    special = [(100, 1.5, 2.5, 3), (101, 0.1, 1.0, 5), (101, 0.1, 2.0, 6), (101, 0.1, 4.0, 6),
               (102, 1.0, 0.3, 7), (102, 2.0, 0.3, None), (102, 5.0, 0.3, -9),
               (103, None, 1.0, None), (103, 2.0, None, None),
               (104, 0.1, 0.1, 1), (104, 0.1, 0.1, 1), (104, 0.1, 0.1, 3)]
    g = list(g) + [s[0] for s in special]
    x = list(x) + [s[1] for s in special]
    y = list(y) + [s[2] for s in special]
    b = list(b) + [s[3] for s in special]
    i = [k % 7 for k in range(len(g))]
    return pa.table({"g": pa.array(g, pa.int64()), "x": pa.array(x, pa.float64()),
                     "y": pa.array(y, pa.float64()), "b": pa.array(b, pa.int32()),
                     "i": pa.array(i, pa.int16()),
                     "u": pa.array([v % 200 if v is not None else None for v in b], pa.uint8()),
                     "d": pa.array([None if v is None else round(v, 1) for v in x],
                                   pa.float64()).cast(pa.decimal128(9, 2))})


TABLE = _table()
EMPTY = TABLE.slice(0, 0)
ALL = ", ".join(f"{f}(y, x)" for f in STATISTICS)
BITS = "bit_and(b), bit_or(b), bit_xor(b), bit_and(u), bit_or(u), bit_xor(u), bit_xor(i)"

QUERIES = [
    f"SELECT g, {ALL} FROM t GROUP BY g",
    f"SELECT {ALL} FROM t",
    f"SELECT g, {BITS} FROM t GROUP BY g",
    f"SELECT {BITS} FROM t",
    # integer and decimal arguments (DuckDB computes in DOUBLE), the arguments swapped
    "SELECT g, corr(i, d), regr_slope(d, i), covar_samp(b, y), regr_r2(x, y) FROM t GROUP BY g",
    # FILTER, and groups that lose every pair to it
    "SELECT g, corr(y, x) FILTER (WHERE b > 0), regr_count(y, x) FILTER (WHERE g > 100), "
    "bit_or(b) FILTER (WHERE x > 1000) FROM t GROUP BY g",
    # mixed with the decomposable and the non-decomposable aggregates
    "SELECT g, sum(x), regr_sxy(y, x), median(y), bit_and(b), any_value(g) FROM t GROUP BY g",
    "SELECT g % 3 AS k, regr_intercept(y, x), count(*) FROM t GROUP BY g % 3 "
    "HAVING regr_count(y, x) > 1",
    "SELECT bit_and(DISTINCT b), bit_xor(DISTINCT u) FROM t",
]

RUNS = [(1, 8192), (2, 3), (3, 7), (8, 1)]  # (partitions, batch size)


@pytest.mark.parametrize(("partitions", "batch_size"), RUNS)
@pytest.mark.parametrize("sql", QUERIES)
def test_statistical_aggregates_match_duckdb(sql, partitions, batch_size):
    check(sql, {"t": TABLE}, target_partitions=partitions, batch_size=batch_size)


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("sql", QUERIES)
def test_statistical_aggregates_over_no_rows_match_duckdb(sql, partitions):
    check(sql, {"t": EMPTY}, target_partitions=partitions)


def test_two_partitions_aggregate_in_two_phases():
    session = ps.Session(target_partitions=2)
    session.register("t", TABLE)
    plan = session.sql(f"EXPLAIN SELECT g, {ALL}, {BITS} FROM t GROUP BY g").to_arrow()
    text = "\n".join(str(v) for v in plan.column(plan.num_columns - 1).to_pylist())
    assert "Partial" in text and "Final" in text


def test_spilled_co_moment_states_match_duckdb(tmp_path):
    rng = np.random.default_rng(11)
    n = 300_000
    x = rng.normal(size=n) * 5 + 1e3  # ~20 pairs per group: DuckDB's own error stays ~1e-12
    table = pa.table({"k": rng.integers(0, 15_000, n), "x": x,
                      "y": 3 * x + rng.normal(size=n),
                      "b": rng.integers(0, 1 << 40, n)})
    sql = ("SELECT k, corr(y, x), regr_slope(y, x), regr_intercept(y, x), covar_samp(y, x), "
           "regr_count(y, x), bit_or(b), bit_xor(b) FROM t GROUP BY k")
    session = ps.Session(target_partitions=2, memory_limit=6_000_000, spill_dir=str(tmp_path))
    session.register("t", table)
    run = session.sql(sql).execute()
    spills = re.findall(r"AggregateExec.*spill_count=(\d+)", run.explain_analyze())
    assert sum(int(count) for count in spills) > 0
    assert not any(files for _, _, files in os.walk(tmp_path))
    assert_same(run.result, run_duckdb(sql, {"t": table}), ordered=False, sql=sql)


def test_regr_count_is_an_unsigned_integer_like_duckdb():
    session = ps.Session(target_partitions=1)
    session.register("t", TABLE)
    result = session.sql("SELECT regr_count(y, x) AS n, regr_count(y, x) + 1 AS m FROM t")
    table = result.to_arrow()
    assert table.schema.field("n").type == pa.uint32()
    assert table.column("m")[0].as_py() == table.column("n")[0].as_py() + 1


@pytest.mark.parametrize(("sql", "error", "message"), [
    ("SELECT corr(y, 'a') FROM t", PlanError, "numeric"),
    ("SELECT bit_and(x) FROM t", PlanError, "integer"),
])
def test_wrong_arguments_are_clear_errors(sql, error, message):
    session = ps.Session(target_partitions=1)
    session.register("t", TABLE)
    with pytest.raises(error, match=message):
        session.sql(sql).to_arrow()
