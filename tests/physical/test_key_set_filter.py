"""A hash join with few distinct build keys pushes the key set into the probe-side scan.

The scan drops probe rows whose key is not in the set (``pc.is_in``) and skips Parquet row
groups whose min/max range holds none of the keys, also where the range of the keys covers
everything. A partitioned join publishes the union of its build partitions' keys.
"""

from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps
from plansight.engine.exec.context import SessionConfig
from plansight.engine.physical.dynamic_filter import DynamicFilter
from tests.differential.harness import assert_same, check, run_duckdb
from tests.session_defaults import session_defaults

KEY_SET_MAX = SessionConfig().dynamic_filter_max_keys  # the default


def _metric(plan_text: str, name: str) -> int:
    return sum(int(x) for x in re.findall(rf"\b{name}=(\d+)", plan_text))


def _probe_scan_line(plan_text: str, table: str) -> str:
    return next(line for line in plan_text.splitlines()
                if f"DataSourceExec: table={table}," in line)


# ----------------------------------------------------------------------------- the filter

def test_key_set_applies_only_once_every_build_partition_has_published():
    f = DynamicFilter("HashJoin[1]", keep_nulls=False)
    f.start("run")
    f.publish_build_keys(pa.array([10, 30, None]), build=0, builds=2)
    assert not f.applies_to("run")  # partition 1's keys are still unknown
    f.publish_build_keys(pa.array([20, 20]), build=1, builds=2)
    assert f.applies_to("run")
    assert f.key_set.to_pylist() == [10, 20, 30]
    assert (f.low, f.high) == (10, 30)
    column = pa.array([10, 15, 20, None, 30, 31])
    assert f.mask(column).to_pylist() == [True, False, True, False, True, False]
    # row groups: a range around keys may match, one between them may not
    assert f.unit_may_match((11, 19, 0)) is False
    assert f.unit_may_match((11, 20, 0)) is True
    assert f.unit_may_match((31, 40, 0)) is False
    assert f.unit_may_match(None) is True


def test_many_distinct_keys_publish_only_the_range():
    f = DynamicFilter("HashJoin[1]", keep_nulls=False)
    f.start("run")
    f.publish_build_keys(pa.array(np.arange(0, 2 * (KEY_SET_MAX + 1), 2)))
    assert f.key_set is None and (f.low, f.high) == (0, 2 * KEY_SET_MAX)
    assert f.unit_may_match((3, 3, 0)) is True  # an odd value is not a key, but no set says so
    # two partitions with few keys each whose union is too many: range only
    g = DynamicFilter("HashJoin[2]", keep_nulls=False)
    g.start("run")
    g.publish_build_keys(pa.array(np.arange(KEY_SET_MAX)), build=0, builds=2)
    g.publish_build_keys(pa.array(np.arange(KEY_SET_MAX) + 5000), build=1, builds=2)
    assert g.key_set is None and (g.low, g.high) == (0, KEY_SET_MAX + 4999)


def test_null_safe_join_keeps_null_probe_keys_even_when_the_build_has_only_nulls():
    f = DynamicFilter("HashJoin[1]", keep_nulls=True)
    f.start("run")
    f.publish_build_keys(pa.array([None, None], pa.int64()))
    assert f.applies_to("run") and not f.empty
    assert f.mask(pa.array([1, None, 2])).to_pylist() == [False, True, False]
    assert f.unit_may_match((1, 5, 1)) is True  # the row group has NULLs
    assert f.unit_may_match((1, 5, 0)) is False
    g = DynamicFilter("HashJoin[2]", keep_nulls=False)
    g.start("run")
    g.publish_build_keys(pa.array([None], pa.int64()))
    assert g.empty and g.unit_may_match((1, 5, 3)) is False


def test_float_keys_publish_no_set():
    f = DynamicFilter("HashJoin[1]", keep_nulls=False)
    f.start("run")
    f.publish_build_keys(pa.array([0.0, 2.5]))
    assert f.key_set is None and (f.low, f.high) == (0.0, 2.5)
    # -0.0 equals 0.0 and NaN joins NaN: both pass
    assert f.mask(pa.array([-0.0, float("nan"), 1.0, 3.0])).to_pylist() == \
        [True, True, True, False]


def test_a_new_run_forgets_the_keys():
    f = DynamicFilter("HashJoin[1]", keep_nulls=False)
    f.start("run 1")
    f.publish_build_keys(pa.array([1, 2]))
    f.start("run 2")
    assert not f.active
    f.publish_build_keys(pa.array([7]))
    assert f.key_set.to_pylist() == [7]


