"""Single and Final hash aggregates compact what they hold to one state row per group every
chunk: TPC-H Q1 at one partition held its whole 6M-row input (509 MiB) for 4 groups."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.physical.aggregates.aggregate import AggregateExec, _HashPartition
from plansight.engine.physical_optimizer.widen_scan_batches import AGGREGATE_BATCH_FACTOR
from tests.differential import corpus
from tests.differential.harness import assert_same, check, run_duckdb
from tests.differential.tables import SMALL


def _wide_table(rows: int, groups: int, seed: int = 11) -> pa.Table:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, groups, rows)
    return pa.table({"g": keys, "v": rng.random(rows),
                     "d": pa.array(rng.integers(-10**6, 10**6, rows), pa.int64())
                     .cast(pa.decimal128(19, 0)).cast(pa.decimal128(12, 0)),
                     "s": pa.array([f"{i:080d}" for i in rng.integers(0, 1 << 40, rows)])})


def test_few_groups_hold_a_chunk_not_the_input():
    table = _wide_table(600_000, groups=7)  # ~65 MB
    session = ps.Session(target_partitions=1)
    session.register("t", table)
    sql = ("SELECT g, count(*) AS n, sum(d) AS sd, avg(v) AS av, max(s) AS top "
           "FROM t GROUP BY g ORDER BY g")
    query = session.sql(sql)
    result = query.to_arrow()
    assert "mode=Single" in query.explain()
    check(sql, {"t": table}, target_partitions=1)
    # held: one chunk of rows, the batch that crossed the bound (a widened scan batch of
    # 131,072 rows, ~15 MB of these 116-byte rows), a grant chunk and 7 states
    batch = table.nbytes // table.num_rows * 8192 * AGGREGATE_BATCH_FACTOR
    bound = AggregateExec.PARTIAL_CHUNK_BYTES + batch + (1 << 20)
    assert query.context.memory_pool.peak < bound, (query.context.memory_pool.peak, bound)
    assert result.num_rows == 7


def test_distinct_keys_stop_compacting_and_stay_right():
    """Most keys new in every chunk: compaction stops after the first (it would only cost)."""
    table = _wide_table(300_000, groups=10**9, seed=12)
    check("SELECT g, count(*) AS n, sum(d) AS sd, min(s) AS lo FROM t GROUP BY g",
          {"t": table}, target_partitions=1)


def test_compacted_states_are_spilled_with_the_rows(monkeypatch, tmp_path):
    """Under a memory limit the states held so far go into the spilled run with the rows."""
    monkeypatch.setattr(AggregateExec, "PARTIAL_CHUNK_ROWS", 100_000)
    compactions = []
    compact = _HashPartition._compact
    monkeypatch.setattr(_HashPartition, "_compact",
                        lambda self, batches: compactions.append(1) or compact(self, batches))
    table = _wide_table(1_200_000, groups=40_000, seed=13)
    sql = "SELECT g, count(*) AS n, sum(d) AS sd, avg(v) AS av FROM t GROUP BY g"
    session = ps.Session(target_partitions=1, memory_limit=6 << 20, spill_dir=str(tmp_path))
    session.register("t", table)
    run = session.sql(sql).execute()
    assert compactions and sum(int(n) for n in re.findall(r"spill_count=(\d+)",
                                                           run.explain_analyze())) > 0
    expected = run_duckdb(sql, {"t": table})
    assert_same(run.result, expected, ordered=False, sql=sql)


@pytest.fixture(params=[0, 1 << 40], ids=["merged", "unmerged"])
def tiny_chunks(monkeypatch, request):
    """Compact every two rows (and never give up), so the small corpus tables compact; the
    chunks' states merged at every compaction, or all left to the final merge."""
    monkeypatch.setattr(AggregateExec, "PARTIAL_CHUNK_ROWS", 2)
    monkeypatch.setattr(_HashPartition, "COMPACT_MAX_RATIO", 1.0)
    monkeypatch.setattr(_HashPartition, "MERGE_STATES_BYTES", request.param)


CONFIGS = [
    pytest.param({"batch_size": 1, "target_partitions": 1}, id="b1p1"),
    pytest.param({"batch_size": 3, "target_partitions": 2}, id="b3p2"),
    pytest.param({"batch_size": 7, "target_partitions": 3}, id="b7p3"),
    pytest.param({"batch_size": 8192, "target_partitions": 8}, id="b8192p8"),
]


@pytest.mark.parametrize("options", CONFIGS)
@pytest.mark.parametrize("sql", [pytest.param(sql, id=f"aggregates-{n}")
                                 for n, sql in enumerate(corpus.AGGREGATES)])
