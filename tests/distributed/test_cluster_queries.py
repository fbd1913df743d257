"""Queries on a LocalCluster of 1, 2 and 3 worker processes (loopback only) equal DuckDB and
local execution, and are identical across worker counts."""

from __future__ import annotations

import ipaddress
import os
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import duckdb
import psutil
import pytest

import plansight as ps
from plansight.datasets import TPCH_QUERIES
from tests.differential import corpus
from tests.differential.harness import assert_same, has_top_level_order_by, run_duckdb
from tests.differential.tables import ALL
from tests.distributed.helpers import assert_equal_to_local, cluster_session, tpch_sessions


def _host(address: str) -> str:
    return urlparse(address).hostname


def test_the_cluster_listens_on_loopback_only(client):
    info = client.scheduler_info()
    addresses = [info["address"], *info["workers"]]
    addresses += [w["nanny"] for w in info["workers"].values() if w.get("nanny")]
    assert len(info["workers"]) == 3
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
def oracles(tpch_dir):
    con = duckdb.connect()
    for name in sorted(os.listdir(tpch_dir)):
        table, path = name.split(".")[0], os.path.join(tpch_dir, name)
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{path}')")
    return tpch_sessions(tpch_dir), con


def test_the_sweep_ran_on_1_2_3_workers(tpch_by_workers):
    _, addresses = tpch_by_workers
    assert [len(addresses[n]) for n in (1, 2, 3)] == [1, 2, 3]
    assert set(addresses[1]) < set(addresses[2]) < set(addresses[3])  # the same processes


@pytest.mark.parametrize("number", sorted(TPCH_QUERIES))
def test_tpch_on_1_2_3_workers(tpch_by_workers, oracles, number):
    results, _ = tpch_by_workers
    local_session, con = oracles
    sql = TPCH_QUERIES[number]
    expected = con.sql(sql).arrow()
    expected = expected.read_all() if hasattr(expected, "read_all") else expected
    local = local_session.sql(sql).to_arrow()
    for workers in (1, 2, 3):
        got = results[workers][number]
        assert_same(got, expected, ordered=has_top_level_order_by(sql), sql=sql)
        assert_equal_to_local(got, local, sql)
    # a partition's rows do not depend on where its tasks ran: bit for bit the same answer
    assert results[1][number].equals(results[2][number])
    assert results[2][number].equals(results[3][number])


def _corpus():
    for group, queries in corpus.GROUPS.items():
        for number, sql in enumerate(queries):
            yield pytest.param(sql, id=f"{group}-{number}")


@pytest.fixture(scope="module")
def corpus_sessions(client):
    """Every differential table, registered once: scattered to the cluster once."""
    cluster = cluster_session(client)
    local = ps.Session(target_partitions=4)
    for name, table in ALL.items():
        cluster.register(name, table)
        local.register(name, table)
    return cluster, local


@pytest.fixture(scope="module")
def corpus_results(corpus_sessions):
    """Every corpus query run on the cluster, four at a time (one session, one client):
    a query waits on the scheduler far more than it computes, and concurrent queries must
    keep their pieces apart anyway."""
    cluster, _ = corpus_sessions

    def run(sql: str):
        try:
            return cluster.sql(sql).to_arrow()
        except Exception as error:  # noqa: BLE001 (re-raised by the query's own test)
            return error

    queries = sorted({param.values[0] for param in _corpus()})
    with ThreadPoolExecutor(4) as pool:
        return dict(zip(queries, pool.map(run, queries)))


@pytest.mark.parametrize("sql", list(_corpus()))
def test_differential_corpus_on_the_cluster(corpus_sessions, corpus_results, sql):
    _, local = corpus_sessions
    got = corpus_results[sql]
    if isinstance(got, Exception):
        raise got
    assert_same(got, run_duckdb(sql, ALL), ordered=has_top_level_order_by(sql), sql=sql)
    assert_equal_to_local(got, local.sql(sql).to_arrow(), sql)
