"""The same tables read from Parquet (small row groups, so min/max pruning decides), Arrow
IPC and CSV files, queried with plansight and compared with DuckDB over the in-memory tables.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from pyarrow import feather

import plansight as ps
from tests.differential.harness import assert_same, has_top_level_order_by, run_duckdb
from tests.differential.tables import ALL, BIG, SMALL

PRUNING = [
    "SELECT id, x FROM big WHERE id < 700",
    "SELECT id FROM big WHERE id >= 4321",
    "SELECT id FROM big WHERE id = 2500",
    "SELECT id FROM big WHERE 4990 < id",
    "SELECT count(*) FROM big WHERE id > 100000",
    "SELECT count(*) FROM big WHERE dt <= DATE '2020-02-01'",
    "SELECT count(*) FROM big WHERE dt > DATE '2024-01-01'",
    "SELECT count(*), sum(y) FROM big WHERE h = 'θ'",
    "SELECT count(*) FROM big WHERE x > 250",
    "SELECT count(*) FROM big WHERE g IS NULL",
    "SELECT id, y FROM big WHERE y BETWEEN 990 AND 1000 ORDER BY id",
    "SELECT g, count(*) FROM big WHERE id BETWEEN 1000 AND 1999 GROUP BY g",
    "SELECT id FROM t WHERE dec > 50",
    "SELECT id FROM t WHERE d = DATE '2023-12-31'",
    "SELECT id FROM t WHERE ts < TIMESTAMP '2000-01-01 00:00:00'",
    "SELECT id FROM t WHERE s = '中文'",
    "SELECT id FROM t WHERE big > 4611686018427387000",
    "SELECT id FROM fl WHERE x > 1e300",
    "SELECT id FROM fl WHERE x = 'NaN'::DOUBLE",
    "SELECT id FROM fl WHERE x >= 'Infinity'::DOUBLE",
    "SELECT t.id, u.uid FROM t JOIN u ON t.k = u.k WHERE t.id > 10",
    "SELECT * FROM t_empty WHERE id = 1",
    # top-k and join bounds found while running (dynamic filters) must keep NaN and NULL rows
    "SELECT id, x FROM big ORDER BY x DESC NULLS LAST, id LIMIT 5",
    "SELECT id, x FROM big ORDER BY x NULLS FIRST, id LIMIT 5",
    "SELECT big.id, big2.label FROM big JOIN big2 ON big.id = big2.weight",
    "SELECT id, x FROM fl ORDER BY x DESC NULLS LAST, id LIMIT 2",
    "SELECT a.id, b.id FROM fl a JOIN (SELECT * FROM fl WHERE id > 6) b ON a.x = b.x",
]


def _write(tmp, name: str, table: pa.Table, kind: str) -> str:
    if kind == "parquet":
        path = str(tmp / f"{name}.parquet")
        pq.write_table(table, path, row_group_size=300 if table.num_rows > 1000 else 4)
    else:
        path = str(tmp / f"{name}.arrow")
        feather.write_feather(table, path, chunksize=500 if table.num_rows > 1000 else 4)
    return path


@pytest.fixture(scope="module", params=["parquet", "ipc"])
def file_session(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    paths = {name: _write(tmp, name, table, request.param) for name, table in ALL.items()}

    def make(**options) -> ps.Session:
        session = ps.Session(**options)
        for name, path in paths.items():
            if request.param == "parquet":
                session.register_parquet(name, path)
            else:
                session.register_ipc(name, path)
        return session
    return make


@pytest.mark.parametrize("options", [
    pytest.param({"batch_size": 8192, "target_partitions": 1}, id="b8192"),
    pytest.param({"batch_size": 97, "target_partitions": 3}, id="b97p3"),
])
@pytest.mark.parametrize("sql", PRUNING)
def test_file_tables(file_session, sql, options):
    actual = file_session(**options).sql(sql).to_arrow()
    expected = run_duckdb(sql, ALL)
    assert_same(actual, expected, ordered=has_top_level_order_by(sql), sql=sql)


def test_parquet_pruning_skips_row_groups(tmp_path):
    path = str(tmp_path / "big.parquet")
    pq.write_table(BIG["big"], path, row_group_size=500)
    session = ps.Session(target_partitions=1)
    session.register_parquet("big", path)
    run = session.sql("SELECT count(*) FROM big WHERE id >= 4500").execute()
    assert run.result.column(0).to_pylist() == [500]
    assert "units_pruned=9/10" in run.explain_analyze()


CSV_QUERIES = [
    "SELECT * FROM c",
    "SELECT k, count(*), sum(v), min(s), max(d) FROM c GROUP BY k",
    "SELECT id, s FROM c WHERE s LIKE '%a%' OR s IS NULL ORDER BY id",
    "SELECT id, f * 2 FROM c WHERE f > 1",
]


@pytest.mark.parametrize("sql", CSV_QUERIES)
def test_csv_tables(tmp_path, sql):
    table = SMALL["t"].select(["id", "k", "v", "f", "s", "d"])
    path = str(tmp_path / "c.csv")
    pacsv.write_csv(table, path)
    session = ps.Session(target_partitions=2, batch_size=5)
    session.register_csv("c", path)
    actual = session.sql(sql).to_arrow()
    # what the CSV reader infers (NULL strings read back as empty) is what DuckDB reads too
    expected = run_duckdb(sql.replace("FROM c", f"FROM read_csv('{path}')"), {})
    assert_same(actual, expected, ordered=has_top_level_order_by(sql), sql=sql)


@pytest.mark.parametrize("partitions,batch_size", [(1, 8192), (2, 7), (3, 1)])
def test_parquet_small_dictionaries_read_as_indices_match_duckdb(tmp_path, partitions,
                                                                 batch_size):
    """Flag-like string columns (small dictionaries, NULLs among them) are read as indices
    and decoded; unique strings (a dictionary as large as the data) are read as values."""
    n = 600
    flags = [None if i % 17 == 0 else "ABC"[i % 3] * (1 + i % 2) for i in range(n)]
    table = pa.table({"id": list(range(n)), "flag": flags,
                      "note": [f"note number {i} " * 3 for i in range(n)]})
    path = str(tmp_path / "d.parquet")
    pq.write_table(table, path, row_group_size=200)
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    session.register_parquet("d", path)
    assert session._tables["d"]._small_dictionaries(path) == {"flag"}
    for sql in ["SELECT flag, count(*), min(note), max(id) FROM d GROUP BY flag",
                "SELECT id, flag, note FROM d WHERE flag = 'A' OR flag IS NULL",
                "SELECT flag FROM d"]:
        assert_same(session.sql(sql).to_arrow(), run_duckdb(sql, {"d": table}), ordered=False,
                    sql=sql)