def test_aggregate_corpus_with_compaction_every_two_rows(tiny_chunks, sql, options):
    check(sql, SMALL, **options)


@pytest.mark.parametrize("merge_bytes", [0, None])
def test_chunk_states_merge_only_past_a_chunks_bytes(monkeypatch, merge_bytes):
    """Chunks of 7 groups each: their states wait for the final merge (by default) instead
    of being merged into the states held at every chunk after the first (each merge cost
    more than computing 7 groups' states)."""
    monkeypatch.setattr(AggregateExec, "PARTIAL_CHUNK_ROWS", 100_000)
    if merge_bytes is not None:
        monkeypatch.setattr(_HashPartition, "MERGE_STATES_BYTES", merge_bytes)
    merges, compactions = [], []
    merge, compact = AggregateExec._merge_states, _HashPartition._compact
    monkeypatch.setattr(AggregateExec, "_merge_states",
                        lambda self, table, keys: merges.append(1) or merge(self, table, keys))
    monkeypatch.setattr(_HashPartition, "_compact",
                        lambda self, batches: compactions.append(1) or compact(self, batches))
    table = _wide_table(600_000, groups=7)
    sql = "SELECT g, count(*) AS n, sum(d) AS sd, avg(v) AS av FROM t GROUP BY g"
    session = ps.Session(target_partitions=1, batch_size=8192)
    session.register("t", table)
    query = session.sql(sql)
    result = query.to_arrow()
    assert "mode=Single" in query.explain()
    assert len(compactions) >= 4
    assert len(merges) == (len(compactions) - 1 if merge_bytes == 0 else 0)
    assert_same(result, run_duckdb(sql, {"t": table}), ordered=False, sql=sql)


def _compactions(monkeypatch) -> list[int]:
    """Rows of each chunk compacted, recorded."""
    rows: list[int] = []
    compact = _HashPartition._compact
    monkeypatch.setattr(_HashPartition, "_compact", lambda self, batches: rows.append(
        sum(b.num_rows for b in batches)) or compact(self, batches))
    return rows


def test_groups_expected_as_many_as_rows_are_not_compacted_at_one_chunk(monkeypatch):
    """The estimates say nearly every row is its own group (TPC-H Q10's seven keys): a
    chunk is not compacted (its states would be merged again for little memory saved);
    the rows are aggregated once at the end, as the same query with few groups is not."""
    monkeypatch.setattr(AggregateExec, "PARTIAL_CHUNK_ROWS", 50_000)
    compacted = _compactions(monkeypatch)
    sql = "SELECT g, count(*) AS n, sum(d) AS sd, min(s) AS lo FROM t GROUP BY g"
    distinct = _wide_table(120_000, groups=10**9, seed=14)
    check(sql, {"t": distinct}, target_partitions=1)
    assert compacted == []
    few = _wide_table(120_000, groups=7, seed=14)
    check(sql, {"t": few}, target_partitions=1)
    assert compacted and compacted[0] >= 50_000


@pytest.mark.parametrize("options", CONFIGS)
def test_a_wrong_estimate_still_compacts_within_its_chunks(monkeypatch, options):
    """Should the planner expect no reduction where the groups are few, the rows are held
    up to COMPACT_MAX_CHUNKS chunks, then compacted like any chunk: memory stays bounded,
    and results stay DuckDB's (NULL keys, duplicates, every batch size and partitioning)."""
    monkeypatch.setattr(AggregateExec, "PARTIAL_CHUNK_ROWS", 10)
    monkeypatch.setattr(_HashPartition, "_expects_reduction", lambda self: False)
    compacted = _compactions(monkeypatch)
    keys = [None, 1, 1, 2, None, 3, 2, 2, 1, None] * 9 + [4, 5]
    table = pa.table({"g": pa.array(keys, pa.int64()),
                      "v": pa.array([float(i % 5) if i % 7 else None
                                     for i in range(len(keys))])})
    sql = "SELECT g, count(*) AS n, count(v) AS nv, sum(v) AS sv, max(v) AS mv FROM t GROUP BY g"
    check(sql, {"t": table}, **options)
    # one partition holds all 92 rows (a Final aggregate over partitions sees few states)
    assert compacted or options["target_partitions"] > 1
    assert all(rows >= _HashPartition.COMPACT_MAX_CHUNKS * 10 for rows in compacted), compacted
    check("SELECT g, sum(v) AS sv FROM t WHERE v > 100 GROUP BY g", {"t": table}, **options)
