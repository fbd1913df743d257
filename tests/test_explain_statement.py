"""EXPLAIN [ANALYZE] written in SQL (sqlglot keeps EXPLAIN as an opaque command; our dialect
parses it) returns the plan as a one-column table, with a caret on errors inside it; DESCRIBE
and SHOW TABLES return what DuckDB returns."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import plansight as ps
from tests.differential.harness import check
from tests.differential.tables import SMALL


def _without_ids(text: str) -> str:
    return re.sub(r"\[\d+\]", "[]", text)


@pytest.fixture
def session():
    s = ps.Session(target_partitions=2)
    s.register("t", pa.table({"k": [1, 2, 2, None], "v": [1.0, 2.0, 3.0, 4.0]}))
    return s


@pytest.mark.parametrize("sql", [
    "EXPLAIN SELECT count(*) FROM t",
    "explain select * from (select distinct k from t) b",
    "EXPLAIN SELECT k, sum(a.v) FROM t a JOIN t b USING (k) GROUP BY k",
    "EXPLAIN WITH x AS (SELECT k FROM t) SELECT * FROM x ORDER BY k LIMIT 1",
])
def test_explain_returns_the_physical_plan_without_running(session, sql):
    query = session.sql(sql)
    plan = query.to_arrow()
    assert plan.column_names == ["plan"]
    # the same plan as Query.explain() of the query, up to operator ids
    assert _without_ids(plan.column("plan")[0].as_py()) == _without_ids(query.explain())
    assert "DataSourceExec: table=t" in plan.column("plan")[0].as_py()
    assert "metrics=" not in plan.column("plan")[0].as_py()


def test_explain_analyze_runs_and_shows_metrics(session):
    text = session.sql("EXPLAIN ANALYZE SELECT k, count(*) FROM t GROUP BY k").to_arrow() \
        .column("plan")[0].as_py()
    assert "AggregateExec" in text and "output_rows=3" in text


def test_explain_after_set_in_one_text(session):
    text = session.sql("SET threads = 1; EXPLAIN SELECT k FROM t ORDER BY k").to_arrow() \
        .column("plan")[0].as_py()
    assert text.startswith("SortExec") and "partitions=" not in text


def test_errors_inside_explain_point_at_the_token(session):
    with pytest.raises(ps.PlanError) as error:
        session.sql("EXPLAIN SELECT nope FROM t")
    assert "column 16" in str(error.value) and "^" in str(error.value)


@pytest.mark.parametrize("sql", [
    "DESCRIBE t", "DESCRIBE fl", "DESCRIBE t_empty",
    "DESCRIBE SELECT k + 1 AS k1, s, max(v) AS top, avg(v) AS mean FROM t GROUP BY ALL",
    "DESCRIBE SELECT * FROM t JOIN u USING (k)",
    "SHOW TABLES",
])
def test_describe_and_show_tables_match_duckdb(sql):
    check(sql, SMALL)  # column names and DuckDB type spellings of every adversarial type


def test_describe_of_an_unknown_table_names_it(session):
    with pytest.raises(ps.PlanError, match="'nope' does not exist"):
        session.sql("DESCRIBE nope")


def test_show_tables_of_an_empty_session_is_empty():
    result = ps.Session().sql("SHOW TABLES").to_arrow()
    assert result.column_names == ["name"] and result.num_rows == 0
