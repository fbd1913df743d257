"""A join of scans that a query computes twice (TPC-H Q11's partsupp ⋈ supplier ⋈ nation,
under its GROUP BY and in its HAVING's subquery) runs once, through SharedExec, when its
estimated output is small: against DuckDB with NULL join keys, outer and semi joins, copies
reading different columns, empty inputs, at partitions 1/2/3/8 and batch sizes 1/3/7/8192;
kept batches the memory pool refuses fail the query, never change its rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.errors import ResourcesExhausted
from plansight.engine.exec.context import TaskContext
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.physical.projection import ProjectionExec
from plansight.engine.physical.shared import SharedExec
from tests.differential.harness import assert_same, check, run_duckdb
from tests.session_defaults import session_defaults


def _tables() -> dict[str, pa.Table]:
    r = np.random.default_rng(11)
    n = 600
    k = [None if i % 13 == 0 else int(v) for i, v in enumerate(r.integers(0, 60, n))]
    s_nation = [None if i % 7 == 3 else i % 5 for i in range(60)]
    return {"t": pa.table({"k": pa.array(k, pa.int64()),
                           "p": pa.array(r.integers(0, 40, n), pa.int64()),
                           "v": pa.array(r.integers(-50, 100, n), pa.int64()),
                           "w": [f"w{i % 9}" for i in range(n)]}),
            "s": pa.table({"k": pa.array(range(60), pa.int64()),
                           "nk": pa.array(s_nation, pa.int64())}),
            "n": pa.table({"nk": pa.array([0, 1, 2, 3, 4, None], pa.int64()),
                           "name": ["A", "B", "C", "D", "E", "F"]})}


JOIN = "t JOIN s ON t.k = s.k JOIN n ON s.nk = n.nk AND n.name = '{nation}'"
Q11 = ("SELECT t.p, sum(t.v) AS total FROM " + JOIN + " GROUP BY t.p "
       "HAVING sum(t.v) > (SELECT sum(t.v) * 0.05 FROM " + JOIN + ") ORDER BY total DESC, p")
QUERIES = [
    Q11.format(nation="B"),
    # nothing joins: the kept partitions are empty
    Q11.format(nation="none"),
    # the copies read different columns (w in one only); a NULL nation key never matches
    "SELECT t.w, count(*) FROM " + JOIN.format(nation="C") + " GROUP BY t.w "
    "UNION ALL SELECT 'all', count(DISTINCT t.p) FROM " + JOIN.format(nation="C"),
    # an outer join's NULL-extended rows, read by both sides of a join
    "WITH o AS (SELECT x.k, x.p, s.nk FROM (SELECT * FROM t WHERE v > 85) x "
    "LEFT JOIN s ON x.k = s.k AND s.nk = 2) "
    "SELECT a.p, a.nk, b.k FROM o a JOIN o b ON a.p = b.p AND a.k <> b.k",
    # a semi join written twice, NULL keys on both sides
    "SELECT (SELECT count(*) FROM t WHERE v > 80 AND k IN (SELECT k FROM s WHERE nk = 1)), "
    "(SELECT sum(v) FROM t WHERE v > 80 AND k IN (SELECT k FROM s WHERE nk = 1))",
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_shared_joins_match_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)


def _session(partitions: int = 2, tables=None, **options) -> ps.Session:
    session = ps.Session(target_partitions=partitions, **options)
    for name, table in (tables or _tables()).items():
        session.register(name, table)
    return session


def _shared(plan) -> list[SharedExec]:
    return [op for _, op in plan.walk() if isinstance(op, SharedExec)]


@pytest.mark.parametrize("sql", QUERIES)
def test_each_repeated_join_is_shared(sql):
    assert [op.result.readers for op in _shared(_session().sql(sql).physical)] == [2, 2]


def test_explain_shows_one_join_read_twice():
    """QUERIES[2]: one copy reads t.w, the other t.p; each runs the join of both."""
    text = _session().sql(QUERIES[2]).explain()
    assert text.count("SharedExec: readers=2") == 2
    scans = [line for line in text.splitlines() if "DataSourceExec: table=t," in line]
    assert len(scans) == 2 and all("projection=[k, w, p]" in line for line in scans)


def test_copies_select_their_own_columns():
    readers = [op for _, op in _session().sql(QUERIES[2]).physical.walk()
               if isinstance(op, ProjectionExec) and isinstance(op.input, SharedExec)]
    assert len(readers) == 2
    names = [{n.split("#")[0] for n in r.schema.names} for r in readers]
    assert all(len(r.schema) == len(r.input.schema) - 1 for r in readers)
    assert sorted(("w" in n, "p" in n) for n in names) == [(False, True), (True, False)]


@pytest.mark.parametrize("partitions", [3, 8])
@pytest.mark.parametrize("sql", [QUERIES[0], QUERIES[3]])
def test_shared_partitioned_joins_match_duckdb(sql, partitions, monkeypatch):
    """Every join inside the shared subplan hash-partitioned: its exchanges run in the one
    copy a run executes, whichever reader asks first."""
    session_defaults(monkeypatch, hash_join_single_partition_threshold_rows=0)
    assert "mode=Partitioned" in _session(partitions).sql(sql).explain()
    check(sql, _tables(), target_partitions=partitions, batch_size=7)


def test_large_join_outputs_are_not_shared():
    """A join keeping most of what it reads is cheaper to run twice than to keep."""
    sql = ("SELECT (SELECT count(*) FROM t JOIN s ON t.k = s.k), "
           "(SELECT sum(v) FROM t JOIN s ON t.k = s.k)")
    assert _shared(_session().sql(sql).physical) == []
    check(sql, _tables(), target_partitions=2)


def test_volatile_joins_are_not_shared():
    join = "FROM t JOIN s ON t.k = s.k AND random() < 2 WHERE t.v > 90"
    sql = f"SELECT (SELECT count(*) {join}), (SELECT sum(t.v) {join})"
    assert _shared(_session().sql(sql).physical) == []
    # the same joins without random(): shared (the premise of the assertion above)
    sql = sql.replace(" AND random() < 2", "")
    assert len(_shared(_session().sql(sql).physical)) == 2


def test_a_small_memory_limit_plans_the_copies_apart():
    assert _shared(_session(memory_limit=1000).sql(QUERIES[0]).physical) == []


@pytest.mark.parametrize("partitions", [1, 3])
def test_a_refused_reservation_fails_the_query_not_its_rows(partitions):
    """Planned without a limit (the estimate let it share), run in pools from far too small
    to ample: each run gives DuckDB's rows or ResourcesExhausted, never from the SharedExec
    (a refused reservation spills its batches) and never wrong rows."""
    sql = QUERIES[0]
    query = _session(partitions).sql(sql)
    assert _shared(query.physical)
    expected = run_duckdb(sql, _tables())
    refused = answered = 0
    for limit in (64, 512, 2048, 8192, 1 << 16, None):
        ctx = TaskContext(query.config, MemoryPool(limit))
        plan = query.physical
        try:
            rows = [b for p in range(plan.output_partitioning().count)
                    for b in plan.execute(p, ctx)]
        except ResourcesExhausted as error:
            assert "SharedExec" not in str(error).split(" could not")[0]
            refused += 1
        else:
            got = pa.Table.from_batches(rows, schema=plan.schema)
            assert_same(got.rename_columns(expected.column_names), expected, ordered=True,
                        sql=sql)
            answered += 1
        finally:
            ctx.cleanup()
        assert ctx.memory_pool.reserved == 0
    assert refused and answered
