"""Limit pruning: ``WHERE pred LIMIT n`` reads no row group after those whose statistics prove
that n rows pass (DataFusion's "limit pruning", cut so the rows stay the first in source order,
DuckDB's rows)."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps

ROWS, GROUP = 100_000, 1_000


@pytest.fixture(scope="module")
def many_groups(tmp_path_factory):
    """100 row groups of 1,000 rows, sorted on k, s and d; ``half_null`` has NULLs in the
    first 50 row groups only; ``r`` is random (every row group spans its whole range); ``g``
    and ``gd`` are constant within each row group (0..4 and 2001-01-01..05, cycling)."""
    i = np.arange(ROWS)
    table = pa.table({
        "k": i,
        "s": pa.array([f"s{x:06d}" for x in i]),
        "d": pa.array(np.datetime64("2001-01-01") + (i // 100).astype("timedelta64[D]")),
        "half_null": pa.array(i % 7, mask=(i < ROWS // 2) & (i % 100 == 0)),
        "f": (i * 0.5).astype(np.float64),
        "r": np.random.default_rng(5).integers(0, 1000, ROWS),
        "g": (i // GROUP) % 5,  # constant within each row group
        "gd": pa.array(np.datetime64("2001-01-01") + ((i // GROUP) % 5).astype("timedelta64[D]")),
    })
    path = tmp_path_factory.mktemp("limit_pruning") / "groups.parquet"
    pq.write_table(table, path, row_group_size=GROUP)
    return str(path)


def _metric(text: str, name: str) -> int:
    return sum(int(x) for x in re.findall(rf"\b{name}=(\d+)", text))


def _run(path: str, sql: str, partitions: int):
    session = ps.Session(target_partitions=partitions)
    session.register_parquet("t", path)
    run = session.sql(sql).execute()
    return run, run.explain_analyze()


def _assert_valid_limit(path: str, sql: str, result: pa.Table):
    """A LIMIT without ORDER BY: DuckDB's rows in DuckDB's order (the first passing rows in
    source order)."""
    con = duckdb.connect()
    expected = con.sql(sql.replace("FROM t", f"FROM read_parquet('{path}')")).fetchall()
    assert [tuple(r.values()) for r in result.to_pylist()] == expected


FULLY_MATCHING = [
    # (query, row groups that must be read)
    ("SELECT k, r FROM t WHERE k >= 20500 LIMIT 1500", 3),  # group 20 is partial: read first
    ("SELECT k FROM t WHERE k > 20500 AND k < 90000 LIMIT 10 OFFSET 2990", 4),
    ("SELECT s, k + 1 AS k1 FROM t WHERE s >= 's050000' LIMIT 2000", 2),
    ("SELECT d, k FROM t WHERE d > DATE '2001-03-01' AND d <= DATE '2003-01-01' LIMIT 5", 1),
    # the first 50 groups hold NULLs: not proven, but read first (the LIMIT's rows are in them)
    ("SELECT half_null, k FROM t WHERE half_null >= 0 LIMIT 100", None),
    ("SELECT * FROM (SELECT k, r FROM t WHERE k < 50000) WHERE k >= 1000 LIMIT 1000", 1),
    ("SELECT g, k FROM t WHERE g = 3 LIMIT 1500", 2),  # equality: min = max = 3
    ("SELECT gd, k FROM t WHERE gd = DATE '2001-01-04' AND k > 5000 LIMIT 1500", 2),
]


@pytest.mark.parametrize("partitions", [1, 2, 3])
@pytest.mark.parametrize("sql,groups", FULLY_MATCHING)
def test_fully_matching_row_groups_cover_the_limit(many_groups, sql, groups, partitions):
    run, text = _run(many_groups, sql, partitions)
    if groups is not None:
        assert _metric(text, "units_read") <= groups  # one partition stops when it is done
        assert _metric(text, "rows_read") <= groups * GROUP
    assert _metric(text, "units_pruned_limit") > 0
    _assert_valid_limit(many_groups, sql, run.result)
    if "half_null" in sql:  # row groups with NULLs are never proven to match fully
        assert run.result.column(0).null_count == 0
        assert _metric(text, "units_pruned_limit") == 49


NOT_PRUNED = [
    # not enough fully matching rows: partial row groups must be read too
    "SELECT k FROM t WHERE k >= 99500 LIMIT 1000",
    # a conjunct statistics cannot decide: a fully matching k range proves nothing
    "SELECT k, r FROM t WHERE k >= 1000 AND r % 2 = 0 LIMIT 10",
    "SELECT k FROM t WHERE k >= 1000 OR r = 5 LIMIT 10",
    # a float column's statistics leave NaN out
    "SELECT f FROM t WHERE f > 100 LIMIT 10",
    # ORDER BY: the limit is a top-k, not any n rows
    "SELECT k FROM t WHERE k >= 500 ORDER BY r, k LIMIT 10",
    # the limit is above an aggregate
    "SELECT r, count(*) FROM t WHERE k >= 500 GROUP BY r LIMIT 10",
]


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("sql", NOT_PRUNED)
def test_no_limit_pruning_when_statistics_cannot_prove_enough_rows(many_groups, sql,
                                                                   partitions):
    run, text = _run(many_groups, sql, partitions)
    assert "units_pruned_by_limit" not in text and "units_pruned_limit" not in text
    if "ORDER BY" in sql:
        expected = duckdb.sql(sql.replace("FROM t", f"FROM read_parquet('{many_groups}')"))
        assert [tuple(r.values()) for r in run.result.to_pylist()] == expected.fetchall()
    elif "GROUP BY" not in sql:
        _assert_valid_limit(many_groups, sql, run.result)


def test_explain_shows_the_row_groups_pruned_by_the_limit(many_groups):
    session = ps.Session(target_partitions=2)
    session.register_parquet("t", many_groups)
    text = session.sql("SELECT k FROM t WHERE k >= 20500 LIMIT 1500").explain()
    # 20 groups below 20500 by min/max, a partial and 2 fully matching groups read, 77 pruned
    # by the limit
    assert "units_pruned=20/100, units_pruned_by_limit=77/100" in text
    # three units, two partitions: the requirements see the pruned scan
    assert "CoalescePartitionsExec" in text and "partitions=2" in text


def test_a_limit_over_a_memory_table_is_unchanged():
    session = ps.Session(target_partitions=2)
    session.register("m", pa.table({"k": np.arange(10_000)}))
    text = session.sql("SELECT k FROM m WHERE k > 10 LIMIT 5").explain()
    assert "units_pruned_by_limit" not in text
    assert session.sql("SELECT k FROM m WHERE k > 10 LIMIT 5").to_arrow().num_rows == 5
