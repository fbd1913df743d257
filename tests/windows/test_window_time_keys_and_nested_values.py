"""RANGE offsets over TIME and TIMESTAMP WITH TIME ZONE keys, and struct / list / map values
in DISTINCT window aggregates and lag/lead (#14 item 5), checked against DuckDB.

TIME keys do not wrap around midnight (01:00 - 2 hours reaches every earlier time, as in
DuckDB); time-zone aware keys step months and days in UTC, which is DuckDB's arithmetic
with TimeZone = 'UTC' (set explicitly on the oracle). Every query runs under every
``window_executor``, at partitions 1/2/3/8 with batch sizes 8192/3/7/1, on the data and on
an empty table.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pytest

from plansight.engine.kernels.nested_keys import nested_codes
from tests.differential.harness import assert_same, check, run_plansight

EXECUTORS = ["auto", "hash", "sorted", "partition"]
# (table, partitions, batch size)
RUNS = [("t", 1, 8192), ("t", 2, 3), ("t", 3, 7), ("t", 8, 1), ("t_empty", 1, 8192),
        ("t_empty", 3, 7)]


def _times() -> pa.Table:
    hours = [0.5, 1.0, 22.5, 23.5, 2.0, 12.0, 13.0, None, 23.999, 0.0, 1.0, 1.0, 12.5, 11.0]
    times = [None if h is None else
             (dt.datetime(2000, 1, 1) + dt.timedelta(hours=h)).time().replace(microsecond=0)
             for h in hours]
    return pa.table({
        "id": list(range(len(hours))),
        "p": [1, 1, 2, 1, 2, 1, None, 1, 2, 2, 1, 2, 1, None],
        "t": pa.array(times, pa.time64("us")),
        "x": [3, -1, 4, 1, -5, 9, 2, 6, -5, 3, 5, 8, 9, 7],
    })


TIMES = _times()
# (query, the key's type)
TIME_QUERIES = [
    ("SELECT id, sum(x) OVER (ORDER BY t RANGE BETWEEN INTERVAL 1 HOUR PRECEDING AND CURRENT "
    "ROW) AS s FROM {table}", pa.time64("us")),
    ("SELECT id, count(*) OVER (PARTITION BY p ORDER BY t DESC RANGE BETWEEN INTERVAL 90 "
     "MINUTE PRECEDING AND INTERVAL '30 minutes' FOLLOWING) AS c FROM {table}", pa.time32("s")),
    ("SELECT id, max(x) OVER (PARTITION BY p ORDER BY t NULLS FIRST RANGE BETWEEN CURRENT ROW "
    "AND INTERVAL 1 DAY FOLLOWING) AS m, min(x) OVER (ORDER BY t RANGE BETWEEN INTERVAL "
    "'1 month' PRECEDING AND INTERVAL 0 SECOND FOLLOWING EXCLUDE CURRENT ROW) AS n FROM {table}",
     pa.time32("ms")),
    ("SELECT id, sum(x) OVER (ORDER BY t DESC NULLS LAST RANGE BETWEEN INTERVAL 11 HOUR "
     "PRECEDING AND INTERVAL 2 HOUR PRECEDING) AS s FROM {table}", pa.time64("us")),
]


def _zoned() -> pa.Table:
    stamps = [dt.datetime(2024, 1, 31, 23, 30), dt.datetime(2024, 2, 29, 12),
              dt.datetime(2024, 3, 1), dt.datetime(2024, 3, 31, 22), None,
              dt.datetime(2024, 2, 29, 12), dt.datetime(2024, 1, 1), dt.datetime(2023, 12, 31, 1),
              dt.datetime(2024, 4, 30, 23, 59), dt.datetime(2024, 3, 1, 1), None,
              dt.datetime(2024, 2, 28, 23)]
    utc = pa.array([None if s is None else s.replace(tzinfo=dt.timezone.utc) for s in stamps],
                   pa.timestamp("us", tz="UTC"))
    return pa.table({
        "id": list(range(len(stamps))),
        "p": [1, 2, 1, 1, 2, 1, None, 2, 1, 2, 1, 2],
        "ts": utc,
        "ny": utc.cast(pa.timestamp("us", tz="America/New_York")),
        "ms": utc.cast(pa.timestamp("ms", tz="Asia/Kolkata")),
        "x": [2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5],
    })


ZONED = _zoned()
ZONED_QUERIES = [
    "SELECT id, sum(x) OVER (ORDER BY ts RANGE BETWEEN INTERVAL 1 MONTH PRECEDING AND CURRENT "
    "ROW) AS s FROM {table}",
    "SELECT id, count(*) OVER (PARTITION BY p ORDER BY ny DESC RANGE BETWEEN INTERVAL "
    "'1 day 2 hours' PRECEDING AND INTERVAL 1 MONTH FOLLOWING) AS c FROM {table}",
    "SELECT id, sum(x) OVER (ORDER BY ms NULLS FIRST RANGE BETWEEN INTERVAL 1 HOUR PRECEDING "
    "AND INTERVAL '1 month 1 day' FOLLOWING) AS s, max(id) OVER (PARTITION BY p ORDER BY ts "
    "RANGE BETWEEN INTERVAL 30 DAY PRECEDING AND INTERVAL 30 DAY PRECEDING) AS m FROM {table}",
]


def _nested() -> pa.Table:
    structs = [{"a": 1, "b": "x"}, {"a": 1, "b": "x"}, None, {"a": 2, "b": None},
               {"a": 2, "b": None}, {"a": None, "b": "y"}, {"a": 3, "b": "x"}, None,
               {"a": None, "b": None}, {"a": 1, "b": "x"}, {"a": None, "b": None},
               {"a": 2, "b": "x"}]
    lists = [[1, 2], [1, 2], None, [], [None], [3], [1, 2], [], [None], [2, 1], None, [1]]
    structs_of_lists = [{"k": v, "n": i % 2} for i, v in enumerate(lists)]
    return pa.table({
        "id": list(range(12)),
        "p": [1, 1, 1, 2, 2, None, 1, 2, 2, 1, None, 2],
        "o": [1, 1, 2, 1, None, 1, 2, 2, 1, 3, 1, 2],
        "s": pa.array(structs),
        "l": pa.array(lists, pa.list_(pa.int64())),
        "ll": pa.array([[v, v] if i % 3 else [v] for i, v in enumerate(lists)]),
        "sl": pa.array(structs_of_lists),
        "m": pa.array([None if v is None else [("k", x) for x in v[:1]] for v in lists],
                      pa.map_(pa.string(), pa.int64())),
    })


NESTED = _nested()
NESTED_QUERIES = [
    "SELECT id, count(DISTINCT s) OVER (PARTITION BY p) AS a, count(DISTINCT l) OVER () AS b "
    "FROM {table}",
    "SELECT id, count(DISTINCT l) OVER (PARTITION BY p ORDER BY o) AS a, count(DISTINCT sl) "
    "OVER (ORDER BY o DESC RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) AS b FROM {table}",
    "SELECT id, count(DISTINCT ll) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING) "
    "AS a, count(DISTINCT s) OVER (PARTITION BY p ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING "
    "AND UNBOUNDED FOLLOWING EXCLUDE CURRENT ROW) AS b FROM {table}",
    "SELECT id, count(DISTINCT m) OVER (ORDER BY o GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING "
    "EXCLUDE GROUP) AS a, count(DISTINCT s) OVER (ORDER BY o, id ROWS BETWEEN 1 PRECEDING AND 1 "
    "FOLLOWING EXCLUDE TIES) AS b FROM {table}",
    "SELECT id, lag(s) OVER (PARTITION BY p ORDER BY id) AS a, lead(l, 2, l) OVER "
    "(ORDER BY id) AS b, lag(sl, 1, NULL) OVER (PARTITION BY p ORDER BY o, id) AS c FROM {table}",
    "SELECT id, lead(s, 1, s) OVER (PARTITION BY p ORDER BY id) AS a, lag(m, 3) OVER (ORDER BY "
    "id) AS b, lag(ll) OVER (PARTITION BY o ORDER BY id DESC) AS c, first_value(l) OVER "
    "(PARTITION BY p ORDER BY id ROWS 1 PRECEDING) AS d FROM {table}",
]


def _tables(table: pa.Table) -> dict[str, pa.Table]:
    return {"t": table, "t_empty": table.slice(0, 0)}


@pytest.mark.parametrize(("table", "partitions", "batch_size"), RUNS)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(("sql", "time_type"), TIME_QUERIES)
def test_range_offsets_over_time_keys_match_duckdb(sql, time_type, executor, partitions,
                                                   batch_size, table):
    times = TIMES.set_column(2, "t", TIMES["t"].cast(time_type))
    check(sql.format(table=table), _tables(times), target_partitions=partitions,
          batch_size=batch_size, window_executor=executor)


def _duckdb_in_utc(sql: str, tables: dict[str, pa.Table]) -> pa.Table:
    con = duckdb.connect()
    try:
        con.execute("SET threads = 1")
        con.execute("SET TimeZone = 'UTC'")
        for name, table in tables.items():
            con.register(name, table)
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()


@pytest.mark.parametrize(("table", "partitions", "batch_size"), RUNS)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("sql", ZONED_QUERIES)
def test_range_offsets_over_zoned_timestamps_match_duckdb_in_utc(sql, executor, partitions,
                                                                 batch_size, table):
    sql = sql.format(table=table)
    actual = run_plansight(sql, _tables(ZONED), target_partitions=partitions,
                           batch_size=batch_size, window_executor=executor)
    assert_same(actual, _duckdb_in_utc(sql, _tables(ZONED)), ordered=False, sql=sql)


@pytest.mark.parametrize(("table", "partitions", "batch_size"), RUNS)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("sql", NESTED_QUERIES)
def test_nested_values_in_distinct_aggregates_and_lag_lead_match_duckdb(sql, executor,
                                                                        partitions, batch_size,
                                                                        table):
    check(sql.format(table=table), _tables(NESTED), target_partitions=partitions,
          batch_size=batch_size, window_executor=executor)


def test_nested_codes_equal_exactly_for_equal_values():
    # sliced arrays, NULLs at every level, an empty list beside a NULL one
    lists = pa.array([[9], [1, None], [], [1, None], None, [], [None, 1], [1]]).slice(1)
    codes, count = nested_codes(lists)
    assert codes[0] == codes[2] and codes[1] == codes[4]
    assert len({codes[0], codes[1], codes[3], codes[5], codes[6]}) == 5
    assert codes.max() < count
    structs = pa.array([{"a": None, "b": [1]}, {"a": None, "b": [1]}, {"a": 0, "b": [1]},
                        None, {"a": None, "b": None}])
    codes, _ = nested_codes(structs)
    assert codes[0] == codes[1] and len(set(codes[1:].tolist())) == 4
