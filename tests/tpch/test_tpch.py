"""All 22 TPC-H queries on tpchgen-cli Parquet (SF 0.01) equal DuckDB's answers."""

from __future__ import annotations

import os

import duckdb
import pytest

import plansight as ps
from plansight.datasets import TPCH_QUERIES, tpch_parquet
from tests.differential.harness import assert_same, has_top_level_order_by
from tests.session_defaults import session_defaults


@pytest.fixture(scope="module")
def tpch_dir(tmp_path_factory):
    return tpch_parquet(tmp_path_factory.mktemp("tpch"), 0.01)


@pytest.fixture(scope="module")
def engines(tpch_dir):
    session = ps.Session(target_partitions=1)
    con = duckdb.connect()
    for name in sorted(os.listdir(tpch_dir)):
        table = name.split(".")[0]
        path = os.path.join(tpch_dir, name)
        session.register_parquet(table, path)
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{path}')")
    return session, con


@pytest.mark.parametrize("number", sorted(TPCH_QUERIES))
def test_tpch_query_matches_duckdb(engines, number):
    session, con = engines
    sql = TPCH_QUERIES[number]
    got = session.sql(sql).to_arrow()
    expected = con.sql(sql).arrow()
    expected = expected.read_all() if hasattr(expected, "read_all") else expected
    assert expected.num_rows > 0, f"Q{number} has an empty oracle answer"
    assert_same(got, expected, ordered=has_top_level_order_by(sql), sql=sql)


@pytest.fixture(scope="module")
def generated():
    from plansight.datasets import tpch

    return tpch(0.01)


@pytest.mark.parametrize("number", sorted(TPCH_QUERIES))
def test_tpch_in_memory_at_three_partitions_matches_duckdb(generated, number):
    """Memory tables split into row ranges: every exchange, shared build and two-phase
    aggregate runs with several partitions on several threads."""
    session = ps.Session(target_partitions=3, batch_size=2048)
    con = duckdb.connect()
    for name, table in generated.items():
        session.register(name, table)
        con.register(name, table)
    sql = TPCH_QUERIES[number]
    got = session.sql(sql).to_arrow()
    expected = con.sql(sql).arrow()
    expected = expected.read_all() if hasattr(expected, "read_all") else expected
    assert_same(got, expected, ordered=has_top_level_order_by(sql), sql=sql)


@pytest.mark.parametrize("number", sorted(TPCH_QUERIES))
def test_tpch_with_every_hash_join_partitioned(generated, number, monkeypatch):
    """Partitioned joins (both inputs hash-repartitioned, one build per partition) give the
    same answers as DuckDB."""
    session_defaults(monkeypatch, hash_join_single_partition_threshold_rows=0)
    session = ps.Session(target_partitions=3, batch_size=4096)
    con = duckdb.connect()
    for name, table in generated.items():
        session.register(name, table)
        con.register(name, table)
    sql = TPCH_QUERIES[number]
    query = session.sql(sql)
    if "HashJoinExec" in query.explain():
        assert "mode=Partitioned" in query.explain() or "null_aware=true" in query.explain()
    got = query.to_arrow()
    expected = con.sql(sql).arrow()
    expected = expected.read_all() if hasattr(expected, "read_all") else expected
    assert_same(got, expected, ordered=has_top_level_order_by(sql), sql=sql)
