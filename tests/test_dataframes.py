"""Any DataFrame a user holds is queryable: pandas object columns of mixed types read as
VARCHAR (as DuckDB reads them), only the columns a query uses are converted, and a column that
cannot be converted is a PlanError naming it. ``Session().sql`` finds DataFrames in the
caller's scope (a replacement scan)."""

from __future__ import annotations

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.catalog import DataFrameSource


def mixed_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "m": ["x", 1, None, 2.5],  # str, int, NULL, float
        "b": [True, "no", 3, None],
        "a": [1, 2, 3, 4],
        "c": pd.Categorical(["u", "v", "u", None]),
        "d": pd.array([1, None, 3, 4], dtype="Int64"),
        "n": [None, None, None, None],
        "f": [1, 2.5, None, 3],
        "big": [2**70, 1, 2, 3],  # no Arrow integer holds it
    })


def test_mixed_object_columns_read_as_varchar_like_duckdb():
    df = mixed_frame()
    session = ps.Session(target_partitions=2)
    session.register("df", df)
    sql = "SELECT m, b, a, c, d, f FROM df"
    ours = session.sql(sql).to_arrow()
    assert ours.schema.field("m").type == pa.string() and ours.schema.field("b").type == pa.string()
    expected = duckdb.sql("SELECT m, b, a, c, d, f FROM (SELECT * EXCLUDE (big, n) FROM df)"
                          ).fetchall()
    assert [tuple(r.values()) for r in ours.to_pylist()] == expected
    assert [tuple(r.values()) for r in session.sql(
        "SELECT m, count(*) AS k FROM df WHERE m IS NOT NULL GROUP BY m ORDER BY m"
    ).to_arrow().to_pylist()] == [("1", 1), ("2.5", 1), ("x", 1)]


def test_only_the_columns_a_query_uses_are_converted():
    df = mixed_frame()
    source = DataFrameSource(df, "df")
    session = ps.Session(target_partitions=1)
    session.register("df", source)
    assert session.sql("SELECT sum(a) AS s FROM df").to_arrow().to_pylist() == [{"s": 10}]
    assert set(source._columns) == {"a"}
    assert session.sql("SELECT count(*) AS n FROM df WHERE n IS NULL").to_arrow(
    ).to_pylist() == [{"n": 4}]


def test_a_column_that_cannot_be_converted_is_a_plan_error_naming_it():
    session = ps.Session(target_partitions=2)
    session.register("df", mixed_frame())
    with pytest.raises(ps.PlanError, match=r"column 'big' of DataFrame 'df'"):
        session.sql("SELECT big FROM df").to_arrow()
    assert session.sql("SELECT a FROM df LIMIT 1").to_arrow().num_rows == 1  # still usable


def test_replacement_scan_finds_the_callers_dataframe():
    frame_in_scope = pd.DataFrame(  # noqa: F841 -- found by name in the SQL
        {"k": ["a", "b", "a"], "v": [1, 2, 3], "m": ["x", 1, 2.5]})
    session = ps.Session(target_partitions=2)
    result = session.sql("SELECT k, sum(v) AS s FROM frame_in_scope GROUP BY k ORDER BY k")
    assert result.to_arrow().to_pylist() == [{"k": "a", "s": 4}, {"k": "b", "s": 2}]
    assert "frame_in_scope" not in session.tables()  # visible to that query only
    session.register("frame_in_scope", pa.table({"k": ["z"], "v": [9], "m": ["q"]}))
    assert session.sql("SELECT k FROM frame_in_scope").to_arrow().to_pylist() == [{"k": "z"}]


def test_replacement_scan_in_a_nested_function_and_unknown_names():
    def inner():
        local_table = pa.table({"x": [1, 2, 3]})  # noqa: F841 -- found by name in the SQL
        return ps.Session(target_partitions=1).sql("SELECT max(x) AS m FROM local_table")

    assert inner().to_arrow().to_pylist() == [{"m": 3}]
    not_a_table = [1, 2, 3]  # noqa: F841 -- a variable that is not a table is not a table
    with pytest.raises(ps.PlanError, match="not_a_table"):
        ps.Session().sql("SELECT * FROM not_a_table")
