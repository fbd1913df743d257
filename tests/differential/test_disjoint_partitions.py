"""Scan partitions whose Parquet row groups hold non-overlapping key ranges group by that
key without an exchange (DataSourceExec's Disjoint partitioning), and aggregates hash one
high-NDV integer key instead of all (``hash_on``): against DuckDB at partitions 1/2/3/8 and
batch sizes 1/3/7/8192, with the cases that must not use the disjoint ranges (NULLs in the
column, overlapping ranges, a key value split over two row groups) and multi-file scans."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps
from plansight.engine.errors import PlanError
from plansight.engine.logical.expr import Column
from plansight.engine.physical.plan import Partitioning, hash_distribution
from tests.differential.harness import assert_same, has_top_level_order_by, run_duckdb

ROWS = 240
GROUP_ROWS = 20  # 12 row groups


def _table(kind: str, offset: int = 0) -> pa.Table:
    r = np.random.default_rng(7)
    if kind == "sorted":  # 3 rows per key, row groups cut between keys (20 rows: no)
        k = [offset + i // 4 for i in range(ROWS)]  # 4 rows per key, 20-row groups
    elif kind == "ties":  # a key's rows split over two row groups: ranges touch
        k = [offset + i // 3 for i in range(ROWS)]
    elif kind == "nulls":
        k = [None if i % 37 == 5 else offset + i // 4 for i in range(ROWS)]
    else:  # overlapping: every row group spans the whole key range
        k = [offset + int(x) for x in r.integers(0, ROWS // 4, ROWS)]
    return pa.table({
        "k": pa.array(k, pa.int64()),
        "d": pa.array([None if x is None else dt.date(2020, 1, 1) + dt.timedelta(days=x)
                       for x in k], pa.date32()),
        "g": pa.array([f"g{x % 3}" if i % 11 else None for i, x in
                       enumerate(r.integers(0, 100, ROWS).tolist())]),
        "v": pa.array([None if i % 13 == 0 else int(x) for i, x in
                       enumerate(r.integers(-50, 50, ROWS))], pa.int64())})


def _register(tmp_path, kind: str) -> tuple[ps.Session, pa.Table]:
    """Write ``kind`` (``multi``: two sorted files with disjoint ranges; ``multi_overlap``:
    two sorted files over the same range) and return a registering function's inputs."""
    folder = tmp_path / kind
    folder.mkdir()
    if kind.startswith("multi"):
        parts = [_table("sorted"), _table("sorted", 0 if kind == "multi_overlap" else 1000)]
    else:
        parts = [_table(kind)]
    for i, part in enumerate(parts):
        pq.write_table(part, folder / f"part{i}.parquet", row_group_size=GROUP_ROWS)
    return folder, pa.concat_tables(parts)


