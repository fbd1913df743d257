"""Scans feeding a hash aggregate or a hash join's build side read AGGREGATE_BATCH_FACTOR x
batch_size rows per batch; other scans keep batch_size, and results do not change."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.physical_optimizer.widen_scan_batches import AGGREGATE_BATCH_FACTOR
from tests.differential.harness import check


def _session(partitions: int = 1, batch_size: int = 8192) -> ps.Session:
    s = ps.Session(target_partitions=partitions, batch_size=batch_size)
    n = 5_000
    s.register("t", pa.table({"k": [i % 7 if i % 11 else None for i in range(n)],
                              "v": [float(i % 13) for i in range(n)]}))
    s.register("d", pa.table({"k": list(range(7)), "name": [f"n{i % 3}" for i in range(7)]}))
    return s


def _scan_line(plan: str, table: str) -> str:
    return next(line for line in plan.splitlines() if f"DataSourceExec: table={table}," in line)


@pytest.mark.parametrize("batch_size", [3, 8192])
@pytest.mark.parametrize("partitions", [1, 2])
def test_scan_under_a_hash_aggregate_reads_larger_batches(partitions, batch_size):
    plan = _session(partitions, batch_size).sql(
        "SELECT k, sum(v) FROM t WHERE v > 1 GROUP BY k").explain()
    assert f"batch_rows={batch_size * AGGREGATE_BATCH_FACTOR}" in _scan_line(plan, "t")


def test_global_aggregate_scan_reads_larger_batches():
    plan = _session(2, 7).sql("SELECT count(*), sum(v) FROM t").explain()
    assert f"batch_rows={7 * AGGREGATE_BATCH_FACTOR}" in _scan_line(plan, "t")


def test_join_probe_scan_under_an_aggregate_widens():
    plan = _session(2).sql("SELECT name, sum(v) FROM t JOIN d ON t.k = d.k "
                           "GROUP BY name").explain()
    assert "HashJoinExec: mode=CollectLeft" in plan
    assert "batch_rows=" in _scan_line(plan, "t")


def test_build_side_scan_widens_but_not_a_probe_streaming_to_the_result():
    plan = _session(2).sql("SELECT name, v FROM t JOIN d ON t.k = d.k WHERE v > 1").explain()
    assert "HashJoinExec: mode=CollectLeft" in plan
    assert "batch_rows=" in _scan_line(plan, "d")
    assert "batch_rows=" not in _scan_line(plan, "t")


def test_scan_reaching_a_build_side_through_a_probe_and_a_repartition_widens():
    s = _session(2)
    s.register("big", pa.table({"k": [i % 7 for i in range(50_000)], "w": range(50_000)}))
    # partitioned joins: t's rows reach the build side of the join with big through the
    # probe side of the join with d and a repartition
    plan = s.sql("SELECT j.v, big.w FROM big JOIN (SELECT t.k, t.v FROM t JOIN d "
                 "ON t.k = d.k WHERE t.v > 2) AS j ON j.k = big.k",
                 options={"hash_join_single_partition_threshold_rows": 0}).explain()
    assert plan.count("mode=Partitioned") == 2
    assert "batch_rows=" in _scan_line(plan, "t")
    assert "batch_rows=" not in _scan_line(plan, "big")


@pytest.mark.parametrize("partitions", [1, 2])
@pytest.mark.parametrize("exists", ["EXISTS", "NOT EXISTS"])
def test_probe_scan_of_a_left_semi_or_anti_join_widens(exists, partitions):
    # the build side (d) is what these joins emit; the probe rows only mark it
    plan = _session(partitions).sql(f"SELECT name FROM d WHERE {exists} "
                                    "(SELECT 1 FROM t WHERE t.k = d.k AND t.v > 3)").explain()
    join = "left_anti" if exists == "NOT EXISTS" else "left_semi"
    assert f"HashJoinExec: mode=CollectLeft, join_type={join}" in plan
    assert f"batch_rows={8192 * AGGREGATE_BATCH_FACTOR}" in _scan_line(plan, "t")


def test_probe_scan_of_a_right_anti_join_keeps_batch_size():
    # right anti emits the probe rows themselves: they stream to the result
    plan = _session(2).sql("SELECT v FROM t WHERE NOT EXISTS "
                           "(SELECT 1 FROM d WHERE t.k = d.k)").explain()
    assert "join_type=right_anti" in plan
    assert "batch_rows=" not in _scan_line(plan, "t")


@pytest.mark.parametrize("sql", [
    "SELECT k, v FROM t ORDER BY v",                                    # no aggregate
    "SELECT k, sum(v) OVER (PARTITION BY k) FROM t",                    # window
    "SELECT count(*) FROM (SELECT * FROM t LIMIT 10) AS s",             # a limit between
    "SELECT k, sum(v) FROM (SELECT k, v FROM t ORDER BY k) AS s GROUP BY k",  # sorted agg
    "SELECT t.k, v FROM t JOIN (SELECT * FROM d LIMIT 3) AS l ON t.k = l.k",  # limited build
])
def test_other_scans_keep_batch_size(sql):
    plan = _session(1).sql(sql).explain()
    assert "batch_rows=" not in plan


def test_scan_batches_are_counted_at_the_wider_size():
    s = _session(1, batch_size=10)
    text = s.sql("EXPLAIN ANALYZE SELECT k, count(*) FROM t GROUP BY k").to_arrow() \
        .column(-1)[0].as_py()
    batches = int(re.search(r"DataSourceExec.*?output_batches=(\d+)", text).group(1))
    assert batches == -(-5_000 // (10 * AGGREGATE_BATCH_FACTOR))


def _tables():
    n = 2_000
    keys = [None if i % 17 == 0 else (i * 7919) % 37 for i in range(n)]
    return {"t": pa.table({"k": keys, "s": [None if k is None else f"s{k % 5}" for k in keys],
                           "v": [None if i % 23 == 0 else i % 101 for i in range(n)]}),
            "e": pa.table({"k": pa.array([], pa.int64()), "v": pa.array([], pa.int64())}),
            "d": pa.table({"k": list(range(0, 37, 2)), "name": [f"n{i % 4}" for i in range(19)]})}


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", [
    "SELECT k, count(*), sum(v), min(v), max(v), avg(v) FROM t GROUP BY k",
    "SELECT s, k, count(v) FROM t WHERE v > 10 GROUP BY s, k",
    "SELECT count(*), sum(v), count(DISTINCT k) FROM t",
    "SELECT k, count(*), sum(v) FROM e GROUP BY k",
    "SELECT count(*), sum(v) FROM e",
    "SELECT name, count(*), sum(v) FROM t JOIN d ON t.k = d.k GROUP BY name",
    "SELECT t.k, t.v, d.name FROM t JOIN d ON t.k = d.k WHERE t.v > 20",
    "SELECT d.name, t.s FROM d LEFT JOIN (SELECT * FROM t WHERE v < 50) AS t ON t.k = d.k",
    "SELECT e.k FROM e RIGHT JOIN t ON e.k = t.k",
    "SELECT name FROM d WHERE EXISTS (SELECT 1 FROM t WHERE t.k = d.k AND t.v > 3)",
    "SELECT name FROM d WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.k = d.k AND t.v > 90)",
    "SELECT k FROM d WHERE k NOT IN (SELECT k FROM t WHERE v > 95)",
])
def test_results_match_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)
