"""Top-k over input sorted on a prefix of its keys stops reading early (issue 4, item 7), and a
top-k over Parquet reads the row groups that tighten its threshold fastest first (item 4 of
the sorted-sources task): results against DuckDB, reads against the scan metrics."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps
from tests.differential.harness import assert_same

# ----------------------------------------------------------------------------- differential

ORDERINGS = {  # declared order of ``a`` -> how the query orders it
    "a": "a ASC NULLS LAST",
    "a NULLS FIRST": "a ASC NULLS FIRST",
    "a DESC": "a DESC NULLS LAST",
    "a DESC NULLS FIRST": "a DESC NULLS FIRST",
}


def _sorted_table(declared: str, rows: int = 120) -> pa.Table:
    """``a`` sorted as declared, in runs of ties with NULLs at their end; ``b`` random with
    NULLs and ties; ``c`` a row number (to see which rows come back)."""
    rng = np.random.default_rng(7)
    a = np.sort(rng.integers(0, 15, rows - 9)).tolist()
    if "DESC" in declared:
        a = a[::-1]
    a = [None] * 9 + a if "NULLS FIRST" in declared else a + [None] * 9
    b = [None if v % 11 == 0 else int(v % 4) for v in rng.integers(0, 50, rows)]
    return pa.table({"a": pa.array(a, pa.int64()), "b": pa.array(b, pa.int64()),
                     "c": list(range(rows))})


def _queries(order_a: str) -> list[str]:
    return [f"SELECT a, b, c FROM t ORDER BY {order_a}, b, c LIMIT {k}" for k in (1, 4, 9, 40)] + [
        f"SELECT a, b FROM t ORDER BY {order_a}, b DESC NULLS FIRST LIMIT 7",
        f"SELECT a, b, c FROM t ORDER BY {order_a}, b, c LIMIT 5 OFFSET 3",
        f"SELECT a, c FROM t WHERE b IS NOT NULL ORDER BY {order_a}, c DESC LIMIT 12",
        f"SELECT a, b, c FROM t ORDER BY {order_a}, b, c LIMIT 200",  # more than there is
        "SELECT a, b, c FROM t ORDER BY a DESC, b, c LIMIT 6",  # against the declared order
    ]


def _oracle(sql: str, table: pa.Table) -> pa.Table:
    con = duckdb.connect()
    try:
        con.register("t", table)
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()


@pytest.mark.parametrize("declared", list(ORDERINGS))
@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
def test_top_k_on_sorted_prefix_matches_duckdb(declared, batch_size, partitions):
    table = _sorted_table(declared)
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    session.register("t", table, sorted_by=declared)
    for sql in _queries(ORDERINGS[declared]):
        assert_same(session.sql(sql).to_arrow(), _oracle(sql, table), ordered=True, sql=sql)


def _sort_metric(run, name: str) -> int:
    lines = [line for line in run.explain_analyze().splitlines() if "SortExec" in line]
    return sum(int(v) for line in lines for v in re.findall(rf"\b{name}=(\d+)", line))


@pytest.mark.parametrize("declared", list(ORDERINGS))
def test_top_k_on_sorted_prefix_stops_early(declared):
    session = ps.Session(target_partitions=1, batch_size=3)
    session.register("t", _sorted_table(declared), sorted_by=declared)
    run = session.sql(f"SELECT a, b FROM t ORDER BY {ORDERINGS[declared]}, b LIMIT 4").execute()
    assert _sort_metric(run, "early_stop") == 1
    # against the declared order nothing stops early
    flipped = "a DESC" if "DESC" not in declared else "a ASC"
    run = session.sql(f"SELECT a, b FROM t ORDER BY {flipped}, b LIMIT 4").execute()
    assert _sort_metric(run, "early_stop") == 0


def test_prefix_through_a_column_equal_to_the_sorted_one():
    session = ps.Session(target_partitions=1, batch_size=3)
    table = pa.table({"a": [i // 10 for i in range(100)], "b": [i // 10 for i in range(100)],
                      "c": [(i * 7) % 10 for i in range(100)]})
    session.register("t", table, sorted_by="a")
    sql = "SELECT b, c FROM t WHERE a = b ORDER BY b, c LIMIT 3"
    run = session.sql(sql).execute()
    assert run.result.to_pylist() == [{"b": 0, "c": c} for c in (0, 1, 2)]
    assert _sort_metric(run, "early_stop") == 1


# ----------------------------------------------------------------------------- reads (Parquet)

ROWS, GROUP, TIE = 4_000_000, 100_000, 20_000


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """40 row groups of 100K rows; ``a`` ascends in runs of 20K equal values, ``b`` random."""
    a = np.arange(ROWS) // TIE
    b = np.random.default_rng(3).integers(0, 1 << 20, ROWS)
    path = tmp_path_factory.mktemp("sorted") / "sorted.parquet"
    pq.write_table(pa.table({"a": a, "b": b}), path, row_group_size=GROUP)
    return str(path)


def _scan_metric(run, name: str) -> int:
    line = next(line for line in run.explain_analyze().splitlines() if "DataSourceExec" in line)
    return sum(int(v) for v in re.findall(rf"\b{name}=(\d+)", line))


def _check(run, sql: str, path: str) -> None:
    expected = duckdb.sql(sql.replace("FROM t", f"FROM read_parquet('{path}')")).fetchall()
    assert [tuple(r.values()) for r in run.result.to_pylist()] == expected


@pytest.mark.parametrize("partitions", [1, 2, 3])
def test_sorted_prefix_top_k_reads_only_the_first_ties(big, partitions):
    session = ps.Session(target_partitions=partitions)
    session.register_parquet("t", big, sorted_by="a")
    sql = "SELECT a, b FROM t ORDER BY a, b LIMIT 10"
    run = session.sql(sql).execute()
    _check(run, sql, big)
    read = _scan_metric(run, "rows_read") + _scan_metric(run, "rows_skipped_dynamic")
    if partitions == 1:
        # the 20K rows with a = 0 (they tie on the prefix), then one batch that passes it
        assert TIE < read <= TIE + 8192
        assert _scan_metric(run, "units_read") == 1
    # every partition stops after its first run of ties, or is pruned by the threshold
    assert read <= partitions * (TIE + 8192)
    assert _scan_metric(run, "units_read") <= partitions


def test_without_the_declaration_the_same_top_k_reads_a_whole_row_group(big):
    """The control: the dynamic filter alone prunes row groups, but reads the first one."""
    session = ps.Session(target_partitions=1)
    session.register_parquet("t", big)
    run = session.sql("SELECT a, b FROM t ORDER BY a, b LIMIT 10").execute()
    assert _scan_metric(run, "rows_read") + _scan_metric(run, "rows_skipped_dynamic") == GROUP


@pytest.mark.parametrize("declared", [None, "a"])
@pytest.mark.parametrize("partitions", [1, 2, 3])
def test_desc_top_k_reads_the_last_row_groups_first(big, declared, partitions):
    session = ps.Session(target_partitions=partitions)
    session.register_parquet("t", big, sorted_by=declared)
    sql = "SELECT a, b FROM t ORDER BY a DESC, b LIMIT 10"
    run = session.sql(sql).execute()
    _check(run, sql, big)
    assert "read_order=[max(a) DESC]" in run.explain_analyze()
    # each partition reads one row group; the threshold then prunes all the others
    assert _scan_metric(run, "units_read") <= partitions
    assert _scan_metric(run, "units_pruned_dynamic") >= ROWS // GROUP - partitions


@pytest.mark.parametrize("partitions", [1, 3])
def test_asc_top_k_over_descending_row_groups_reads_the_last_first(tmp_path, partitions):
    a = np.arange(1_000_000)[::-1] // 10
    path = str(tmp_path / "desc.parquet")
    pq.write_table(pa.table({"a": a, "b": np.arange(1_000_000)}), path, row_group_size=50_000)
    session = ps.Session(target_partitions=partitions)
    session.register_parquet("t", path)
    sql = "SELECT a, b FROM t ORDER BY a, b LIMIT 5"
    run = session.sql(sql).execute()
    _check(run, sql, path)
    assert _scan_metric(run, "units_read") <= partitions
    assert _scan_metric(run, "units_pruned_dynamic") >= 20 - partitions