def test_an_integer_key_set_is_tested_through_a_bitmap():
    f = DynamicFilter("HashJoin[1]", keep_nulls=False, max_bitmap_bits=1 << 27)
    f.start("run")
    f.publish_build_keys(pa.array([40, 7, None, 1000, 7]))
    assert f.key_set.to_pylist() == [7, 40, 1000] and f.bitmap is not None
    assert "IN (3 keys)" in f.describe()
    column = pa.array([7, 8, None, 40, 1000, 1001, -7], pa.int32())
    assert f.mask(column).to_pylist() == [True, False, False, True, True, False, False]
    assert f.mask(pa.array([7, 40, 40])) is None  # every row passes: nothing to filter
    # a sparse set (its span past the bitmap's cap) and strings keep is_in
    sparse = DynamicFilter("HashJoin[2]", keep_nulls=False, max_bitmap_bits=1 << 27)
    sparse.start("run")
    sparse.publish_build_keys(pa.array([0, 1 << 40]))
    assert sparse.bitmap is None
    assert sparse.mask(pa.array([0, 1, 1 << 40])).to_pylist() == [True, False, True]


def test_a_null_safe_key_set_bitmap_keeps_null_probe_keys():
    f = DynamicFilter("HashJoin[1]", keep_nulls=True, max_bitmap_bits=1 << 27)
    f.start("run")
    f.publish_build_keys(pa.array([3, 9, None]))
    assert f.bitmap is not None
    assert f.mask(pa.array([3, None, 4, 9])).to_pylist() == [True, True, False, True]
    assert f.mask(pa.array([None, 9], pa.int64())) is None


# ----------------------------------------------------------------------------- Parquet scans

