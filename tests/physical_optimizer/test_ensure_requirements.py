"""Plan shapes: EnsureRequirements inserts exchanges and sorts only where needed."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

import plansight as ps


def _session(partitions: int) -> ps.Session:
    s = ps.Session(target_partitions=partitions)
    n = 10_000
    s.register("t", pa.table({"p": [i % 7 for i in range(n)], "o": list(range(n)),
                              "v": [float(i % 13) for i in range(n)],
                              "s": [str(i % 5) for i in range(n)]}))
    s.register("small", pa.table({"p": list(range(7)), "name": [f"n{i}" for i in range(7)]}))
    return s


def _operators(plan_text: str) -> list[str]:
    return [line.strip().split(":")[0].split(",")[0] for line in plan_text.splitlines()]


def test_grouped_aggregate_runs_in_two_phases_across_a_hash_repartition():
    plan = _session(2).sql("SELECT p, sum(v) FROM t GROUP BY p").explain()
    ops = _operators(plan)
    assert ops.index("AggregateExec") < ops.index("RepartitionExec")
    assert "mode=Final" in plan and "mode=Partial" in plan
    assert "partitioning=Hash([p], 2), input_partitions=2" in plan


def test_single_partition_needs_no_exchange():
    plan = _session(1).sql("SELECT p, sum(v) FROM t GROUP BY p").explain()
    assert "RepartitionExec" not in plan and "CoalescePartitionsExec" not in plan
    assert "mode=Single" in plan


def test_global_aggregate_merges_partials_into_one_partition():
    plan = _session(2).sql("SELECT sum(v), count(*) FROM t").explain()
    ops = _operators(plan)
    assert "RepartitionExec" not in ops
    final, merge, partial = (ops.index("AggregateExec"), ops.index("CoalescePartitionsExec"),
                             len(ops) - 1 - ops[::-1].index("AggregateExec"))
    assert final < merge < partial


def test_non_decomposable_aggregate_is_single_phase_after_repartition():
    plan = _session(2).sql("SELECT p, median(v) FROM t GROUP BY p").explain()
    assert "mode=Single" in plan and "mode=Partial" not in plan
    assert "RepartitionExec: partitioning=Hash([p], 2)" in plan


def test_window_input_is_partitioned_on_its_keys_or_merged():
    query = _session(2).sql("SELECT p, sum(v) OVER (PARTITION BY p ORDER BY o) FROM t")
    window = next(op for op in _walk(query.physical) if "Window" in op.name)
    partitioning = window.children()[0].output_partitioning()
    assert partitioning.count == 1 or [str(e) for e in partitioning.hash_exprs] == ["p"]
    assert window.required_input_distribution()[0].satisfied_by(partitioning)


def test_sorted_input_gets_no_second_sort():
    sql = ("SELECT p, o, sum(v) OVER (PARTITION BY p ORDER BY o) AS w "
           "FROM (SELECT p, o, v FROM t ORDER BY p, o) AS sorted")
    plan = _session(1).sql(sql).explain()
    assert plan.count("SortExec") == 1


def test_collect_left_join_builds_on_one_partition():
    plan = _session(2).sql("SELECT name, v FROM t JOIN small USING (p)").explain()
    assert "HashJoinExec: mode=CollectLeft" in plan


@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
def test_results_do_not_depend_on_partitions(partitions):
    s = _session(partitions)
    got = s.sql("SELECT p, count(*) AS c, sum(v) AS s, avg(v) AS a, min(o) AS lo FROM t "
                "GROUP BY p ORDER BY p").to_arrow()
    sizes = [1429] * 4 + [1428] * 3  # 10,000 rows over 7 keys
    assert got.column("c").to_pylist() == sizes
    assert got.column("lo").to_pylist() == list(range(7))
    window = s.sql("SELECT sum(w) FROM (SELECT count(*) OVER (PARTITION BY p ORDER BY o) AS w "
                   "FROM t)").to_arrow().column(0)[0].as_py()
    assert window == sum(k * (k + 1) // 2 for k in sizes)


def test_skewed_key_lands_in_one_partition_and_results_hold():
    n = 20_000
    keys = [0 if i % 10 else i for i in range(n)]  # 90% one key
    s = ps.Session(target_partitions=4)
    s.register("skew", pa.table({"k": keys, "v": [1] * n}))
    run = s.sql("SELECT k, count(*) FROM skew GROUP BY k").execute()
    counts = dict(zip(run.result.column(0).to_pylist(), run.result.column(1).to_pylist()))
    assert counts[0] == 18_001 and len(counts) == 2_000  # i = 0 is key 0 too
    repartition = [op for op in _walk(run.plan) if op.name == "RepartitionExec"][0]
    rows = [m["partition_rows"] for m in run.metrics.partitions(repartition.operator_id)]
    assert sum(rows) == run.metrics.total(repartition.operator_id, "output_rows")


def test_error_in_one_partition_thread_surfaces_once_and_stops_the_others():
    s = ps.Session(target_partitions=2)
    values = ["1"] * 50_000 + ["oops"] + ["2"] * 50_000
    s.register("bad", pa.table({"x": values}))
    before = threading.active_count()
    with pytest.raises(ps.ExecutionError) as error:
        s.sql("SELECT sum(CAST(x AS INTEGER)) FROM bad").to_arrow()
    assert "oops" in str(error.value)
    assert threading.active_count() <= before  # no worker outlives the query
    assert s.sql("SELECT count(*) FROM bad").to_arrow().column(0)[0].as_py() == 100_001


def _walk(plan):
    yield plan
    for child in plan.children():
        yield from _walk(child)
