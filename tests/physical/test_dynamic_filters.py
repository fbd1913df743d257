"""Dynamic filters: the build side of a join and a top-k bound prune the scan below them."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps


@pytest.fixture(scope="module")
def sorted_parquet(tmp_path_factory):
    path = tmp_path_factory.mktemp("dyn") / "facts.parquet"
    n = 200_000
    table = pa.table({"k": np.arange(n), "v": np.arange(n) % 97,
                      "f": np.where(np.arange(n) % 1000 == 0, np.nan, np.arange(n) * 0.5)})
    pq.write_table(table, path, row_group_size=10_000)
    return path


def _metric(plan_text: str, name: str) -> int:
    return sum(int(x) for x in re.findall(rf"{name}=(\d+)", plan_text))


@pytest.mark.parametrize("partitions", [1, 2])
def test_join_build_range_prunes_probe_row_groups(sorted_parquet, partitions):
    s = ps.Session(target_partitions=partitions)
    s.register_parquet("facts", sorted_parquet)
    dims = pa.table({"k": [150_010, 150_020, 150_500], "name": ["a", "b", "c"]})
    s.register("dims", dims)
    sql = "SELECT name, v FROM facts JOIN dims USING (k) ORDER BY name"
    run = s.sql(sql).execute()
    text = run.explain_analyze()
    assert "dynamic_filters=[k from HashJoin" in text
    assert _metric(text, "units_pruned_dynamic") >= 19  # 20 row groups, 1 can match
    con = duckdb.connect()
    con.register("dims", dims)
    expected = con.sql(f"SELECT name, v FROM read_parquet('{sorted_parquet}') "
                       "JOIN dims USING (k) ORDER BY name").fetchall()
    assert [tuple(r.values()) for r in run.result.to_pylist()] == expected


def test_join_filter_keeps_nan_keys_and_empty_build_prunes_everything(sorted_parquet):
    s = ps.Session(target_partitions=1)
    s.register_parquet("facts", sorted_parquet)
    s.register("nan_dims", pa.table({"f": [float("nan"), 10.0]}))
    got = s.sql("SELECT count(*) FROM facts JOIN nan_dims USING (f)").to_arrow()
    assert got.column(0)[0].as_py() == 200 + 1  # NaN joins NaN (like DuckDB), 10.0 once
    s.register("no_dims", pa.table({"k": pa.array([], pa.int64())}))
    run = s.sql("SELECT count(*) FROM facts JOIN no_dims USING (k)").execute()
    assert run.result.column(0)[0].as_py() == 0
    assert _metric(run.explain_analyze(), "rows_read") == 0


def test_outer_side_of_a_join_is_never_filtered(sorted_parquet):
    s = ps.Session(target_partitions=1)
    s.register_parquet("facts", sorted_parquet)
    s.register("dims", pa.table({"k": [5], "name": ["x"]}))
    got = s.sql("SELECT count(*), count(name) FROM facts LEFT JOIN dims USING (k)").to_arrow()
    assert got.to_pylist() == [{"count_star()": 200_000, "count(name)": 1}] or \
        list(got.to_pylist()[0].values()) == [200_000, 1]


@pytest.fixture(scope="module")
def limit_parquet(tmp_path_factory):
    path = tmp_path_factory.mktemp("limit") / "big.parquet"
    n = 2_000_000
    rng = np.random.default_rng(7)
    x = rng.integers(0, 50_000, n).astype(object)  # ties
    x[rng.random(n) < 0.01] = None                  # NULLs
    table = pa.table({"x": pa.array(list(x), pa.int64()), "y": np.arange(n)})
    pq.write_table(table, path, row_group_size=100_000)
    return path, table


@pytest.mark.parametrize("partitions", [1, 2])
def test_limit_reads_only_what_it_must(limit_parquet, partitions):
    path, _ = limit_parquet
    s = ps.Session(target_partitions=partitions)
    s.register_parquet("big", path)
    text = s.sql("SELECT * FROM big LIMIT 10").explain(analyze=True)
    assert _metric(text, "rows_read") <= 10 * partitions


@pytest.mark.parametrize("partitions", [1, 2])
def test_topk_on_a_sorted_column_stops_reading_early(limit_parquet, partitions):
    path, _ = limit_parquet
    s = ps.Session(target_partitions=partitions)
    s.register_parquet("big", path)
    run = s.sql("SELECT y FROM big ORDER BY y LIMIT 10").execute()
    assert run.result.column(0).to_pylist() == list(range(10))
    text = run.explain_analyze()
    assert "SortExec: TopK(fetch=10)" in text
    assert _metric(text, "units_pruned_dynamic") >= 20 - 2 * partitions
    assert _metric(text, "rows_read") <= 200_000 * partitions


@pytest.mark.parametrize("order", ["x", "x DESC", "x NULLS FIRST", "x DESC NULLS LAST, y DESC"])
def test_topk_with_ties_and_nulls_matches_duckdb(limit_parquet, order):
    path, _ = limit_parquet
    s = ps.Session(target_partitions=2)
    s.register_parquet("big", path)
    sql = f"SELECT x, y FROM big ORDER BY {order}, y LIMIT 25"
    run = s.sql(sql).execute()
    expected = duckdb.sql(sql.replace("FROM big", f"FROM read_parquet('{path}')")).fetchall()
    assert [tuple(r.values()) for r in run.result.to_pylist()] == expected
    if "NULLS FIRST" not in order:  # a NULLS FIRST top-k takes NULLs: no bound applies
        assert _metric(run.explain_analyze(), "rows_read") < 2_000_000


@pytest.mark.parametrize("partitions, batch_size", [(1, 8192), (2, 8192), (3, 7), (1, 3)])
def test_small_filtered_batches_are_gathered_in_order(sorted_parquet, partitions, batch_size):
    """A join key filter keeping every 500th row leaves ~20 rows of each 10,000-row row
    group: the scan hands on batches of about batch_size rows (fewer batches for every
    operator above to pay for), in the order they were read."""
    s = ps.Session(target_partitions=partitions, batch_size=batch_size)
    s.register_parquet("facts", sorted_parquet)
    keys = np.arange(0, 200_000, 500)
    dims = pa.table({"k": keys, "name": [f"n{k}" for k in keys]})
    s.register("dims", dims)
    sql = "SELECT k, v, name FROM facts JOIN dims USING (k)"
    run = s.sql(sql, options={"dynamic_filter_max_keys": 1 << 20}).execute()
    scan = next(line for line in run.explain_analyze().splitlines()
                if "table=facts" in line)
    assert "from HashJoin" in scan and _metric(scan, "rows_read") == len(keys)
    batches = _metric(scan, "output_batches")
    if batch_size == 8192:
        assert batches <= partitions, scan  # 400 rows: one batch per partition
    else:
        assert batches >= len(keys) // batch_size, scan
    assert sorted(run.result.column("k").to_pylist()) == keys.tolist()
    # one partition reads the row groups in order: the rows come out in key order
    if partitions == 1:
        assert run.result.column("k").to_pylist() == keys.tolist()
