"""Hash aggregation on compiled group ids against DuckDB: NULL keys as a group of their own,
duplicate keys, keys that collide in the hash table, keys in a narrow range (the array
table) and spread wide (hashed), composite keys, empty input, many groups spanning batches,
at partitions 1/2/3/8 and batch sizes 1/3/7/8192."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from tests.differential.colliding_keys import colliding_keys
from tests.differential.harness import check


def _tables() -> dict[str, pa.Table]:
    rng = np.random.default_rng(21)
    n = 300
    wide = rng.choice(colliding_keys(10, 5) + [-(1 << 62), (1 << 62)], n).tolist()
    narrow = rng.integers(-5, 40, n).tolist()  # a range table
    t = pa.table({
        "wide": pa.array([None if i % 11 == 0 else v for i, v in enumerate(wide)], pa.int64()),
        "narrow": pa.array([None if i % 13 == 0 else v for i, v in enumerate(narrow)],
                           pa.int32()),
        "d": pa.array(rng.integers(18000, 18010, n).astype("int32"), pa.int32()).cast(
            pa.date32()),
        "s": pa.array([None if i % 7 == 0 else f"s{v % 5}" for i, v in enumerate(narrow)]),
        "v": pa.array([None if i % 5 == 0 else int(x) for i, x in
                       enumerate(rng.integers(-1000, 1000, n))], pa.int64()),
        "m": pa.array([None if i % 6 == 0 else Decimal(int(x)).scaleb(-2) for i, x in
                       enumerate(rng.integers(-10**6, 10**6, n))], pa.decimal128(12, 2)),
        "f": pa.array([None if i % 9 == 0 else float(x) for i, x in
                       enumerate(rng.normal(size=n))]),
    })
    many = np.arange(20000, dtype=np.int64)
    rng.shuffle(many)
    big = pa.table({"k": pa.array(np.concatenate([many, many[:5000]])),
                    "v": pa.array(np.arange(25000, dtype=np.int64) % 97)})
    return {"t": t, "e": t.slice(0, 0), "big": big}


QUERIES = [
    "SELECT wide, sum(v), count(v), count(*), min(v), max(v), avg(v) FROM t GROUP BY wide",
    "SELECT narrow, sum(m), avg(m), min(m), max(m), sum(f), avg(f) FROM t GROUP BY narrow",
    "SELECT wide, narrow, d, sum(v), min(d), max(d), count(m) FROM t GROUP BY wide, narrow, d",
    "SELECT narrow, s, sum(v), max(f), count(DISTINCT v), median(v) FROM t GROUP BY narrow, s",
    "SELECT wide, sum(v) FROM e GROUP BY wide",
    "SELECT sum(v), avg(m), min(d), count(*) FROM e",
    "SELECT k, sum(v), count(*) FROM big GROUP BY k HAVING count(*) > 1",
    "SELECT count(*), sum(c) FROM (SELECT k, count(*) AS c FROM big GROUP BY k)",
    "SELECT v % 7 AS g, sum(k), min(k), max(k) FROM big GROUP BY g",
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_group_kernels_match_duckdb(sql, partitions, batch_size):
    if batch_size < 7 and "big" in sql:
        batch_size *= 97  # 25k rows in batches of one take minutes; still many batches
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)


def test_integer_sum_past_int64_leaves_the_kernel_for_an_exact_sum():
    """The int64 scatter kernel reports a wrapped group; the 128-bit path sums it exactly."""
    from tests.differential.harness import run_plansight

    t = pa.table({"k": pa.array([1, 1, 2], pa.int64()),
                  "v": pa.array([(1 << 62), (1 << 62), 1], pa.int64())})
    result = run_plansight("SELECT k, sum(v) FROM t GROUP BY k ORDER BY k", {"t": t})
    assert [int(v) for v in result.column(1).to_pylist()] == [1 << 63, 1]


def test_take_rows_takes_chunk_by_chunk_in_the_rows_order():
    """The group keys' first rows taken per chunk give ``take``'s values, in the rows' order
    (ascending or not, repeated), across empty chunks and NULLs."""
    from plansight.engine.functions.grouped_kernels import take_rows

    rng = np.random.default_rng(3)
    for _ in range(200):
        sizes = rng.integers(0, 6, rng.integers(1, 5))
        chunks = [pa.array([None if rng.random() < 0.2 else f"s{rng.integers(0, 100)}"
                            for _ in range(size)], pa.string()) for size in sizes]
        column = pa.chunked_array(chunks, pa.string())
        if len(column) == 0:
            continue
        rows = rng.integers(0, len(column), rng.integers(1, 10)).astype(np.int64)
        for taken in (rows, np.sort(rows)):  # ascending: per chunk; else Arrow's take
            assert take_rows(column, taken).to_pylist() == \
                column.take(pa.array(taken)).to_pylist()


def test_avg_of_integers_and_decimals_left_to_arrow_agrees_with_it():
    """The kernels take no AVG of integers or decimals, nor its double partial sum (the
    planner's exact_avg rewrites those AVGs to SUM and COUNT): a direct grouped call still
    answers, through Arrow's path, as that path does alone, NULL keys and values included."""
    from plansight.engine.functions.aggregate import AggregateSpec, aggregate_table

    t = _tables()["t"]
    specs = [AggregateSpec(func, column, f"{func}_{column}", pa.float64())
             for func in ("avg", "sum") for column in ("v", "m", "narrow")]
    compiled = aggregate_table(t, ["s"], specs).sort_by("s")
    arrow = aggregate_table(t, ["s"], specs, compiled=False).sort_by("s")
    assert compiled.num_rows == 6
    for spec in specs:
        got = compiled[spec.output].to_pylist()
        expected = arrow[spec.output].to_pylist()
        assert got == pytest.approx(expected, rel=1e-12), spec
