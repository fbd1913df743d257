"""The 22 TPC-H query texts: they run on DuckDB over the generated tables and tpchgen's."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from plansight.datasets import TPCH_QUERIES, TPCH_TABLES, load_sample, tpch, tpch_parquet
from plansight.errors import PlansightError

duckdb = pytest.importorskip("duckdb")


def _connect(tables: dict[str, pa.Table]):
    connection = duckdb.connect()
    for name, table in tables.items():
        connection.register(name, table)
    return connection


@pytest.fixture(scope="module")
def generated_sf001():
    return _connect(tpch(0.01))


@pytest.fixture(scope="module")
def generated_sf01():
    return _connect(tpch(0.1))


def test_the_22_queries_are_there():
    assert sorted(TPCH_QUERIES) == list(range(1, 23))
    for number, text in TPCH_QUERIES.items():
        assert text.startswith(f"-- TPC-H Q{number}:")
        assert ";" not in text
    # Validation parameters of the specification.
    assert "interval '90' day" in TPCH_QUERIES[1]
    assert "'Brand#23'" in TPCH_QUERIES[17] and "'MED BOX'" in TPCH_QUERIES[17]
    assert "'SAUDI ARABIA'" in TPCH_QUERIES[21]
    assert re.search(r"with revenue0 as", TPCH_QUERIES[15])


@pytest.mark.parametrize("number", range(1, 23))
def test_query_runs_on_generated_sf001(generated_sf001, number):
    generated_sf001.sql(TPCH_QUERIES[number]).to_arrow_table()


@pytest.mark.parametrize("number", range(1, 23))
def test_query_answer_not_empty_on_generated_sf01(generated_sf01, number):
    # At SF 0.01 Q18 (orders over 300 units) expects about 1.5 rows and may be empty, as it
    # may on dbgen data; SF 0.1 makes every answer reliably non-empty.
    assert generated_sf01.sql(TPCH_QUERIES[number]).to_arrow_table().num_rows > 0


def test_answers_match_shape_of_tpchgen(tmp_path_factory, generated_sf001):
    """Same queries over tpchgen-cli Parquet: they run, and give the same columns."""
    try:
        directory = tpch_parquet(tmp_path_factory.mktemp("tpchgen"), 0.01)
    except PlansightError as error:
        pytest.skip(str(error))
    connection = duckdb.connect()
    for table in TPCH_TABLES:
        connection.sql(
            f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{directory / table}.parquet')")
    for number, text in TPCH_QUERIES.items():
        official = connection.sql(text).to_arrow_table()
        ours = generated_sf001.sql(text).to_arrow_table()
        assert official.num_rows > 0, number
        assert official.column_names == ours.column_names, number


def test_tpch_parquet_is_cached(tmp_path):
    try:
        first = tpch_parquet(tmp_path, 0.001)
    except PlansightError as error:
        pytest.skip(str(error))
    stamps = {p.name: p.stat().st_mtime_ns for p in first.iterdir()}
    assert sorted(stamps) == sorted(f"{t}.parquet" for t in TPCH_TABLES)
    assert tpch_parquet(tmp_path, 0.001) == first
    assert {p.name: p.stat().st_mtime_ns for p in first.iterdir()} == stamps


class _Recorder:
    def __init__(self) -> None:
        self.registered: dict[str, pa.Table] = {}

    def register(self, name: str, table: pa.Table) -> None:
        self.registered[name] = table


def test_load_sample_registers_every_table():
    session = _Recorder()
    tables = load_sample(session, "tpch", scale=0.001)
    assert list(session.registered) == list(TPCH_TABLES)
    assert all(session.registered[name] is tables[name] for name in TPCH_TABLES)
    session = _Recorder()
    load_sample(session, "large_2m", scale=0.001)
    assert list(session.registered) == ["t"]
    with pytest.raises(PlansightError, match="tpch"):
        load_sample(session, "tpcds")
