"""Named windows inherit along a chain (WINDOW base AS (...), w AS (base)), as in DuckDB."""

from __future__ import annotations

import pytest

import plansight as ps
from plansight.errors import PlanError
from tests.differential.harness import check
from tests.windows.window_cases import TABLES

QUERIES = [
    "SELECT id, count(*) OVER w AS c FROM t "
    "WINDOW base AS (PARTITION BY p ORDER BY o), w AS (base)",
    "SELECT id, sum(v) OVER w AS s FROM t "
    "WINDOW a AS (PARTITION BY p), b AS (a ORDER BY o, id), w AS (b)",
    "SELECT id, sum(v) OVER (w ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM t "
    "WINDOW base AS (PARTITION BY p ORDER BY o, id), w AS (base)",
    "SELECT id, rank() OVER w + dense_rank() OVER w AS r FROM t "
    "WINDOW base AS (PARTITION BY p ORDER BY o), w AS (base ROWS 2 PRECEDING)",
]


@pytest.mark.parametrize("batch_size", [1, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_named_window_chains_match_duckdb(sql, partitions, batch_size):
    check(sql, {"t": TABLES["mixed"]}, target_partitions=partitions, batch_size=batch_size)


def test_a_window_defined_in_terms_of_itself_is_an_error():
    s = ps.Session(target_partitions=1)
    s.register("t", TABLES["mixed"])
    with pytest.raises(PlanError, match="in terms of itself"):
        s.sql("SELECT count(*) OVER a FROM t WINDOW a AS (b), b AS (a)")
