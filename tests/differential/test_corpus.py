"""The query corpus (corpus.py) on plansight versus DuckDB.

Small-table queries run with batch_size 1 and 3 (every operator crosses batch boundaries) and
8192; some configurations use several partitions. Queries on ``big`` run with one large batch
and with 700-row batches on three partitions.
"""

from __future__ import annotations

import pytest

from plansight.errors import NotSupportedError
from tests.differential import corpus
from tests.differential.harness import check
from tests.differential.tables import ALL, SMALL

SMALL_CONFIGS = [
    pytest.param({"batch_size": 1, "target_partitions": 1}, id="b1"),
    pytest.param({"batch_size": 3, "target_partitions": 3}, id="b3p3"),
    pytest.param({"batch_size": 8192, "target_partitions": 2}, id="b8192p2"),
]
BIG_CONFIGS = [
    pytest.param({"batch_size": 8192, "target_partitions": 1}, id="b8192"),
    pytest.param({"batch_size": 700, "target_partitions": 3}, id="b700p3"),
    pytest.param({"batch_size": 1024, "target_partitions": 8}, id="b1024p8"),
]

# Valid SQL that plansight rejects with NotSupportedError (a known gap, named by the error).
NOT_SUPPORTED: set[str] = set()


def _cases(big: bool):
    for group, queries in corpus.GROUPS.items():
        if (group == "big") != big:
            continue
        for number, sql in enumerate(queries):
            marks = []
            if sql in NOT_SUPPORTED:
                marks.append(pytest.mark.xfail(raises=NotSupportedError, strict=True,
                                               reason="known gap"))
            yield pytest.param(sql, id=f"{group}-{number}", marks=marks)


@pytest.mark.parametrize("options", SMALL_CONFIGS)
@pytest.mark.parametrize("sql", list(_cases(big=False)))
def test_small(sql: str, options: dict) -> None:
    check(sql, SMALL, **options)


@pytest.mark.parametrize("options", BIG_CONFIGS)
@pytest.mark.parametrize("sql", list(_cases(big=True)))
def test_big(sql: str, options: dict) -> None:
    check(sql, ALL, **options)


@pytest.mark.parametrize("batch_size", [1, 8192])
@pytest.mark.parametrize("settings,sql", [pytest.param(s, q, id=f"settings-{i}")
                                          for i, (s, q) in enumerate(corpus.SETTINGS)])
def test_settings(settings: dict, sql: str, batch_size: int) -> None:
    check(sql, SMALL, batch_size=batch_size, target_partitions=1, **settings)


def test_set_statement_matches_duckdb() -> None:
    """``SET`` inside the SQL text (not only Session options) changes plansight the same
    way the same SET changes DuckDB."""
    import plansight as ps
    from tests.differential.harness import assert_same, run_duckdb

    session = ps.Session(target_partitions=1)
    session.register("t", SMALL["t"])
    actual = session.sql("SET default_null_order = 'nulls_first'; "
                         "SELECT id, v FROM t ORDER BY v, id").to_arrow()
    expected = run_duckdb("SELECT id, v FROM t ORDER BY v, id", {"t": SMALL["t"]},
                          default_null_order="nulls_first")
    assert_same(actual, expected, ordered=True, sql="SELECT id, v FROM t ORDER BY v, id")
    actual = session.sql("SET integer_division = true; SELECT 7 / 2 AS x").to_arrow()
    assert actual.column(0).to_pylist() == [3]
    # the setting persists in the session
    assert session.sql("SELECT id, v FROM t ORDER BY v, id LIMIT 1").to_arrow() \
        .column(1).to_pylist() == [None]
