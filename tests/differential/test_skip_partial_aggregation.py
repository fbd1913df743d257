"""A partial aggregate whose keys barely repeat hands each row on as its own state (skipping
partial aggregation): against DuckDB for every aggregate kind that converts a row to a state,
with NULLs, duplicates, empty input, all-distinct and few-distinct keys, at partitions
1/2/3/8 and batch sizes 1/3/7/8192; and the skip shows in EXPLAIN ANALYZE only when it
happened."""

from __future__ import annotations

import re
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.functions.aggregate import AggregateSpec, has_row_states
from plansight.engine.physical.aggregates.aggregate import AggregateExec, _HashPartition
from tests.differential.harness import check


def _tables(n: int = 120) -> dict[str, pa.Table]:
    r = np.random.default_rng(11)
    # nearly distinct: every 7th row repeats its predecessor's key, every 13th key is NULL
    near = [None if i % 13 == 0 else (i - 1 if i % 7 == 0 else i) for i in range(n)]
    return {"t": pa.table({
        "u": pa.array(range(n), pa.int64()),  # all distinct
        "k": pa.array(near, pa.int64()),
        "f": pa.array([i % 3 for i in range(n)], pa.int64()),  # few distinct
        "s": pa.array([None if i % 9 == 0 else f"s{i % 50}" for i in range(n)]),
        "v": pa.array([None if i % 11 == 0 else x for i, x in
                       enumerate(r.integers(-500, 500, n).tolist())], pa.int64()),
        "d": pa.array([None if i % 10 == 0 else round(x, 2) for i, x in
                       enumerate(r.random(n))], pa.float64()),
        "m": pa.array([None if i % 8 == 0 else Decimal(x).scaleb(-2) for i, x in
                       enumerate(r.integers(-99999, 99999, n).tolist())], pa.decimal128(12, 2)),
        "b": pa.array([None if i % 6 == 0 else x > 0.5 for i, x in enumerate(r.random(n))]),
    })}


AGGREGATES = ("count(*) AS c, count(v) AS cv, sum(v) AS sv, sum(d) AS sd, sum(m) AS sm, "
              "avg(v) AS av, avg(d) AS ad, avg(m) AS am, min(v) AS mi, max(s) AS mx, "
              "min(m) AS mm, max(d) AS md, bool_and(b) AS ba, bool_or(b) AS bo, sum(b) AS sb, "
              "bit_and(v) AS ba2, bit_or(v) AS bo2, bit_xor(v) AS bx, "
              "sum(v) FILTER (WHERE d < 0.5) AS fs")

QUERIES = [
    f"SELECT u, {AGGREGATES} FROM t GROUP BY u",  # all distinct
    f"SELECT k, {AGGREGATES} FROM t GROUP BY k",  # duplicates and NULL keys
    f"SELECT f, {AGGREGATES} FROM t GROUP BY f",  # few distinct
    f"SELECT k, s, {AGGREGATES} FROM t GROUP BY k, s",  # two keys, a string with NULLs
    f"SELECT k, {AGGREGATES} FROM t WHERE v > 10000 GROUP BY k",  # empty input
    "SELECT k, any_value(u // 1000) AS a, count(*) AS c FROM t GROUP BY k",
    # co-moments have no one-row state: the partial aggregates as usual
    "SELECT k, corr(v, d) AS r, sum(v) AS s FROM t GROUP BY k",
    "SELECT k, count(DISTINCT v) AS n, string_agg(s, ',' ORDER BY s) AS a FROM t GROUP BY k",
    "SELECT n, count(*) AS c FROM (SELECT k, count(*) AS n FROM t GROUP BY k) GROUP BY n",
]


def _force(monkeypatch, mode: str) -> None:
    """``always``: every partial aggregate skips from its second batch; ``probed``: the
    estimate is ignored and a first chunk of 5 rows decides at the usual ratio."""
    if mode == "always":
        monkeypatch.setattr(_HashPartition, "SKIP_RATIO", -1.0)
    else:
        monkeypatch.setattr(_HashPartition, "_estimated_ratio", lambda self: None)
        monkeypatch.setattr(AggregateExec, "PARTIAL_CHUNK_ROWS", 5)
        monkeypatch.setattr(_HashPartition, "SKIP_PROBE_ROWS", 1)


@pytest.mark.parametrize("mode", ["always", "probed"])
@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_skipped_partial_aggregation_matches_duckdb(sql, partitions, batch_size, mode,
                                                    monkeypatch):
    _force(monkeypatch, mode)
    # 10-row record batches: every partition's partial sees several, so a first chunk decides
    # and the rest is skipped (or not)
    tables = {name: pa.Table.from_batches(table.to_batches(max_chunksize=10))
              for name, table in _tables().items()}
    check(sql, tables, target_partitions=partitions, batch_size=batch_size)


def _skipped(sql: str, tables: dict[str, pa.Table], **options) -> list[int]:
    s = ps.Session(target_partitions=2, batch_size=64, **options)
    for name, table in tables.items():
        s.register(name, table)
    text = s.sql(sql).explain(analyze=True)
    assert "mode=Partial" in text
    return [int(n) for n in re.findall(r"skipped_aggregation_rows=(\d+)", text)]


def test_distinct_keys_skip_from_the_estimate():
    # each of the 2 partitions aggregates its first batch (64 x 16 rows, the scan widened
    # under an aggregate) to check the estimate, then hands on its rest
    assert _skipped("SELECT u, sum(v) FROM t GROUP BY u", _tables(5000)) == [5000 - 2 * 1024]


def test_a_first_batch_of_repeating_keys_overrules_the_estimate(monkeypatch):
    monkeypatch.setattr(_HashPartition, "_estimated_ratio", lambda self: 1.0)
    assert _skipped("SELECT f, sum(v) FROM t GROUP BY f", _tables(5000)) == []
    assert _skipped("SELECT u, sum(v) FROM t GROUP BY u", _tables(5000)) == [5000 - 2 * 1024]


def test_distinct_keys_skip_after_the_first_chunk(monkeypatch):
    monkeypatch.setattr(_HashPartition, "_estimated_ratio", lambda self: None)
    monkeypatch.setattr(AggregateExec, "PARTIAL_CHUNK_ROWS", 1000)
    monkeypatch.setattr(_HashPartition, "SKIP_PROBE_ROWS", 1000)
    # each of the 2 partitions aggregates its first chunk (16 batches of 64 rows: 1,024),
    # then hands on its rest
    assert _skipped("SELECT u, sum(v), avg(d) FROM t GROUP BY u", _tables(5000)) == \
        [5000 - 2 * 1024]


def test_repeating_keys_are_aggregated(monkeypatch):
    assert _skipped("SELECT f, sum(v) FROM t GROUP BY f", _tables(5000)) == []
    monkeypatch.setattr(_HashPartition, "_estimated_ratio", lambda self: None)
    monkeypatch.setattr(AggregateExec, "PARTIAL_CHUNK_ROWS", 1000)
    monkeypatch.setattr(_HashPartition, "SKIP_PROBE_ROWS", 1000)
    assert _skipped("SELECT f, sum(v) FROM t GROUP BY f", _tables(5000)) == []


def test_co_moments_are_never_skipped():
    assert _skipped("SELECT u, corr(v, d) FROM t GROUP BY u", _tables(5000)) == []
    assert not has_row_states(AggregateSpec("corr", "v", "r", pa.float64()))
    assert has_row_states(AggregateSpec("sum", "v", "r", pa.int64()))
