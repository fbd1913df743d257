"""Hash aggregation under a memory limit spills sorted state runs and gives the same answer."""

from __future__ import annotations

import os
import re

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.events import ReservationChanged


@pytest.fixture(scope="module")
def table():
    n = 600_000
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 150_000, n)
    return pa.table({"k": keys, "s": pa.array([f"key{i % 90_000}" for i in keys]),
                     "v": np.round(rng.random(n) * 100, 2)})


QUERIES = [
    "SELECT k, sum(v) AS sv, count(*) AS c, min(v) AS lo FROM t GROUP BY k",
    "SELECT s, median(v) AS m, count(DISTINCT k) AS d FROM t GROUP BY s",
]


@pytest.mark.parametrize("partitions", [1, 2])
@pytest.mark.parametrize("sql", QUERIES)
def test_spilled_aggregate_equals_unlimited_and_duckdb(table, sql, partitions, tmp_path):
    limit = 6_000_000
    s = ps.Session(target_partitions=partitions, memory_limit=limit, spill_dir=str(tmp_path))
    s.register("t", table)
    reserved = []

    def observe(event):
        if isinstance(event, ReservationChanged):
            reserved.append(max(event.pool_total, event.pool_peak))  # peak: exact if coalesced

    run = s.sql(sql).execute(observer=observe)
    assert sum(int(x) for x in re.findall(r"spill_count=(\d+)", run.explain_analyze())) > 0
    assert max(reserved) <= limit
    assert not any(files for _, _, files in os.walk(tmp_path))  # spill files removed
    con = duckdb.connect()
    con.register("t", table)
    expected = {r[0]: r[1:] for r in con.sql(sql).fetchall()}
    got = {r[0]: r[1:] for r in (tuple(x.values()) for x in run.result.to_pylist())}
    assert got.keys() == expected.keys()
    for key, values in expected.items():
        assert got[key] == pytest.approx(values, rel=1e-9), key


def test_query_run_lists_its_spill_files(table):
    s = ps.Session(target_partitions=1, memory_limit=4_000_000)
    s.register("t", table)
    run = s.sql(QUERIES[0]).execute()
    assert run.spills and all(rows >= 0 and size > 0 for _, _, rows, size in run.spills)
    assert sum(rows for _, _, rows, _ in run.spills) == sum(
        int(x) for x in re.findall(r"spilled_rows=(\d+)", run.explain_analyze()))


GLOBAL = ("SELECT count(*) AS c, sum(k) AS sk, avg(v) AS av, min(s) AS lo, max(v) AS hi, "
          "count(s) AS cs FROM t WHERE v {} 50")


@pytest.mark.parametrize("op", ["<", ">= 1000"])  # most rows; none (empty input to the fold)
def test_global_aggregate_folds_into_one_state_row_under_a_limit(table, op):
    """No GROUP BY at one partition (mode=Single): refused memory folds the held rows into
    one state row instead of failing; the pool never holds more than the limit."""
    sql = GLOBAL.format(op) if op == "<" else GLOBAL.replace("v {} 50", "v >= 1000")
    limit = 2_000_000  # the table is ~15 MB
    s = ps.Session(target_partitions=1, memory_limit=limit, batch_size=8192)
    s.register("t", table)
    assert "AggregateExec: mode=Single, gby=[]" in s.sql(sql).explain()
    reserved = []
    run = s.sql(sql).execute(observer=lambda e: isinstance(e, ReservationChanged) and
                             reserved.append(max(e.pool_total, e.pool_peak)))
    assert max(reserved, default=0) <= limit
    unlimited = ps.Session(target_partitions=1)
    unlimited.register("t", table)
    got, free = run.result.to_pylist()[0], unlimited.sql(sql).to_arrow().to_pylist()[0]
    assert got.keys() == free.keys()
    assert all(got[name] == (pytest.approx(free[name], rel=1e-12)
                             if isinstance(free[name], float) else free[name]) for name in got)
    con = duckdb.connect()
    con.register("t", table)
    expected = con.sql(sql).fetchall()[0]
    got = tuple(got.values())
    assert got[:2] == expected[:2] and got[3:] == expected[3:]
    assert got[2] == (expected[2] if expected[2] is None else pytest.approx(expected[2],
                                                                           rel=1e-12))


def test_global_aggregate_that_cannot_fold_fails_cleanly(table):
    s = ps.Session(target_partitions=1, memory_limit=2_000_000, batch_size=8192)
    s.register("t", table)
    with pytest.raises(ps.ResourcesExhausted, match=r"AggregateExec\(Single\)"):
        s.sql("SELECT median(v) FROM t").to_arrow()
