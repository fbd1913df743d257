"""FilterExec evaluates cheap conjuncts on the whole batch, costly (string) ones on what is left.

The split is visible in ``FilterExec.stages``; the answers must not change with it: NULLs
fail a conjunct wherever it is evaluated, an empty remainder skips the costly stage, and the
rows keep their order.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import plansight as ps
from plansight.engine.physical.filter import FilterExec, _kept
from plansight.engine.physical.scan import _Prefilter
from tests.differential.harness import assert_same, check, has_top_level_order_by, run_duckdb


def _filters(plan):
    return [op for _, op in plan.walk() if isinstance(op, FilterExec)]


def _tables():
    rng = np.random.default_rng(21)
    n = 500
    modes = np.array(["MAIL", "SHIP", "AIR", "RAIL", "TRUCK"])

    def with_nulls(values, rate=0.1):
        return pa.array(values, mask=rng.random(len(values)) < rate)

    return {"t": pa.table({
        "d": with_nulls(np.datetime64("1994-01-01") + rng.integers(0, 700, n).astype(
            "timedelta64[D]")),
        "x": with_nulls(rng.integers(-5, 50, n)),
        "mode": with_nulls(modes[rng.integers(0, 5, n)]),
        "name": with_nulls(np.array([f"item {i % 37}" for i in range(n)])),
        "v": np.arange(n),
    })}


TABLES = _tables()


def test_string_conjuncts_form_the_second_stage_in_written_order():
    session = ps.Session(target_partitions=1)
    session.register("t", TABLES["t"])
    query = session.sql("SELECT v FROM t WHERE mode IN ('MAIL', 'SHIP') AND x > 3 "
                        "AND name LIKE 'item 1%' AND d >= DATE '1994-06-01'")
    stage_text = [str(stage) for stage in _filters(query.physical)[0].stages]
    assert len(stage_text) == 2
    assert "x" in stage_text[0] and "d" in stage_text[0] and "mode" not in stage_text[0]
    assert stage_text[1].index("mode") < stage_text[1].index("name"), stage_text


def test_one_kind_of_conjunct_is_one_stage():
    session = ps.Session(target_partitions=1)
    session.register("t", TABLES["t"])
    numbers = session.sql("SELECT v FROM t WHERE x > 3 AND x < 40")
    strings = session.sql("SELECT v FROM t WHERE mode = 'AIR' OR name = 'item 3'")
    assert [len(_filters(q.physical)[0].stages) for q in (numbers, strings)] == [1, 1]


QUERIES = [
    "SELECT v FROM t WHERE mode IN ('MAIL', 'SHIP') AND d >= DATE '1994-06-01' "
    "AND d < DATE '1995-01-01' ORDER BY v",
    "SELECT v, name FROM t WHERE name LIKE '%3' AND x BETWEEN 0 AND 10",
    "SELECT v FROM t WHERE (mode = 'AIR' OR x > 40) AND x IS NOT NULL AND name <> 'item 4'",
    "SELECT v FROM t WHERE mode IN ('MAIL', NULL) AND x > 0",
    "SELECT v FROM t WHERE NOT (mode IN ('RAIL')) AND x < 1000",
    "SELECT v FROM t WHERE x > 1000 AND mode = 'SHIP'",  # nothing reaches the second stage
    "SELECT count(*) FROM t WHERE d IS NULL AND mode IS NOT NULL AND name LIKE 'item%'",
    "SELECT v, x FROM t WHERE v >= 0",  # every row passes: batches go through uncopied
    "SELECT v FROM t WHERE v >= 0 AND mode <> 'no such mode'",
    "SELECT v FROM t WHERE v < 0",
    # only cheap conjuncts, strings read: the scan's pass drops rows while they are indices
    "SELECT mode, count(*), sum(x), min(name) FROM t WHERE d <= DATE '1995-10-01' "
    "GROUP BY mode ORDER BY mode",
    "SELECT v, mode, name FROM t WHERE x <> 7 AND d IS NOT NULL",
    "SELECT mode, name FROM t WHERE x > 1000",
]


#: partitions 1/2/3/8 crossed with batch sizes 8192/7/3/1
SETTINGS = [
    pytest.param({"target_partitions": 1, "batch_size": 8192}, id="p1"),
    pytest.param({"target_partitions": 2, "batch_size": 7}, id="p2-b7"),
    pytest.param({"target_partitions": 3, "batch_size": 3}, id="p3-b3"),
    pytest.param({"target_partitions": 8, "batch_size": 1}, id="p8-b1"),
]


@pytest.mark.parametrize("options", SETTINGS)
@pytest.mark.parametrize("sql", QUERIES)
def test_staged_filters_match_duckdb(sql, options):
    check(sql, TABLES, **options)


def test_a_mask_that_keeps_every_row_returns_the_batch_itself():
    batch = pa.record_batch({"a": [1, 2, 3], "s": ["x", None, "z"]})
    assert _kept(batch, pa.array([True, True, True])) is batch
    none = _kept(batch, pa.array([False, False, False]))
    assert none.num_rows == 0 and none.schema == batch.schema
    some = _kept(batch, pa.array([True, False, True]))
    assert some.to_pydict() == {"a": [1, 3], "s": ["x", "z"]}
    assert _kept(batch, pa.array([True, False, True]), kept=2).num_rows == 2


# --------------------------------------------------------- cheap conjuncts inside the scan

@pytest.fixture
def every_batch(monkeypatch):
    """The scan's early pass tests batches of any size (else only those of 4096+ rows)."""
    monkeypatch.setattr(_Prefilter, "MIN_ROWS", 0)


