"""INTERVAL ORDER BY keys and 'inf' RANGE offsets over floating keys, checked against DuckDB.

INTERVAL keys order and group into peers by the normalized value (a month = 30 days), so
1 month, 30 days and 720 hours are peers. 'inf' offsets reach every key; where DuckDB raises
(+inf - inf), the frame reaches -inf, as PostgreSQL defines it.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

import plansight as ps
from plansight.errors import PlanError
from tests.differential.harness import check


def _intervals() -> pa.Table:
    rows = [(0, 1, "INTERVAL 1 MONTH"), (1, 1, "INTERVAL 30 DAY"), (2, 1, "INTERVAL 1 DAY"),
            (3, 2, "INTERVAL 36 HOUR"), (4, 2, "NULL"), (5, 1, "INTERVAL '1 month 1 day'"),
            (6, 2, "INTERVAL 2 DAY"), (7, 1, "INTERVAL 1 YEAR"), (8, 1, "INTERVAL 720 HOUR"),
            (9, 2, "- INTERVAL 1 DAY"), (10, "NULL", "NULL"), (11, 2, "INTERVAL 36 HOUR"),
            (12, 1, "INTERVAL 1 SECOND"), (13, "NULL", "INTERVAL 1 DAY")]
    values = ", ".join(f"({i}, {p}, {v}, {i % 4})" for i, p, v in rows)
    con = duckdb.connect()
    try:
        return con.sql(f"SELECT * FROM (VALUES {values}) v(id, p, i, x)").to_arrow_table()
    finally:
        con.close()


INTERVALS = _intervals()
FLOATS = pa.table({
    "id": list(range(11)), "p": [1, 1, 1, 2, 2, 2, None, 1, 1, 2, 2],
    "f": [1.5, float("inf"), float("-inf"), 2.0, None, float("nan"), 3.0, 1.5, -7.25,
          float("inf"), 2.0],
    "v": list(range(1, 12))})

INTERVAL_QUERIES = [
    "SELECT id, rank() OVER (ORDER BY i) AS r, dense_rank() OVER (PARTITION BY p ORDER BY i "
    "DESC NULLS FIRST) AS d, sum(x) OVER (ORDER BY i) AS s FROM t",
    "SELECT id, count(*) OVER (PARTITION BY p ORDER BY i GROUPS BETWEEN 1 PRECEDING AND "
    "CURRENT ROW) AS c, percent_rank() OVER (ORDER BY i DESC) AS pr FROM t",
    "SELECT id, lag(i) OVER (ORDER BY i, id) AS l, first_value(id) OVER (ORDER BY i NULLS "
    "FIRST, id ROWS 1 PRECEDING) AS f, max(x) OVER (ORDER BY i, id ROWS 2 PRECEDING) AS m "
    "FROM t",
    "SELECT id, sum(x) OVER (ORDER BY i RANGE BETWEEN INTERVAL 1 DAY PRECEDING AND "
    "INTERVAL 1 MONTH FOLLOWING) AS s, count(*) OVER (PARTITION BY p ORDER BY i DESC RANGE "
    "BETWEEN CURRENT ROW AND INTERVAL 12 HOUR FOLLOWING) AS c FROM t",
    "SELECT id, row_number() OVER (PARTITION BY i ORDER BY id) AS n FROM t",
]

FLOAT_QUERIES = [
    "SELECT id, sum(v) OVER (PARTITION BY p ORDER BY f RANGE BETWEEN CURRENT ROW AND 'inf' "
    "FOLLOWING) AS s FROM t",
    "SELECT id, sum(v) OVER (ORDER BY f DESC RANGE BETWEEN 'inf' PRECEDING AND CURRENT ROW) "
    "AS s FROM t",
    "SELECT id, sum(v) OVER (ORDER BY f RANGE BETWEEN 1 PRECEDING AND 'infinity'::double "
    "FOLLOWING) AS s FROM t",
    "SELECT id, sum(v) OVER (PARTITION BY p ORDER BY f DESC RANGE BETWEEN 'inf' PRECEDING "
    "AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS s FROM t",
    "SELECT id, count(*) OVER (ORDER BY f DESC NULLS FIRST RANGE BETWEEN 'inf' PRECEDING AND "
    "0.5 PRECEDING) AS c FROM t",
]

RUNS = [(1, 8192), (2, 3), (3, 7), (8, 1)]  # (partitions, batch size)


@pytest.mark.parametrize(("partitions", "batch_size"), RUNS)
@pytest.mark.parametrize("sql", INTERVAL_QUERIES)
def test_interval_order_keys_match_duckdb(sql, partitions, batch_size):
    check(sql, {"t": INTERVALS}, target_partitions=partitions, batch_size=batch_size)


@pytest.mark.parametrize("float_type", [pa.float64(), pa.float32()])
@pytest.mark.parametrize(("partitions", "batch_size"), RUNS)
@pytest.mark.parametrize("sql", FLOAT_QUERIES)
def test_infinite_range_offsets_match_duckdb(sql, partitions, batch_size, float_type):
    table = FLOATS.set_column(2, "f", FLOATS["f"].cast(float_type))
    check(sql, {"t": table}, target_partitions=partitions, batch_size=batch_size)


def _run(sql: str, table: pa.Table) -> list:
    session = ps.Session(target_partitions=2, batch_size=3)
    session.register("t", table)
    return session.sql(sql).to_arrow().column("c").to_pylist()


def test_inf_preceding_plus_inf_reaches_every_key():
    # DuckDB raises for +inf - inf; here +inf is infinitely preceded by every non-NaN key
    counts = _run("SELECT id, count(*) OVER (ORDER BY f RANGE BETWEEN 'inf' PRECEDING AND "
                  "CURRENT ROW) AS c FROM t ORDER BY id", FLOATS)
    finite_or_infinite = sum(1 for f in FLOATS["f"].to_pylist() if f is not None and f == f)
    assert counts[1] == counts[9] == finite_or_infinite
    assert counts[2] == 1  # -inf: only itself
    assert counts[5] == 1  # NaN: its own peer group


@pytest.mark.parametrize(("offset", "message"), [("'-inf'", "negative"), ("'nan'", "NaN")])
def test_negative_or_nan_offsets_are_errors(offset, message):
    with pytest.raises(PlanError, match=message):
        _run(f"SELECT count(*) OVER (ORDER BY f RANGE BETWEEN {offset} PRECEDING AND "
             "CURRENT ROW) AS c FROM t", FLOATS)
