"""Collect-left joins that emit build rows (left, full, semi, anti) probing in parallel
against DuckDB: every probe partition marks the build rows it matched and the last one to
finish emits the build rows decided by all of them. NULL keys, duplicates on both sides,
residual filters, empty sides, at partitions 1/2/3/8 and batch sizes 1/3/7/8192."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from tests.differential.harness import check


def _tables() -> dict[str, pa.Table]:
    """``d`` (small, built on) and ``f`` (larger, probed in several partitions)."""
    def side(n: int, null_every: int, seed: int) -> pa.Table:
        r = np.random.default_rng(seed)
        k = r.integers(-3, 25, n).tolist()
        k = [None if i % null_every == 0 else v for i, v in enumerate(k)]
        return pa.table({"k": pa.array(k, pa.int64()),
                         "g": pa.array(r.integers(0, 3, n), pa.int32()),
                         "v": pa.array(r.integers(0, 1000, n), pa.int64())})

    d, f = side(30, 7, 1), side(400, 11, 2)
    return {"d": d, "f": f, "e": f.slice(0, 0)}


QUERIES = {  # SQL: the physical join type (build on d, the smaller side)
    "SELECT d.v, f.v FROM d LEFT JOIN f ON d.k = f.k": "left",
    "SELECT d.v, f.v FROM d LEFT JOIN f ON d.k = f.k AND d.v < f.v": "left",
    "SELECT d.v, f.v FROM d FULL JOIN f ON d.k = f.k AND d.g = f.g": "full",
    "SELECT v FROM d WHERE k IN (SELECT k FROM f)": "left_semi",
    "SELECT v FROM d WHERE EXISTS (SELECT 1 FROM f WHERE f.k = d.k AND f.v > d.v)": "left_semi",
    "SELECT v FROM d WHERE NOT EXISTS (SELECT 1 FROM f WHERE f.k = d.k)": "left_anti",
    "SELECT v FROM d WHERE NOT EXISTS (SELECT 1 FROM f WHERE f.k = d.k AND f.g <> d.g)":
        "left_anti",
    "SELECT k, g FROM d EXCEPT SELECT k, g FROM f": "left_anti",
    "SELECT d.g, count(*), count(f.v) FROM d LEFT JOIN f ON d.k = f.k GROUP BY d.g":
        "left",
    "SELECT d.v, e.v FROM d LEFT JOIN e ON d.k = e.k": None,
    "SELECT v FROM d WHERE NOT EXISTS (SELECT 1 FROM e WHERE e.k = d.k)": None,
}


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", sorted(QUERIES))
def test_parallel_probe_matches_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)


@pytest.mark.parametrize("sql", [sql for sql, kind in QUERIES.items() if kind])
def test_the_probe_side_is_not_merged_into_one_partition(sql):
    s = ps.Session(target_partitions=3, batch_size=16)
    for name, table in _tables().items():
        s.register(name, table)
    plan = s.sql(sql).explain()
    join = next(line for line in plan.splitlines() if "HashJoinExec" in line)
    assert f"mode=CollectLeft, join_type={QUERIES[sql]}," in join
    # the join's second child (the probe) keeps its partitions: no merge right below it
    depth = len(join) - len(join.lstrip())
    children = [line for line in plan.splitlines()[plan.splitlines().index(join) + 1:]
                if len(line) - len(line.lstrip()) == depth + 2]
    assert "CoalescePartitionsExec" not in children[1], plan


def test_a_cluster_plan_merges_the_probe_side():
    """Probe partitions of a staged plan may run in different processes: one partition."""
    s = ps.Session(target_partitions=3, batch_size=16)
    s.set_option("cluster", "local:2")
    for name, table in _tables().items():
        s.register(name, table)
    plan = s.sql("SELECT v FROM d WHERE NOT EXISTS (SELECT 1 FROM f WHERE f.k = d.k)"
                 ).explain()
    assert "join_type=left_anti" in plan
    lines = plan.splitlines()
    join = next(i for i, line in enumerate(lines) if "HashJoinExec" in line)
    assert sum("CoalescePartitionsExec" in line for line in lines[join + 1:]) >= 2, plan