@pytest.fixture(scope="module")
def parquet_t(tmp_path_factory):
    """TABLES' t as Parquet in two row groups: ``mode`` (5 values) is read as dictionary
    indices, which the scan decodes after applying the filter's cheap conjuncts."""
    path = tmp_path_factory.mktemp("stages") / "t.parquet"
    pq.write_table(TABLES["t"], path, row_group_size=250)
    return str(path)


@pytest.mark.parametrize("options", SETTINGS)
@pytest.mark.parametrize("sql", QUERIES)
def test_filters_over_parquet_with_cheap_conjuncts_in_the_scan_match_duckdb(
        every_batch, parquet_t, sql, options):
    session = ps.Session(**options)
    session.register_parquet("t", parquet_t)
    assert_same(session.sql(sql).to_arrow(), run_duckdb(sql, TABLES),
                ordered=has_top_level_order_by(sql), sql=sql)


def test_the_scan_drops_rows_by_the_cheap_conjuncts_before_decoding(every_batch, parquet_t):
    session = ps.Session(target_partitions=1)
    session.register_parquet("t", parquet_t)
    sql = ("SELECT v FROM t WHERE mode IN ('MAIL', 'SHIP') AND d >= DATE '1994-06-01' "
           "AND d < DATE '1995-01-01'")
    run = session.sql(sql).execute()
    scan = next(line for line in run.explain_analyze().splitlines() if "DataSourceExec" in line)
    dates = pc.and_(pc.greater_equal(TABLES["t"]["d"], pa.scalar(date(1994, 6, 1))),
                    pc.less(TABLES["t"]["d"], pa.scalar(date(1995, 1, 1))))
    passing = pc.sum(pc.fill_null(dates, False).cast(pa.int64())).as_py()
    assert f"output_rows={passing}," in scan, scan
    assert f"rows_skipped_prefilter={TABLES['t'].num_rows - passing}" in scan, scan
    assert_same(run.result, run_duckdb(sql, TABLES), ordered=False, sql=sql)


def test_a_cheap_conjunct_that_raises_in_the_scan_is_left_to_the_filter(every_batch, tmp_path):
    """``x * 1e9`` overflows INTEGER only where s = 'AIR' is false, and s = 'AIR' is written
    first: no error (as in DuckDB), although the scan's cheap pass raises on the batch."""
    n = 400
    table = pa.table({"s": ["AIR" if i % 4 == 0 else "SHIP" for i in range(n)],
                      "x": pa.array([1 if i % 4 == 0 else 100 for i in range(n)], pa.int32()),
                      "v": np.arange(n)})
    pq.write_table(table, tmp_path / "t.parquet")
    session = ps.Session(target_partitions=1)
    session.register_parquet("t", str(tmp_path / "t.parquet"))
    sql = "SELECT v FROM t WHERE s = 'AIR' AND x * 1000000000 > 0"
    run = session.sql(sql).execute()
    scan = next(line for line in run.explain_analyze().splitlines() if "DataSourceExec" in line)
    assert "output_rows=400," in scan and "rows_skipped_prefilter" not in scan, scan
    assert_same(run.result, run_duckdb(sql, {"t": table}), ordered=False, sql=sql)
    assert run.result.num_rows == n // 4


