"""Two-phase aggregates of few groups merge their partial states in one partition (partials
coalesced, no hash repartition): against DuckDB over NULL keys, every decomposable
function, empty input and filters, at partitions 1/2/3/8 and batch sizes 1/3/7/8192."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from tests.differential.harness import check

ALWAYS = {"aggregate_single_final_threshold_rows": 1 << 40}


def _tables() -> dict[str, pa.Table]:
    r = np.random.default_rng(3)
    n = 300
    g = r.integers(0, 6, n).tolist()
    return {"t": pa.table({
        "g": pa.array([None if i % 13 == 0 else v for i, v in enumerate(g)], pa.int64()),
        "s": pa.array([f"s{v % 4}" if i % 17 else None for i, v in enumerate(g)]),
        "v": pa.array([None if i % 11 == 0 else x for i, x in
                       enumerate(r.integers(-500, 500, n).tolist())], pa.int64()),
        "d": pa.array([round(x, 2) for x in r.random(n)], pa.float64())})}


QUERIES = [
    "SELECT g, count(*), count(v), sum(v), min(v), max(v), avg(v) FROM t GROUP BY g",
    "SELECT s, g, sum(d), bool_or(v > 0), stddev_samp(v) FROM t GROUP BY s, g",
    "SELECT g, count(*) FROM t WHERE v > 1000 GROUP BY g",
    "SELECT g, sum(v) FILTER (WHERE d < 0.5) AS f FROM t GROUP BY g HAVING count(*) > 40",
    "SELECT s, count(*) AS n FROM t GROUP BY s ORDER BY n DESC, s",
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_single_final_aggregate_matches_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size, **ALWAYS)


def _plan(threshold: int) -> str:
    s = ps.Session(target_partitions=3, batch_size=16)
    s.set_option("aggregate_single_final_threshold_rows", threshold)
    s.register("t", _tables()["t"])
    return s.sql("SELECT g, sum(v) FROM t GROUP BY g").explain()


def test_few_groups_coalesce_the_partial_states():
    plan = _plan(1 << 40)
    assert "mode=Partial" in plan and "RepartitionExec" not in plan
    final = plan.index("mode=Final")
    assert plan.index("CoalescePartitionsExec") < plan.index("mode=Partial") and \
        final < plan.index("CoalescePartitionsExec")


def test_a_zero_threshold_hashes_the_partial_states():
    plan = _plan(0)
    assert "RepartitionExec: partitioning=Hash([g]" in plan and \
        "CoalescePartitionsExec" not in plan.split("mode=Final")[1].split("mode=Partial")[0]
