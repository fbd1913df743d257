"""Queries on LocalClusters of 1, 2 and 3 worker processes (loopback only) equal DuckDB and
local execution, and are identical across worker counts."""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlparse

import duckdb
import psutil
import pytest

import plansight as ps
from plansight.datasets import TPCH_QUERIES, tpch_parquet
from tests.differential import corpus
from tests.differential.harness import assert_same, has_top_level_order_by, run_duckdb
from tests.differential.tables import ALL
from tests.distributed.compare import assert_equal_to_local


def _host(address: str) -> str:
    return urlparse(address).hostname


def test_every_cluster_listens_on_loopback_only(clients):
    for client in clients.values():
        info = client.scheduler_info()
        addresses = [info["address"], *info["workers"]]
        addresses += [w["nanny"] for w in info["workers"].values() if w.get("nanny")]
        assert len(info["workers"]) in (1, 2, 3)
        for address in addresses:
            assert ipaddress.ip_address(_host(address)).is_loopback, address
    # nothing else listens either: Dask's HTTP routes (health, metrics) bind the cluster's
    # host too, and the dashboard is off
    me = psutil.Process()
    listening = [c.laddr for p in [me, *me.children(recursive=True)]
                 for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert listening
    assert all(ipaddress.ip_address(a.ip).is_loopback for a in listening), listening


@pytest.fixture(scope="module")
def tpch_dir(tmp_path_factory):
    return tpch_parquet(tmp_path_factory.mktemp("tpch"), 0.01)


@pytest.fixture(scope="module")
def tpch_sessions(tpch_dir, clients):
    """A local session and one per cluster size, all reading the Parquet files by path."""
    sessions = {"local": ps.Session(target_partitions=4)}
    sessions.update({n: ps.Session(target_partitions=4, cluster=client)
                     for n, client in clients.items()})
    con = duckdb.connect()
    for name in sorted(os.listdir(tpch_dir)):
        table, path = name.split(".")[0], os.path.join(tpch_dir, name)
        for session in sessions.values():
            session.register_parquet(table, path)
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{path}')")
    return sessions, con


@pytest.mark.parametrize("number", sorted(TPCH_QUERIES))
def test_tpch_on_1_2_3_workers(tpch_sessions, number):
    sessions, con = tpch_sessions
    sql = TPCH_QUERIES[number]
    expected = con.sql(sql).arrow()
    expected = expected.read_all() if hasattr(expected, "read_all") else expected
    local = sessions["local"].sql(sql).to_arrow()
    results = {}
    for workers in (1, 2, 3):
        query = sessions[workers].sql(sql)
        assert query.distributed
        results[workers] = query.to_arrow()
        assert_same(results[workers], expected, ordered=has_top_level_order_by(sql), sql=sql)
        assert_equal_to_local(results[workers], local, sql)
    # a partition's rows do not depend on where its tasks ran: bit for bit the same answer
    assert results[1].equals(results[2]) and results[2].equals(results[3])
    assert sessions[2].sql(sql).to_arrow().equals(results[2])  # and again


def _corpus():
    for group, queries in corpus.GROUPS.items():
        for number, sql in enumerate(queries):
            yield pytest.param(sql, id=f"{group}-{number}")


@pytest.fixture(scope="module")
def corpus_sessions(client2):
    """Every differential table, registered once: scattered to the cluster once."""
    cluster = ps.Session(target_partitions=4, cluster=client2)
    local = ps.Session(target_partitions=4)
    for name, table in ALL.items():
        cluster.register(name, table)
        local.register(name, table)
    return cluster, local


@pytest.mark.parametrize("sql", list(_corpus()))
def test_differential_corpus_on_two_workers(corpus_sessions, sql):
    cluster, local = corpus_sessions
    got = cluster.sql(sql).to_arrow()
    assert_same(got, run_duckdb(sql, ALL), ordered=has_top_level_order_by(sql), sql=sql)
    assert_equal_to_local(got, local.sql(sql).to_arrow(), sql)
