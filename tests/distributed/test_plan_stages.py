"""Stages: where a plan is cut (EXPLAIN on a session with a cluster), and what a staged plan
keeps. Planning needs no cluster: the session connects when a query first runs."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import plansight as ps
from plansight.datasets import TPCH_QUERIES, tpch
from plansight.engine.distributed.shuffle import ShuffleReaderExec, ShuffleWriterExec
from plansight.engine.distributed.stages import plan_stages, stages_of
from plansight.engine.physical.repartition import RepartitionExec
from tests.distributed.helpers import cluster_session

SHAPE = re.compile(r"Shuffle|CoalescePartitionsExec|SortPreservingMergeExec|HashJoinExec")


def stage_shape(explain: str) -> str:
    """The exchanges and joins of an EXPLAIN, indented as printed, details cut short."""
    lines = []
    for line in explain.splitlines():
        if not SHAPE.search(line):
            continue
        text = re.sub(r"[,:] rows≈[\d,]+", "", line.strip())  # the shapes, not the estimates
        text = re.sub(r"(HashJoinExec: mode=\w+).*", r"\1", text)
        text = re.sub(r"(SortPreservingMergeExec):.*", r"\1", text)
        text = text.replace(", tasks=4", "")
        lines.append(f"{(len(line) - len(line.lstrip())) // 2} {text}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def session():
    session = cluster_session("local:2")
    for name, table in tpch(0.01).items():
        session.register(name, table)
    return session


EXPECTED = {
    1: """
0 SortPreservingMergeExec
1 ShuffleReaderExec: stage=2, passthrough, partitions=4
2 ShuffleWriterExec: stage=2, partitioning=passthrough
7 ShuffleReaderExec: stage=1, partitioning=Hash([l_returnflag, l_linestatus], 4)
8 ShuffleWriterExec: stage=1, partitioning=Hash([l_returnflag, l_linestatus], 4)
""",
    3: """
1 SortPreservingMergeExec
2 ShuffleReaderExec: stage=4, passthrough, partitions=4
3 ShuffleWriterExec: stage=4, partitioning=passthrough
7 ShuffleReaderExec: stage=3, partitioning=Hash([l_orderkey], 4)
8 ShuffleWriterExec: stage=3, partitioning=Hash([l_orderkey], 4)
11 HashJoinExec: mode=CollectLeft
12 CoalescePartitionsExec
13 ShuffleReaderExec: stage=2, passthrough, partitions=4
14 ShuffleWriterExec: stage=2, partitioning=passthrough
15 HashJoinExec: mode=CollectLeft
16 CoalescePartitionsExec
17 ShuffleReaderExec: stage=1, passthrough, partitions=4
18 ShuffleWriterExec: stage=1, partitioning=passthrough
""",
    5: """
0 SortPreservingMergeExec
1 ShuffleReaderExec: stage=7, passthrough, partitions=4
2 ShuffleWriterExec: stage=7, partitioning=passthrough
6 ShuffleReaderExec: stage=6, partitioning=Hash([n_name], 4)
7 ShuffleWriterExec: stage=6, partitioning=Hash([n_name], 4)
12 HashJoinExec: mode=CollectLeft
13 CoalescePartitionsExec
14 ShuffleReaderExec: stage=1, passthrough, partitions=4
15 ShuffleWriterExec: stage=1, partitioning=passthrough
14 HashJoinExec: mode=CollectLeft
15 CoalescePartitionsExec
16 ShuffleReaderExec: stage=5, passthrough, partitions=4
17 ShuffleWriterExec: stage=5, partitioning=passthrough
19 HashJoinExec: mode=CollectLeft
20 CoalescePartitionsExec
21 ShuffleReaderExec: stage=4, passthrough, partitions=4
22 ShuffleWriterExec: stage=4, partitioning=passthrough
24 HashJoinExec: mode=CollectLeft
25 CoalescePartitionsExec
26 ShuffleReaderExec: stage=3, passthrough, partitions=4
27 ShuffleWriterExec: stage=3, partitioning=passthrough
29 HashJoinExec: mode=CollectLeft
30 CoalescePartitionsExec
31 ShuffleReaderExec: stage=2, passthrough, partitions=4
32 ShuffleWriterExec: stage=2, partitioning=passthrough
""",
    9: """