KINDS = ["sorted", "ties", "nulls", "overlap", "multi", "multi_overlap"]
QUERIES = [
    "SELECT k, count(*), sum(v), min(g) FROM t GROUP BY k",
    "SELECT k, g, count(v) FROM t GROUP BY k, g",
    "SELECT d, sum(v) FROM t GROUP BY d",
    "SELECT k, count(DISTINCT g), string_agg(g, ',' ORDER BY g) FROM t GROUP BY k",
    "SELECT k, v, sum(v) OVER (PARTITION BY k) FROM t",
    "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING count(*) > 2 ORDER BY s DESC, k LIMIT 5",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("disjoint")
    return {kind: _register(tmp, kind) for kind in KINDS}


def _session(folder, partitions: int, batch_size: int = 8192) -> ps.Session:
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    session.register_parquet("t", str(folder))
    return session


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("kind", KINDS)
def test_grouping_over_row_group_ranges_matches_duckdb(files, kind, partitions, batch_size):
    folder, table = files[kind]
    session = _session(folder, partitions, batch_size)
    for sql in QUERIES:
        expected = run_duckdb(sql, {"t": table})
        assert_same(session.sql(sql).to_arrow(), expected,
                    ordered=has_top_level_order_by(sql), sql=sql)


@pytest.mark.parametrize("kind, disjoint", [("sorted", True), ("multi", True), ("ties", False),
                                            ("nulls", False), ("overlap", False),
                                            ("multi_overlap", False)])
def test_disjoint_ranges_need_no_exchange(files, kind, disjoint):
    plan = _session(files[kind][0], 3).sql("SELECT k, sum(v) FROM t GROUP BY k").explain()
    assert ("RepartitionExec" not in plan and "mode=Single" in plan) is disjoint, plan


def test_keys_including_the_disjoint_column_need_no_exchange(files):
    plan = _session(files["sorted"][0], 3).sql(
        "SELECT g, k, d, count(*) FROM t GROUP BY g, k, d").explain()
    assert "RepartitionExec" not in plan and "mode=Single" in plan, plan


def test_a_top_k_reading_units_round_robin_drops_the_disjoint_partitioning(files):
    session = _session(files["sorted"][0], 3)
    sql = "SELECT k, v FROM t ORDER BY k DESC LIMIT 3"
    assert "read_order" in session.sql(sql).explain()
    assert_same(session.sql(sql).to_arrow(), run_duckdb(sql, {"t": files["sorted"][1]}),
                ordered=True, sql=sql)


# ---------------------------------------------------------------- one high-NDV hash key

def _wide(n: int = 2000) -> pa.Table:
    r = np.random.default_rng(11)
    k = r.integers(0, n * 4, n)  # nearly every row its own key
    return pa.table({"k": pa.array([None if i % 97 == 0 else int(x) for i, x in enumerate(k)],
                                   pa.int64()),
                     "name": pa.array([f"name-{x}" for x in k]),
                     "few": pa.array((k % 3).tolist(), pa.int64()),
                     "v": pa.array(r.integers(0, 10, n), pa.int64())})


ONE_KEY_QUERIES = [
    "SELECT k, name, few, sum(v), count(*) FROM t GROUP BY k, name, few",
    "SELECT k, name, median(v) FROM t GROUP BY k, name",
    "SELECT name, k, count(*) AS c FROM t GROUP BY name, k ORDER BY c DESC, k LIMIT 4",
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", ONE_KEY_QUERIES)
def test_one_hash_key_matches_duckdb(sql, partitions, batch_size):
    table = _wide(300) if batch_size < 8 else _wide()
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    session.register("t", table)
    assert_same(session.sql(sql).to_arrow(), run_duckdb(sql, {"t": table}),
                ordered=has_top_level_order_by(sql), sql=sql)


def test_an_exchange_hashes_the_high_ndv_integer_key_only():
    session = ps.Session(target_partitions=2)
    session.register("t", _wide())
    plan = session.sql("SELECT k, name, few, sum(v) FROM t GROUP BY k, name, few").explain()
    assert "RepartitionExec: partitioning=Hash([k], 2)" in plan and "hash_on=[k]" in plan, plan
    # few distinct values: all keys are hashed
    plan = session.sql("SELECT few, name, sum(v) FROM t GROUP BY few, name").explain()
    assert "hash_on" not in plan and "Hash([few, name], 2)" in plan, plan


def test_a_subset_of_the_keys_satisfies_grouping_but_not_a_join():
    a, b, c = (Column(i, n, pa.int64()) for i, n in enumerate("abc"))
    assert hash_distribution([a, b]).satisfied_by(Partitioning(3, (a,)))
    assert hash_distribution([a, b]).satisfied_by(Partitioning(3, disjoint_exprs=(b,)))
    assert not hash_distribution([a, b]).satisfied_by(Partitioning(3, (a, c)))
    assert not hash_distribution([a]).satisfied_by(Partitioning(3, (a, b)))
    assert not hash_distribution([a, b], 3).satisfied_by(Partitioning(3, (a,)))
    # a disjoint partitioning is not the engine's hash: it never co-partitions a join
    assert not hash_distribution([a], 3).satisfied_by(Partitioning(3, disjoint_exprs=(a,)))
    assert hash_distribution([a], 3).satisfied_by(Partitioning(3, (a,)))
    with pytest.raises(PlanError):
        hash_distribution([a, b], hash_on=[c])
