"""Files and tables from SQL, each checked against DuckDB: FROM 'glob', read_parquet,
read_csv (DuckDB's common options), read_ipc; CREATE [OR REPLACE] TABLE AS, CREATE VIEW,
DROP, INSERT INTO ... SELECT, COPY (query) TO; SHOW TABLES with the caller's DataFrames."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import feather

import plansight as ps


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("files")
    rng = np.random.default_rng(3)
    for index in range(3):
        k = np.arange(index * 1000, (index + 1) * 1000)
        v = pa.array(rng.integers(0, 50, 1000), mask=k % 11 == 0)
        pq.write_table(pa.table({"k": k, "v": v, "s": [f"s{x % 9}" for x in k]}),
                       folder / f"part{index}.parquet", row_group_size=250)
    (folder / "semi.csv").write_text(
        "# a comment line\nid;name;day;score\n1;ann;2024-01-02;1.5\n2;NA;2024-02-03;\n"
        "3;\"b;c\";;2.25\n4;dee;2024-04-05;NA\n")
    (folder / "plain.csv").write_text("a,b\n1,x\n2,\n3,z\n")
    feather.write_feather(pa.table({"a": [3, 1, 2], "t": ["c", "a", "b"]}),
                          folder / "t.arrow")
    return folder


def both(session_sql: list[str], duck_sql: list[str] | None = None, partitions: int = 3):
    """Run the statements on a plansight Session and on DuckDB; the last one's rows from each
    (lists of tuples, in the engines' order)."""
    session = ps.Session(target_partitions=partitions, batch_size=100)
    con = duckdb.connect()
    ours = theirs = None
    for sql in session_sql:
        ours = session.sql(sql).to_arrow()
    for sql in duck_sql or session_sql:
        theirs = con.sql(sql)
    return [tuple(r.values()) for r in ours.to_pylist()], theirs.fetchall()


def test_from_a_glob_reads_every_file_in_order_with_pruning(files):
    glob = f"{files}/*.parquet"
    for sql in (f"SELECT * FROM '{glob}'",
                f"SELECT k, s FROM '{glob}' WHERE v > 40",
                f"SELECT s, count(*), sum(v) FROM '{glob}' GROUP BY s ORDER BY s",
                f"SELECT * FROM read_parquet('{glob}') LIMIT 7 OFFSET 990",
                (f"SELECT count(*) FROM read_parquet(['{files}/part2.parquet', "
                 f"'{files}/part0.parquet'])")):
        ours, theirs = both([sql])
        assert ours == theirs, sql
    session = ps.Session(target_partitions=2)
    text = session.sql(f"SELECT k FROM '{glob}' WHERE k >= 2600").explain(analyze=True)
    assert "files=3" in text and int(re.search(r"units_pruned=(\d+)", text).group(1)) == 10


CSV_QUERIES = [
    "SELECT * FROM read_csv('{f}/plain.csv')",
    "SELECT * FROM read_csv_auto('{f}/plain.csv')",
    "SELECT * FROM '{f}/plain.csv'",
    "SELECT * FROM read_csv('{f}/semi.csv', delim = ';', skip = 1, nullstr = 'NA')",
    ("SELECT * FROM read_csv('{f}/semi.csv', sep = ';', skip = 1, header = true,"
     " columns = {{'id': 'INTEGER', 'name': 'VARCHAR', 'day': 'DATE', 'score': 'VARCHAR'}})"),
    ("SELECT name, day FROM read_csv('{f}/semi.csv', delim = ';', skip = 2, header = false, "
     "nullstr = 'NA', quote = '\"') WHERE column0 > 1"),
    "SELECT * FROM read_csv('{f}/plain.csv', all_varchar = true)",
]


@pytest.mark.parametrize("sql", CSV_QUERIES)
def test_read_csv_options_like_duckdb(files, sql):
    text = sql.format(f=files)
    duck = text.replace("WHERE column0", "WHERE column0") if "header = false" not in text \
        else text.replace("name, day", "column1, column2")
    ours, theirs = both([text.replace("name, day", "column1, column2")], [duck])
    assert ours == theirs


def test_read_ipc(files):
    ours, _ = both([f"SELECT t, a FROM read_ipc('{files}/t.arrow')"], ["SELECT 1"])
    assert ours == [("c", 3), ("a", 1), ("b", 2)]
    assert both([f"SELECT sum(a) FROM '{files}/t.arrow'"], ["SELECT 6"])[0] == [(6,)]


def test_create_insert_view_drop_like_duckdb(files):
    glob = f"{files}/*.parquet"
    script = [
        f"CREATE TABLE t AS SELECT k, v FROM '{glob}' WHERE k < 1500",
        "INSERT INTO t SELECT k + 10000, v FROM t WHERE v IS NULL",
        "INSERT INTO t (v, k) SELECT 7, 99999",
        "INSERT INTO t VALUES (100000, NULL)",
        "CREATE VIEW big AS SELECT k, v FROM t WHERE k > 1000",
        "CREATE TABLE IF NOT EXISTS t AS SELECT 1 AS nothing",
        "CREATE OR REPLACE TABLE u AS SELECT v, count(*) AS n FROM big GROUP BY v",
        "INSERT INTO t SELECT 5, n FROM u WHERE v = 7",
        "DROP TABLE IF EXISTS nowhere",
        "SELECT * FROM t",
    ]
    ours, theirs = both(script)
    assert ours == theirs
    for final in ("SELECT * FROM big", "SELECT v, n FROM u ORDER BY v NULLS FIRST"):
        ours, theirs = both(script[:-1] + [final])
        assert ours == theirs, final


def test_view_sees_tables_as_they_are_when_read():
    session = ps.Session(target_partitions=1)
    session.sql("CREATE TABLE t AS SELECT 1 AS x")
    session.sql("CREATE VIEW v AS SELECT x * 10 AS y FROM t")
    session.sql("INSERT INTO t SELECT 2")
    assert session.sql("SELECT * FROM v").to_arrow().column("y").to_pylist() == [10, 20]
    session.sql("CREATE OR REPLACE TABLE t AS SELECT 5 AS x")
    assert session.sql("SELECT * FROM v").to_arrow().column("y").to_pylist() == [50]
    session.sql("DROP VIEW v")
    assert session.tables() == ["t"]


def test_copy_to_parquet_and_csv_round_trip(files, tmp_path):
    glob = f"{files}/*.parquet"
    session = ps.Session(target_partitions=3)
    session.sql(f"COPY (SELECT k, s FROM '{glob}' WHERE v < 5) TO '{tmp_path}/out.parquet'")
    session.sql(f"COPY (SELECT k, s FROM '{glob}' WHERE v < 5) TO '{tmp_path}/out.csv' "
                "(FORMAT CSV, HEADER)")
    session.sql("CREATE TABLE small AS SELECT 1 AS a, 'x' AS b")
    session.sql(f"COPY small TO '{tmp_path}/small.parquet' (FORMAT PARQUET)")
    expected = duckdb.sql(f"SELECT k, s FROM '{glob}' WHERE v < 5").fetchall()
    assert duckdb.sql(f"SELECT * FROM '{tmp_path}/out.parquet'").fetchall() == expected
    assert duckdb.sql(f"SELECT * FROM '{tmp_path}/out.csv'").fetchall() == expected
    assert pq.read_table(tmp_path / "small.parquet").to_pylist() == [{"a": 1, "b": "x"}]


def test_statement_errors_are_plan_errors():
    session = ps.Session(target_partitions=1)
    session.sql("CREATE TABLE t AS SELECT 1 AS x")
    session.sql("CREATE VIEW v AS SELECT x FROM t")
    for sql, words in [("CREATE TABLE t AS SELECT 2", "already exists"),
                       ("DROP TABLE missing", "does not exist"),
                       ("DROP TABLE v", "is a view"),
                       ("INSERT INTO t SELECT 'not a number'", "cannot insert"),
                       ("INSERT INTO t SELECT 1, 2", "2 values per row for 1 columns"),
                       ("INSERT INTO v SELECT 1", "cannot insert into 'v'"),
                       ("CREATE VIEW w AS SELECT * FROM missing", "missing"),
                       ("SELECT * FROM 'no/such/*.parquet'", "no files found"),
                       ("SELECT * FROM read_csv('x.csv', bogus = 1)", "bogus")]:
        with pytest.raises(ps.PlansightError, match=words):
            session.sql(sql).to_arrow()
    assert session.sql("SELECT * FROM t").to_arrow().to_pylist() == [{"x": 1}]


MODULE_FRAME = pa.table({"a": [1]})  # a module-level table, as a notebook's variables are


def test_show_tables_lists_the_callers_module_tables_not_its_locals():
    local_frame = pa.table({"b": [2]})  # noqa: F841 -- a function's temporary: not listed
    session = ps.Session(target_partitions=1)
    session.sql("CREATE TABLE made AS SELECT 1 AS x")
    names = session.sql("SHOW TABLES").to_arrow().column("name").to_pylist()
    assert "MODULE_FRAME" in names and "made" in names and "local_frame" not in names


def test_call_dbgen_loads_tpch_like_duckdb(capsys):
    session = ps.Session(target_partitions=2)
    assert session.sql("CALL dbgen(sf = 0.001)").to_arrow().num_rows == 0
    assert {"lineitem", "orders", "region"} <= set(session.tables())
    assert session.sql("SELECT count(*) FROM region").to_arrow().column(0)[0].as_py() == 5
    assert "Falling back" not in capsys.readouterr().err  # sqlglot's warning stays quiet
    with pytest.raises(ps.NotSupportedError, match="CALL dbgen"):
        session.sql("CALL pragma_version()")