0 SortPreservingMergeExec
1 ShuffleReaderExec: stage=7, passthrough, partitions=4
2 ShuffleWriterExec: stage=7, partitioning=passthrough
6 ShuffleReaderExec: stage=6, partitioning=Hash([nation, o_year], 4)
7 ShuffleWriterExec: stage=6, partitioning=Hash([nation, o_year], 4)
12 HashJoinExec: mode=CollectLeft
13 CoalescePartitionsExec
14 ShuffleReaderExec: stage=1, passthrough, partitions=4
15 ShuffleWriterExec: stage=1, partitioning=passthrough
13 HashJoinExec: mode=CollectLeft
14 CoalescePartitionsExec
15 ShuffleReaderExec: stage=5, passthrough, partitions=4
16 ShuffleWriterExec: stage=5, partitioning=passthrough
19 HashJoinExec: mode=CollectLeft
20 CoalescePartitionsExec
21 ShuffleReaderExec: stage=4, passthrough, partitions=4
22 ShuffleWriterExec: stage=4, partitioning=passthrough
24 HashJoinExec: mode=CollectLeft
25 CoalescePartitionsExec
26 ShuffleReaderExec: stage=2, passthrough, partitions=4
27 ShuffleWriterExec: stage=2, partitioning=passthrough
26 HashJoinExec: mode=CollectLeft
27 CoalescePartitionsExec
28 ShuffleReaderExec: stage=3, passthrough, partitions=4
29 ShuffleWriterExec: stage=3, partitioning=passthrough
""",
}


@pytest.mark.parametrize("number", sorted(EXPECTED))
def test_tpch_stage_shapes(session, number):
    assert stage_shape(session.sql(TPCH_QUERIES[number]).explain()) == \
        EXPECTED[number].strip("\n")


@pytest.mark.parametrize("number", sorted(TPCH_QUERIES))
def test_every_exchange_is_cut_and_ids_are_kept(session, number):
    staged = session.sql(TPCH_QUERIES[number]).physical
    operators = [op for _, op in staged.walk()]
    assert not any(isinstance(op, RepartitionExec) for op in operators)
    for reader in (op for op in operators if isinstance(op, ShuffleReaderExec)):
        (writer,) = reader.children()
        assert isinstance(writer, ShuffleWriterExec) and writer.stage_id == reader.stage_id
        assert reader.output_partitioning().count == (
            writer.output_partitioning().count if writer.mode == "passthrough"
            else writer.partitions)
    stages = stages_of(staged)
    assert [s.stage_id for s in stages[:-1]] == list(range(1, len(stages)))
    assert stages[-1].final and all(not s.final for s in stages[:-1])
    for stage in stages:  # a stage reads only stages that run before it
        assert all(0 < i < (stage.stage_id or len(stages)) for i in stage.inputs)


def test_staging_leaves_the_local_plan_alone():
    session = ps.Session(target_partitions=3)
    session.register("t", pa.table({"k": [1, 2, 1, 3], "v": [1.0, 2.0, 3.0, 4.0]}))
    query = session.sql("SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k")
    before = query.explain()
    staged = plan_stages(query.physical)
    assert query.explain() == before and "Shuffle" not in before
    ids = {op.operator_id for _, op in query.physical.walk()}
    kept = {op.operator_id for _, op in staged.walk() if not op.name.startswith("Shuffle")}
    assert kept == ids - {op.operator_id for _, op in query.physical.walk()
                          if isinstance(op, RepartitionExec)}
    assert query.to_arrow().to_pydict() == {"k": [1, 2, 3], "s": [4.0, 2.0, 4.0]}


def test_cluster_option_is_validated():
    session = ps.Session(target_partitions=1)
    for good, stored in [("local:3", "local:3"), ("tcp://127.0.0.1:8786", "tcp://127.0.0.1:8786"),
                         ("none", None), (None, None)]:
        session.sql(f"SET cluster = '{good}'" if good else "SET cluster = 'none'")
        assert session.get_option("cluster") == stored
    for bad in ["local:0", "local:x", "my cluster"]:
        with pytest.raises(ps.errors.PlanError, match="cluster"):
            session.set_option("cluster", bad)


def test_a_recursive_query_stays_local():
    session = ps.Session(target_partitions=2, cluster="local:2")
    query = session.sql("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
                        "WHERE n < 5) SELECT sum(n) AS s FROM r")
    assert not query.distributed and "Shuffle" not in query.explain()
    assert query.to_arrow().to_pydict() == {"s": [15]}


def test_small_queries_stay_here_unless_asked():
    """Dispatching stages costs about 0.1 s: a query over fewer rows than cluster_min_rows
    runs in this process, and EXPLAIN says so and how to send it anyway."""
    session = ps.Session(target_partitions=2, cluster="local:2")  # never started: planning
    session.register("small", pa.table({"k": [1, 2, 1], "v": [1.0, 2.0, 3.0]}))
    session.register("big", pa.table({"k": pa.array(range(5000))}))
    sql = "SELECT s.k, count(*) AS n FROM small s JOIN big b ON s.k = b.k GROUP BY s.k"
    here = session.sql(sql)
    assert not here.distributed and "Shuffle" not in here.explain()
    assert here.explain().endswith(
        "-- runs in this process: its sources hold about 5,003 rows, fewer than "
        "cluster_min_rows (1,000,000); SET cluster_min_rows = 0 sends every query to the "
        "cluster")
    assert here.to_arrow().sort_by("k").to_pydict() == {"k": [1, 2], "n": [2, 1]}
    session.sql("SET cluster_min_rows = 5003")  # the sum of both sources decides
    assert session.sql(sql).distributed and "Shuffle" in session.sql(sql).explain()
    assert not session.sql("SELECT * FROM small").distributed  # 3 rows
    with pytest.raises(ps.errors.PlanError, match="cluster_min_rows"):
        session.set_option("cluster_min_rows", -1)
    no_cluster = ps.Session(target_partitions=2)
    no_cluster.register("small", pa.table({"k": [1]}))
    assert "runs in this process" not in no_cluster.sql("SELECT * FROM small").explain()


def test_a_probe_scan_stage_waits_for_the_build_stage_unless_turned_off():
    session = ps.Session(target_partitions=2, cluster="local:2")  # planning only
    session.set_option("cluster_min_rows", 0)
    session.set_option("hash_join_single_partition_threshold_rows", 1)
    session.register("small", pa.table({"k": [1, 2, 3]}))
    session.register("big", pa.table({"k": list(range(100)), "v": list(range(100))}))
    sql = "SELECT b.v FROM small s JOIN big b ON s.k = b.k"
    staged = session.sql(sql).physical
    (build,) = [op for _, op in staged.walk() if getattr(op, "key_summaries", None)]
    (probe,) = [op for _, op in staged.walk() if getattr(op, "awaited_filters", None)]
    assert any(op.name == "DataSourceExec" and op.table == "small" for _, op in build.walk())
    assert any(op.name == "DataSourceExec" and op.table == "big" for _, op in probe.walk())
    assert f"after=[stage {build.stage_id} for HashJoin[" in probe.display()
    order = [s.stage_id for s in stages_of(staged)]
    assert order.index(build.stage_id) < order.index(probe.stage_id)
    session.set_option("dynamic_filter_across_stages", False)
    assert "after=[" not in session.sql(sql).explain()


def test_a_probe_scan_stage_runs_beside_a_build_that_reads_as_much_as_it():
    # the build side is small (an aggregate's few groups) but reads all of ``big`` to get
    # there: waiting would run two full scans one after the other (TPC-H Q18's IN)
    session = ps.Session(target_partitions=2, cluster="local:2")  # planning only
    session.set_option("cluster_min_rows", 0)
    session.set_option("hash_join_single_partition_threshold_rows", 1)
    session.register("big", pa.table({"k": [i % 5 for i in range(100)],
                                      "v": list(range(100))}))
    session.register("other", pa.table({"k": list(range(100)), "w": list(range(100))}))
    staged = session.sql("SELECT o.w FROM (SELECT k FROM big GROUP BY k) g "
                         "JOIN other o ON g.k = o.k").physical
    assert not any(getattr(op, "awaited_filters", None) for _, op in staged.walk())
    # the same join over a build that reads little still waits
    session.register("tiny", pa.table({"k": [1, 2, 3]}))
    staged = session.sql("SELECT o.w FROM (SELECT k FROM tiny GROUP BY k) g "
                         "JOIN other o ON g.k = o.k").physical
    assert any(getattr(op, "awaited_filters", None) for _, op in staged.walk())
