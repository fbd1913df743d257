"""``:name`` parameters bind values as typed literals anywhere an expression may stand,
including first in the SELECT list (where DuckDB's dialect reads ``name: expr`` as an alias);
an unbound one is a PlanError with a caret under it. DuckDB (``$name``) is the oracle."""

from __future__ import annotations

import datetime

import duckdb
import pyarrow as pa
import pytest

import plansight as ps
from plansight.errors import PlanError

TABLE = pa.table({"a": [1, 2, 3, None], "s": ["x", "o'b", None, "z"]})
# DuckDB's DB-API result warns that Arrow output copies; irrelevant for an oracle
pytestmark = pytest.mark.filterwarnings("ignore:Arrow output:UserWarning")

PARAMS = {"x": 2, "y": "o'b", "f": 1.5, "d": datetime.date(2024, 2, 29), "n": None, "t": True}


@pytest.fixture(scope="module")
def session():
    s = ps.Session(target_partitions=2, batch_size=3)
    s.register("t", TABLE)
    return s


@pytest.mark.parametrize("sql", [
    "SELECT :x AS v",
    "SELECT :x + 1 AS v, :y AS b",
    "SELECT DISTINCT :y AS v FROM t",
    "SELECT :f * a AS v FROM t ORDER BY a NULLS LAST",
    "SELECT a FROM t WHERE a = :x",
    "SELECT a FROM t WHERE s = :y OR a > :x ORDER BY a",
    "SELECT :d + 1 AS v, :t AS w, :n AS u",
    "SELECT a, CASE WHEN a = :x THEN :y ELSE s END AS v FROM t ORDER BY a NULLS FIRST",
    "WITH c AS (SELECT :x AS v) SELECT v FROM c UNION ALL SELECT :x + 10 ORDER BY v",
    "SELECT (SELECT :x) AS v",
])
def test_parameters_match_duckdb(session, sql):
    got = session.sql(sql, params=PARAMS).to_arrow()
    con = duckdb.connect()
    con.register("t", TABLE)
    used = {k: v for k, v in PARAMS.items() if f":{k}" in sql}
    expected = con.execute(sql.replace(":", "$"), used).to_arrow_table()
    assert got.to_pylist() == expected.to_pylist()
    assert [f.type for f in got.schema] == [f.type for f in expected.schema]


def test_first_select_item_is_a_parameter_not_a_prefix_alias(session):
    result = session.sql("SELECT :x, :x + 1, :y AS b", params={"x": 41, "y": "b"}).to_arrow()
    assert list(result.to_pylist()[0].values()) == [41, 42, "b"]
    assert result.column_names[2] == "b"
    # DuckDB's prefix alias still works, also with a parameter as the value
    assert session.sql("SELECT foo: :x", params={"x": 7}).to_arrow().to_pylist() == \
        [{"foo": 7}]


def test_quotes_in_a_string_parameter_are_data(session):
    sql = "SELECT count(*) AS n FROM t WHERE s = :y"
    assert session.sql(sql, params={"y": "o'b"}).to_arrow().to_pylist() == [{"n": 1}]
    assert session.sql(sql, params={"y": "x' OR 'a'='a"}).to_arrow().to_pylist() == [{"n": 0}]


@pytest.mark.parametrize("sql, column", [
    ("SELECT :nope", 8),
    ("SELECT :x + 1, :nope AS b", 16),
    ("SELECT a FROM t\nWHERE a = :nope", 11),
])
def test_unbound_parameter_has_a_caret(session, sql, column):
    with pytest.raises(PlanError) as info:
        session.sql(sql, params={"x": 1})
    message = str(info.value)
    assert "parameter :nope has no value" in message and "parameters: x" in message
    line, caret = message.splitlines()[-2:]
    assert caret.index("^") == line.index(":nope") == column + 1  # two spaces of indent
    assert session.sql("SELECT :x AS v", params={"x": 1}).to_arrow().to_pylist() == [{"v": 1}]


def test_unusable_parameter_value_is_a_plan_error(session):
    with pytest.raises(PlanError, match="parameter :x has a value of type object"):
        session.sql("SELECT :x", params={"x": object()})


@pytest.mark.parametrize("value", [7, -(2**31), 2**31, -(2**63), 2**70])
def test_integer_parameters_are_typed_like_duckdb(session, value):
    got = session.sql("SELECT :v AS v", params={"v": value}).to_arrow()
    expected = duckdb.execute("SELECT $v AS v", {"v": value}).to_arrow_table()
    assert got.schema == expected.schema and got.to_pylist() == expected.to_pylist()
