"""Hash aggregation under a memory limit spills to hash buckets and gives the same answer."""

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