def test_the_early_pass_stops_when_it_keeps_nearly_every_row(tmp_path):
    """A cheap conjunct that keeps every row is tested on the first 65,536 rows only; small
    batches are not tested."""
    n = 300_000
    table = pa.table({"s": pa.array(["a", "b", "c"] * (n // 3)), "x": np.arange(n)})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=50_000)
    session = ps.Session(target_partitions=1)
    session.register_parquet("t", str(tmp_path / "t.parquet"))
    calls = []
    apply = _Prefilter.apply

    def counted(self, batch, metrics, stored_as):
        out = apply(self, batch, metrics, stored_as)
        calls.append((batch.num_rows, self.bypassed))
        return out
    session.sql("SELECT 1").to_arrow()
    _Prefilter.apply = counted
    try:
        everything = session.sql("SELECT count(*) FROM t WHERE x >= 0 AND s <> 'z'")
        assert everything.to_arrow().column(0)[0].as_py() == n
        bypassed_at = next(i for i, (_, bypassed) in enumerate(calls) if bypassed)
        assert sum(rows for rows, _ in calls[:bypassed_at + 1]) <= 1 << 17, calls
        calls.clear()
        few = session.sql("SELECT count(*) FROM t WHERE x % 300 = 0 AND s <> 'z'").execute()
        assert few.result.column(0)[0].as_py() == 1000
        assert not any(bypassed for _, bypassed in calls)
        assert "rows_skipped_prefilter=299000" in few.explain_analyze()
    finally:
        _Prefilter.apply = apply


def test_a_whole_cheap_predicate_stays_in_the_scan_while_it_drops_any_row(tmp_path):
    """Cheap conjuncts that are the filter's whole predicate are tested on every batch as
    long as they drop rows (the filter above then copies nothing), even at 99% kept; when
    they keep every row of the first 65,536 they stop, as a partial pass stops at 95%."""
    n = 300_000
    table = pa.table({"s": pa.array(["a", "b", "c"] * (n // 3)), "x": np.arange(n)})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=50_000)
    session = ps.Session(target_partitions=1)
    session.register_parquet("t", str(tmp_path / "t.parquet"))
    calls = []
    apply = _Prefilter.apply

    def counted(self, batch, metrics, stored_as):
        out = apply(self, batch, metrics, stored_as)
        calls.append((batch.num_rows, self.bypassed, self.whole))
        return out
    _Prefilter.apply = counted
    try:
        sql = "SELECT s, count(*) FROM t WHERE x % 100 <> 0 GROUP BY s ORDER BY s"
        most = session.sql(sql).execute()
        assert most.result.column(1).to_pylist() == [99_000] * 3
        assert calls and all(whole and not bypassed for _, bypassed, whole in calls), calls
        assert "rows_skipped_prefilter=3000" in most.explain_analyze()
        assert_same(most.result, run_duckdb(sql, {"t": table}), ordered=True, sql=sql)
        calls.clear()
        every = session.sql("SELECT s, count(*) FROM t WHERE x >= 0 GROUP BY s")
        assert sorted(every.to_arrow().column(1).to_pylist()) == [100_000] * 3
        bypassed_at = next(i for i, (_, bypassed, _) in enumerate(calls) if bypassed)
        assert sum(rows for rows, _, _ in calls[:bypassed_at + 1]) <= 1 << 17, calls
    finally:
        _Prefilter.apply = apply


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
def test_what_the_early_pass_leaves_is_coalesced_in_order(every_batch, batch_size, tmp_path):
    """Q12's date conditions leave ~1,000 of each 65,536 rows read: the scan joins such
    leftovers into batches of ``batch_size`` rows (fewer batches for the operators above),
    in the order read."""
    n = 20_000
    table = pa.table({"s": pa.array(["a", "b", None, "c"] * (n // 4)), "x": np.arange(n)})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=3_000)
    session = ps.Session(target_partitions=1, batch_size=batch_size)
    session.register_parquet("t", str(tmp_path / "t.parquet"))
    sql = "SELECT x FROM t WHERE x % 50 < 2 AND s <> 'z'"
    run = session.sql(sql).execute()
    scan = next(line for line in run.explain_analyze().splitlines() if "DataSourceExec" in line)
    assert "rows_skipped_prefilter=" in scan, scan
    kept = run.result.column("x").to_pylist()
    # x % 50 = 0 has s 'a' or NULL, x % 50 = 1 'b' or 'c'
    assert kept == sorted(kept) and len(kept) == n // 50 + n // 100
    assert_same(run.result, run_duckdb(sql, {"t": table}), ordered=False, sql=sql)
    # every batch but the last holds at least batch_size rows (read: 3,000 a row group)
    rows, batches = (int(scan.split(f"{metric}=")[1].split(",")[0])
                     for metric in ("output_rows", "output_batches"))
    assert rows == 2 * n // 50 and batches <= -(-rows // batch_size), scan
