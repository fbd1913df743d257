"""Rows the query does not reorder come out in the source's order, as in DuckDB
(``preserve_insertion_order``): at every partition count and batch size, the result equals
DuckDB's row for row, not only as a multiset."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps

ROWS = 5_000


@pytest.fixture(scope="module")
def table():
    i = np.arange(ROWS)
    rng = np.random.default_rng(7)
    return pa.table({
        "k": rng.integers(0, 1000, ROWS),  # not sorted: order comes from the position only
        "v": pa.array(i % 13, mask=i % 17 == 0),
        "s": pa.array([f"s{x % 50}" for x in i]),
        "pos": i,
    })


QUERIES = [
    "SELECT * FROM t",
    "SELECT k, s FROM t WHERE v > 6",
    "SELECT k + v AS kv, upper(s) AS u FROM t WHERE s <> 's3' AND v IS NOT NULL",
    "SELECT * FROM t LIMIT 10",
    "SELECT k FROM t WHERE v = 2 LIMIT 100",
    "SELECT pos, k FROM t WHERE k < 500 LIMIT 37 OFFSET 1200",
    "SELECT * FROM (SELECT k, pos FROM t WHERE v < 3) WHERE k > 100",
    "SELECT k FROM t WHERE v = 1 UNION ALL SELECT pos FROM t WHERE v = 2",
    "SELECT sum(pos) AS total, count(*) AS n FROM (SELECT pos FROM t WHERE k > 10 LIMIT 777)",
    "SELECT * FROM t WHERE k < 0",  # empty
]


def duckdb_rows(sql: str, tables: dict[str, pa.Table]):
    con = duckdb.connect()
    for name, value in tables.items():
        con.register(name, value)
    return [tuple(row) for row in con.sql(sql).fetchall()]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_rows_in_source_order(table, sql, partitions, batch_size):
    if batch_size == 1 and "LIMIT" not in sql and "WHERE" not in sql:
        table = table.slice(0, 600)  # a batch per row: keep the test quick
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    session.register("t", table)
    result = session.sql(sql).to_arrow()
    assert [tuple(r.values()) for r in result.to_pylist()] == duckdb_rows(sql, {"t": table})


@pytest.mark.parametrize("partitions", [2, 3, 8])
def test_parquet_files_and_row_groups_in_order(table, tmp_path, partitions):
    for index, offset in enumerate(range(0, ROWS, 2_000)):
        pq.write_table(table.slice(offset, 2_000), tmp_path / f"part{index}.parquet",
                       row_group_size=300)
    session = ps.Session(target_partitions=partitions, batch_size=128)
    session.register_parquet("t", str(tmp_path / "*.parquet"))
    for sql in ("SELECT pos, s FROM t WHERE v <> 4", "SELECT pos FROM t LIMIT 3000"):
        result = [tuple(r.values()) for r in session.sql(sql).to_arrow().to_pylist()]
        expected = duckdb.sql(sql.replace("FROM t", f"FROM '{tmp_path}/*.parquet'")).fetchall()
        assert result == expected


def test_order_insensitive_consumers_do_not_pay(table):
    session = ps.Session(target_partitions=4)
    session.register("t", table)
    assert "preserve_order" in session.sql("SELECT k FROM t WHERE v = 1").explain()
    for sql in ("SELECT count(*) FROM t WHERE v = 1",
                "SELECT s, sum(k) FROM t GROUP BY s",
                "SELECT k FROM t ORDER BY k"):
        assert "preserve_order" not in session.sql(sql).explain(), sql


def test_partitions_ahead_wait_for_memory_and_release_it(table):
    """Under a tiny limit the partitions ahead of the reader hold a few batches each and
    wait; the result is still in order and the pool is empty afterwards."""
    session = ps.Session(target_partitions=4, batch_size=64, memory_limit=20_000)
    session.register("t", table)
    run = session.sql("SELECT pos, s FROM t").execute()
    assert run.result.column("pos").to_pylist() == list(range(ROWS))
    assert run.ctx.memory_pool.reserved == 0