@pytest.fixture(scope="module")
def sorted_facts(tmp_path_factory):
    """20 row groups of 10,000 rows, sorted on every key column."""
    n = 200_000
    i = np.arange(n)
    table = pa.table({
        "k": i,
        "s": pa.array([f"key{x:06d}" for x in i]),
        "d": pa.array(np.datetime64("2000-01-01") + (i // 50).astype("timedelta64[D]")),
        "v": i % 97,
    })
    path = tmp_path_factory.mktemp("keyset") / "facts.parquet"
    pq.write_table(table, path, row_group_size=10_000)
    return path


def _spread_dims():
    """Three keys from the first, the middle and the last row group: their range is all."""
    return pa.table({
        "k": pa.array([5, 100_005, 199_995, None], pa.int64()),
        "s": pa.array(["key000005", "key100005", "key199995", None]),
        "d": pa.array([dt.date(2000, 1, 1), dt.date(2005, 6, 23), dt.date(2010, 12, 13), None]),
        "name": ["a", "b", "c", "null key"],
    })


@pytest.mark.parametrize("partitions", [1, 2, 3])
@pytest.mark.parametrize("key", ["k", "s", "d"])
def test_key_set_prunes_row_groups_the_range_cannot(sorted_facts, key, partitions):
    dims = _spread_dims()
    session = ps.Session(target_partitions=partitions)
    session.register_parquet("facts", sorted_facts)
    session.register("dims", dims)
    sql = f"SELECT name, facts.{key}, v FROM facts JOIN dims ON facts.{key} = dims.{key}"
    run = session.sql(sql).execute()
    scan = _probe_scan_line(run.explain_analyze(), "facts")
    assert "mode=CollectLeft" in run.explain_analyze()
    # 3 of 20 row groups hold a key; within them only the matching rows survive the scan
    assert _metric(scan, "units_pruned_dynamic") == 17
    assert _metric(scan, "units_read") == 3
    matches = 3 if key != "d" else 150  # 50 rows per date
    assert _metric(scan, "rows_read") == matches
    assert _metric(scan, "rows_skipped_dynamic") == 30_000 - matches
    con_sql = sql.replace("FROM facts", f"FROM read_parquet('{sorted_facts}') facts")
    assert_same(run.result, run_duckdb(con_sql, {"dims": dims}), ordered=False, sql=sql)


@pytest.mark.parametrize("partitions", [2, 3])
def test_partitioned_join_prunes_with_the_union_of_its_build_partitions(
        sorted_facts, partitions, monkeypatch):
    session_defaults(monkeypatch, hash_join_single_partition_threshold_rows=0)
    dims = _spread_dims()
    session = ps.Session(target_partitions=partitions, batch_size=100)
    session.register_parquet("facts", sorted_facts)
    session.register("dims", dims)
    sql = "SELECT name, v FROM facts JOIN dims USING (k)"
    run = session.sql(sql).execute()
    text = run.explain_analyze()
    assert "mode=Partitioned" in text
    scan = _probe_scan_line(text, "facts")
    # the probe scan may run ahead of the slowest build partition by the repartition queues'
    # capacity (a few 100-row batches); everything after that is filtered by all the keys
    assert _metric(scan, "units_pruned_dynamic") >= 14
    assert _metric(scan, "rows_read") < 30_000
    con_sql = sql.replace("FROM facts", f"FROM read_parquet('{sorted_facts}') facts")
    assert_same(run.result, run_duckdb(con_sql, {"dims": dims}), ordered=False, sql=sql)


# ----------------------------------------------------------------------------- differential

def _tables():
    rng = np.random.default_rng(11)
    n = 3000

    def with_nulls(values, rate=0.05):
        mask = rng.random(len(values)) < rate
        return pa.array(values, mask=mask)

    keys = rng.integers(0, 400, n)
    probe = pa.table({
        "k": with_nulls(keys),
        "k32": with_nulls(keys.astype(np.int32)),
        "k2": with_nulls(keys % 7),
        "s": with_nulls(np.array([f"s{x}" for x in keys])),
        "d": with_nulls(np.datetime64("2020-01-01") + keys.astype("timedelta64[D]")),
        "v": np.arange(n),
    })
    build_keys = rng.integers(0, 800, 60)  # half of them never occur on the probe side
    build = pa.table({
        "k": with_nulls(build_keys, 0.2),
        "k2": with_nulls(build_keys % 7, 0.1),
        "s": with_nulls(np.array([f"s{x}" for x in build_keys]), 0.2),
        "d": with_nulls(np.datetime64("2020-01-01") + build_keys.astype("timedelta64[D]"), 0.2),
        "w": np.arange(60),
    })
    many_keys = rng.integers(0, 400, 5000)  # more distinct keys than a set holds
    many = pa.table({"k": np.concatenate([many_keys, np.arange(10_000, 12_000)]),
                     "w": np.arange(7000)})
    empty = build.slice(0, 0)
    only_nulls = pa.table({"k": pa.array([None, None], pa.int64()), "w": [1, 2]})
    return {"p": probe, "b": build, "many": many, "empty": empty, "nulls": only_nulls}


TABLES = _tables()

QUERIES = [
    "SELECT p.v, b.w FROM p JOIN b ON p.k = b.k",
    "SELECT p.v, b.w FROM p JOIN b ON p.k32 = b.k",
    "SELECT p.v, b.w FROM p JOIN b ON p.k = b.k + 100000",
    "SELECT p.v, b.w FROM p JOIN b ON p.s = b.s",
    "SELECT p.v, b.w FROM p JOIN b ON p.d = b.d",
    "SELECT p.v, b.w FROM p JOIN b ON p.k = b.k AND p.k2 = b.k2",
    "SELECT p.v, b.w FROM p JOIN b ON p.s = b.s AND p.d = b.d WHERE p.v % 3 = 0",
    "SELECT v FROM p WHERE k IN (SELECT k FROM b)",
    "SELECT v FROM p WHERE EXISTS (SELECT 1 FROM b WHERE b.s = p.s)",
    "SELECT v FROM p WHERE k NOT IN (SELECT k FROM b WHERE k IS NOT NULL)",
    "SELECT k FROM p INTERSECT SELECT k FROM b",
    "SELECT k FROM b EXCEPT SELECT k FROM p",
    "SELECT k FROM p INTERSECT SELECT k FROM nulls",
    "SELECT count(*), count(b.w) FROM p LEFT JOIN b ON p.k = b.k",
    "SELECT p.v, many.w FROM p JOIN many ON p.k = many.k",
    "SELECT p.v, e.w FROM p JOIN empty e ON p.k = e.k",
    "SELECT p.v, e.w FROM p JOIN empty e ON p.s = e.s AND p.d = e.d",
    "SELECT count(*) FROM p JOIN nulls ON p.k = nulls.k",
]


@pytest.mark.parametrize("options", [
    pytest.param({"target_partitions": 1, "batch_size": 8192}, id="p1"),
    pytest.param({"target_partitions": 1, "batch_size": 1}, id="p1-b1"),
    pytest.param({"target_partitions": 2, "batch_size": 7}, id="p2-b7"),
    pytest.param({"target_partitions": 3, "batch_size": 3}, id="p3-b3"),
    pytest.param({"target_partitions": 8, "batch_size": 1000}, id="p8"),
])
@pytest.mark.parametrize("sql", QUERIES)
def test_join_key_filters_match_duckdb(sql, options):
    check(sql, TABLES, **options)


@pytest.mark.parametrize("partitions", [2, 3])
@pytest.mark.parametrize("sql", QUERIES)
def test_partitioned_join_key_filters_match_duckdb(sql, partitions, monkeypatch):
    session_defaults(monkeypatch, hash_join_single_partition_threshold_rows=0)
    check(sql, TABLES, target_partitions=partitions, batch_size=100)


def test_the_probe_scan_drops_rows_without_a_build_key():
    session = ps.Session(target_partitions=2, batch_size=500)
    for name, table in TABLES.items():
        session.register(name, table)
    run = session.sql("SELECT p.v, b.w FROM p JOIN b ON p.s = b.s").execute()
    scan = _probe_scan_line(run.explain_analyze(), "p")
    assert "dynamic_filters=[s from HashJoin" in scan
    expected_rows = sum(1 for s in TABLES["p"].column("s").to_pylist()
                        if s is not None and s in set(TABLES["b"].column("s").to_pylist()))
    assert _metric(scan, "rows_read") == expected_rows
    assert _metric(scan, "rows_skipped_dynamic") == TABLES["p"].num_rows - expected_rows
