"""Join key filters that carry a *reduced* key set into the big scans.

Two pieces (engine/physical/key_bitmap.py, physical_optimizer/push_dynamic_filters.py):

- many distinct integer build keys publish a bitmap of them, so a probe scan drops the rows
  whose key is not a build key even where the keys' range covers the whole table;
- the filter travels below aggregates grouped by its key (a decorrelated ``avg`` per part
  aggregates only the outer query's parts) and into the preserved side of lower joins, never
  into the NULL-padded side of an outer join.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight import PlanError
from plansight.engine.physical.dynamic_filter import DynamicFilter
from plansight.engine.physical.key_bitmap import KeyBitmap
from tests.differential.harness import check

BITS = 1 << 20


def _metric(text: str, name: str) -> int:
    return sum(int(x) for x in re.findall(rf"\b{name}=(\d+)", text))


def _scan_lines(text: str, table: str) -> list[str]:
    return [line for line in text.splitlines() if f"DataSourceExec: table={table}," in line]


# ----------------------------------------------------------------------------- the bitmap

def test_bitmap_matches_python_membership_and_row_group_ranges():
    rng = np.random.default_rng(5)
    for _ in range(200):
        keys = rng.integers(-70, 400, rng.integers(1, 60))
        bitmap, members = KeyBitmap(keys), set(keys.tolist())
        values = rng.integers(-100, 450, 64)
        nulls = rng.random(64) < 0.1
        column = pa.array(values, mask=nulls)
        expected = [(not null) and v in members for v, null in zip(values.tolist(), nulls)]
        assert bitmap.contains(column).to_pylist() == expected
        low, high = sorted(rng.integers(-100, 450, 2).tolist())
        assert bitmap.any_between(low, high) == any(low <= k <= high for k in members)


def test_many_integer_keys_publish_a_bitmap_of_their_union():
    f = DynamicFilter("HashJoin[1]", keep_nulls=False, max_keys=4, max_bitmap_bits=BITS)
    f.start("run")
    f.publish_build_keys(pa.array([10, 20, 30, None]), build=0, builds=2)
    assert not f.applies_to("run")  # the other build partition's keys are not known yet
    f.publish_build_keys(pa.array([1000, 2000, 2000]), build=1, builds=2)
    assert f.applies_to("run") and f.key_set is None and f.bitmap is not None
    assert (f.low, f.high) == (10, 2000)
    column = pa.array([10, 11, 20, None, 1000, 1999, 2000, 5], pa.int32())
    assert f.mask(column).to_pylist() == [True, False, True, False, True, False, True, False]
    assert f.unit_may_match((31, 999, 0)) is False  # inside the range, between the keys
    assert f.unit_may_match((31, 1000, 0)) is True
    assert f.describe() == "HashJoin[1]: >= 10 AND <= 2000 AND IN (key bitmap)"
    # a narrower probe type whose values cannot reach the keys, NULLs included
    assert f.mask(pa.array([1, None, -128, 127], pa.int8())).to_pylist() == [False] * 4


def test_no_bitmap_when_the_keys_fill_their_range_or_span_too_much():
    dense = DynamicFilter("HashJoin[1]", keep_nulls=False, max_keys=4, max_bitmap_bits=BITS)
    dense.start("run")
    dense.publish_build_keys(pa.array(np.arange(100, 200)))
    assert dense.bitmap is None and (dense.low, dense.high) == (100, 199)
    wide = DynamicFilter("HashJoin[2]", keep_nulls=False, max_keys=4, max_bitmap_bits=1000)
    wide.start("run")
    wide.publish_build_keys(pa.array([0, 1, 2, 3, 5000]))
    assert wide.bitmap is None and (wide.low, wide.high) == (0, 5000)
    strings = DynamicFilter("HashJoin[3]", keep_nulls=False, max_keys=2, max_bitmap_bits=BITS)
    strings.start("run")
    strings.publish_build_keys(pa.array(["a", "b", "c"]))
    assert strings.bitmap is None and strings.key_set is None


def test_a_null_safe_bitmap_keeps_null_probe_keys_and_a_new_run_forgets_it():
    f = DynamicFilter("HashJoin[1]", keep_nulls=True, max_keys=2, max_bitmap_bits=BITS)
    f.start("run 1")
    f.publish_build_keys(pa.array([1, 5, 9, None]))
    assert f.mask(pa.array([1, None, 2, 9])).to_pylist() == [True, True, False, True]
    f.start("run 2")
    assert not f.active and f.bitmap is None


# ----------------------------------------------------------------------------- plans

def _facts_and_parts(n: int = 20_000):
    rng = np.random.default_rng(7)
    parts = pa.table({"p_partkey": np.arange(1, 2001),
                      "p_brand": pa.array([f"B{i % 40}" for i in range(2000)])})
    facts = pa.table({"l_partkey": rng.integers(1, 2001, n),
                      "l_quantity": rng.integers(1, 51, n),
                      "l_price": rng.random(n) * 100})
    return {"part": parts, "lineitem": facts}


Q17_SHAPE = """SELECT sum(l_price) FROM lineitem, part
WHERE p_partkey = l_partkey AND p_brand = 'B7'
  AND l_quantity < (SELECT 0.5 * avg(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)"""


def test_a_correlated_average_aggregates_only_the_outer_querys_keys():
    tables = _facts_and_parts()
    session = ps.Session(target_partitions=2)
    for name, table in tables.items():
        session.register(name, table)
    run = session.sql(Q17_SHAPE).execute()
    text = run.explain_analyze()
    scans = _scan_lines(text, "lineitem")
    assert len(scans) == 2
    # 50 parts of brand B7 (of 2,000): both lineitem scans, the one below the average's
    # aggregate included, read only those parts' rows
    brand_7 = {k for k, b in zip(tables["part"].column("p_partkey").to_pylist(),
                                 tables["part"].column("p_brand").to_pylist()) if b == "B7"}
    matching = sum(1 for k in tables["lineitem"].column("l_partkey").to_pylist() if k in brand_7)
    assert [_metric(scan, "rows_read") for scan in scans] == [matching, matching], text
    check(Q17_SHAPE, tables, target_partitions=2)


def test_the_filter_goes_into_the_preserved_side_of_a_left_join_only():
    tables = {
        "d": pa.table({"k": [1, 2, 3], "name": ["a", "b", "c"]}),
        "f": pa.table({"k": np.arange(1000) % 50, "v": np.arange(1000)}),
        "g": pa.table({"k": np.arange(500) % 50, "w": np.arange(500)}),
    }
    session = ps.Session(target_partitions=1)
    session.set_option("dynamic_filter_through_joins", True)
    for name, table in tables.items():
        session.register(name, table)
    # f LEFT JOIN g: f's rows are all kept (preserved), g's pad with NULLs
    sql = ("SELECT d.name, x.v, x.w FROM d JOIN "
           "(SELECT f.k, f.v, g.w FROM f LEFT JOIN g ON f.k = g.k AND g.w < 100) x "
           "ON d.k = x.k")
    text = session.sql(sql).explain()
    top = re.search(r"HashJoinExec: .*?id=(\d+)", text).group(1)  # d JOIN x: the first
    f_scan, = _scan_lines(text, "f")
    g_scan, = _scan_lines(text, "g")
    assert f"HashJoin[{top}]" in f_scan, text
    assert f"HashJoin[{top}]" not in g_scan, text
    sql_right = ("SELECT d.name, x.v, x.w FROM d JOIN "
                 "(SELECT g.k, f.v, g.w FROM f RIGHT JOIN g ON f.k = g.k) x ON d.k = x.k")
    for query in (sql, sql_right):
        check(query, tables, target_partitions=1, dynamic_filter_through_joins=True)


#: brand's key filter on p_brand may reach part below the lineitem join
BRAND_SQL = ("SELECT label, l_price FROM brand JOIN "
             "(SELECT p_brand, l_price FROM lineitem JOIN part ON l_partkey = p_partkey) x "
             "ON x.p_brand = brand.b")


def _brand_session(brands: list[str]):
    """Facts and parts plus a ``brand`` table of ``brands``, in a one-partition session."""
    tables = _facts_and_parts(2000)
    tables["brand"] = pa.table({"b": brands, "label": [b.lower() for b in brands]})
    session = ps.Session(target_partitions=1)
    for name, table in tables.items():
        session.register(name, table)
    return tables, session


def test_filters_go_through_joins_only_with_the_option():
    tables, session = _brand_session(["B7", "B9"])
    sql = BRAND_SQL  # brand -> part (the upper join's filter on p_brand) could reach part
    counts = []
    for through in (False, True):
        text = session.sql(sql, options={"dynamic_filter_through_joins": through}).explain()
        counts.append(sum(s.count(" from HashJoin") for s in _scan_lines(text, "part")))
    assert counts[1] == counts[0] + 1, counts
    check(sql, tables, target_partitions=2, dynamic_filter_through_joins=True)


@pytest.mark.parametrize("brands, pushed", [(["B7", "B9"], True),
                                            ([f"B{i}" for i in range(40)], False)])
def test_auto_sends_only_a_selective_build_through_joins(brands, pushed):
    """The default, "auto": the brand join's key filter reaches part below lineitem when
    the brands it builds are few of part's 40 (it drops most rows there), not when the
    build holds every brand (a test per row that drops nothing, TPC-H Q9's case)."""
    tables, session = _brand_session(brands)
    sql = BRAND_SQL
    counts = [sum(s.count(" from HashJoin") for s in _scan_lines(
        session.sql(sql, options=options).explain(), "part"))
        for options in ({}, {"dynamic_filter_through_joins": "auto"},
                        {"dynamic_filter_through_joins": False})]
    assert counts == [pushed, pushed, 0], session.sql(sql).explain()
    run = session.sql(sql).execute()
    rows_read = _metric("\n".join(_scan_lines(run.explain_analyze(), "part")), "rows_read")
    assert rows_read == (100 if pushed else 2000), run.explain_analyze()
    check(sql, tables, target_partitions=2, batch_size=7)


def test_through_joins_option_takes_true_false_or_auto():
    session = ps.Session(target_partitions=1)
    for value, expected in ((True, True), ("off", False), ("AUTO", "auto")):
        session.set_option("dynamic_filter_through_joins", value)
        assert session.config.dynamic_filter_through_joins == expected
    with pytest.raises(PlanError, match="true, false or auto"):
        session.set_option("dynamic_filter_through_joins", "sometimes")


# ----------------------------------------------------------------------------- differential

def _tables():
    rng = np.random.default_rng(13)
    n = 400

    def with_nulls(values, rate=0.08):
        return pa.array(values, mask=rng.random(len(values)) < rate)

    keys = rng.integers(0, 3000, n)  # sparse over a range wider than the key-set limit
    facts = pa.table({"k": with_nulls(keys), "j": with_nulls(rng.integers(0, 30, n)),
                      "q": with_nulls(rng.integers(1, 20, n)), "v": np.arange(n)})
    dims = pa.table({"k": with_nulls(rng.integers(0, 3000, 1500), 0.05),
                     "g": with_nulls(rng.integers(0, 5, 1500)), "w": np.arange(1500)})
    mids = pa.table({"j": with_nulls(np.arange(30) % 30), "k": with_nulls(
        rng.integers(0, 3000, 30)), "t": np.arange(30)})
    return {"f": facts, "d": dims, "m": mids, "e": dims.slice(0, 0)}


TABLES = _tables()

QUERIES = [
    # a bitmap of >1024 sparse integer keys
    "SELECT f.v, d.w FROM f JOIN d ON f.k = d.k",
    "SELECT v FROM f WHERE k IN (SELECT k FROM d WHERE g = 1)",
    "SELECT v FROM f WHERE k NOT IN (SELECT k FROM d WHERE k IS NOT NULL AND g <> 2)",
    "SELECT k FROM f INTERSECT SELECT k FROM d",
    # below an aggregate grouped by the key (correlated subqueries, IN of a GROUP BY)
    "SELECT d.w FROM d WHERE d.g = 2 AND d.w < (SELECT 40 * avg(q) FROM f WHERE f.k = d.k)",
    "SELECT d.w, s.total FROM d JOIN (SELECT k, sum(q) AS total FROM f GROUP BY k) s "
    "ON d.k = s.k WHERE d.g = 3",
    "SELECT w FROM d WHERE k IN (SELECT k FROM f GROUP BY k HAVING sum(q) > 5) AND g = 4",
    "SELECT d.w, s.c FROM d LEFT JOIN (SELECT k, count(*) AS c FROM f GROUP BY k) s "
    "ON d.k = s.k WHERE d.g = 0",
    # into the preserved sides of lower joins, never the NULL-padded ones
    "SELECT f.v, m.t, d.w FROM f JOIN m ON f.j = m.j JOIN d ON m.k = d.k WHERE d.g = 1",
    "SELECT x.v, x.t, d.w FROM (SELECT f.v, f.k, m.t FROM f LEFT JOIN m ON f.j = m.j) x "
    "JOIN d ON x.k = d.k WHERE d.g < 2",
    "SELECT x.v, x.t, d.w FROM (SELECT f.v, m.k, m.t FROM f RIGHT JOIN m ON f.j = m.j) x "
    "JOIN d ON x.k = d.k",
    "SELECT x.v, d.w FROM (SELECT f.v, f.k FROM f FULL JOIN m ON f.j = m.j) x "
    "JOIN d ON x.k = d.k",
    "SELECT f.v FROM f WHERE EXISTS (SELECT 1 FROM d WHERE d.k = f.k AND d.g = 1) "
    "AND NOT EXISTS (SELECT 1 FROM m WHERE m.j = f.j AND m.t > 20)",
    "SELECT f.v, e.w FROM f JOIN e ON f.k = e.k",
    "SELECT e.w FROM e WHERE e.w < (SELECT avg(q) FROM f WHERE f.k = e.k)",
]


@pytest.mark.parametrize("options", [
    pytest.param({"target_partitions": 1, "batch_size": 8192}, id="p1"),
    pytest.param({"target_partitions": 2, "batch_size": 7}, id="p2-b7"),
    pytest.param({"target_partitions": 3, "batch_size": 3}, id="p3-b3"),
    pytest.param({"target_partitions": 8, "batch_size": 1}, id="p8-b1"),
    pytest.param({"target_partitions": 2, "batch_size": 7, "dynamic_filter_through_joins": True},
                 id="p2-b7-joins"),
    pytest.param({"target_partitions": 3, "batch_size": 8192,
                  "dynamic_filter_through_joins": True}, id="p3-joins"),
])
@pytest.mark.parametrize("sql", QUERIES)
def test_sideways_key_filters_match_duckdb(sql, options):
    check(sql, TABLES, **options)


def test_a_join_filter_that_keeps_nearly_every_row_is_bypassed_after_a_while():
    # 4,000 build keys with gaps (a bitmap), every probe row among them: nothing to drop
    keys = np.arange(0, 8000, 2)
    tables = {"big": pa.table({"k": np.tile(keys, 60), "v": np.arange(240_000)}),
              "every": pa.table({"k": keys, "w": keys % 7}),
              "few": pa.table({"k": keys[:40], "w": keys[:40] % 7})}
    session = ps.Session(target_partitions=1, batch_size=8192)
    for name, table in tables.items():
        session.register(name, table)
    sql = "SELECT count(*), sum(w) FROM big JOIN {} USING (k)"
    run = session.sql(sql.format("every")).execute()
    scan, = _scan_lines(run.explain_analyze(), "big")
    assert _metric(scan, "dynamic_filters_bypassed") == 1, scan
    assert run.result.column(0)[0].as_py() == 240_000
    # a selective one is kept to the end; with the bypass off nothing is bypassed
    run = session.sql(sql.format("few")).execute()
    scan, = _scan_lines(run.explain_analyze(), "big")
    assert _metric(scan, "dynamic_filters_bypassed") == 0
    assert _metric(scan, "rows_read") == 40 * 60
    run = session.sql(sql.format("every"),
                      options={"dynamic_filter_bypass_after_rows": 0}).execute()
    scan, = _scan_lines(run.explain_analyze(), "big")
    assert _metric(scan, "dynamic_filters_bypassed") == 0
    for table in ("every", "few"):
        check(sql.format(table), tables, target_partitions=2, batch_size=1000)
