"""Windows under a memory limit far below the data: same rows as an unlimited run.

The default HashWindowAggExec holds its whole input; refused by the pool it sorts (spilling
runs) into the sorted executors. A partition larger than memory streams (bounded frames) or
is folded over a spill file (whole-partition aggregates); anything else fails with
ResourcesExhausted. Every run asserts, from the ReservationChanged events, that the pool never
held more than the limit, and that no spill file is left behind.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.events import ReservationChanged, SpillWritten
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.exec.spill import SpillWriter
from plansight.engine.logical.expr import Column, SortKey, WindowCall
from plansight.engine.physical.plan import collect_partition
from plansight.engine.physical.sorts import sort
from plansight.engine.physical.values import ValuesExec
from plansight.engine.physical.windows import window_hash_agg
from plansight.engine.physical.windows.window_agg import WindowAggExec
from plansight.engine.physical.windows.window_hash_agg import HashWindowAggExec
from plansight.errors import Cancelled, ExecutionError, ResourcesExhausted
from tests.differential.harness import assert_same, run_duckdb
from tests.session_defaults import session_defaults

LIMIT = 4_000_000
ROWS = 640_000  # ~20 MB: 5x the limit


@pytest.fixture(scope="module")
def big() -> pa.Table:
    rng = np.random.default_rng(5)
    # v: multiples of 1/4 with NULLs, so every sum is exact in any order
    v = pa.array(rng.integers(-400, 400, ROWS) / 4, mask=rng.random(ROWS) < 0.02)
    g = rng.integers(0, 500, ROWS)
    # h: one partition of 90% of the rows, the rest in small ones around it
    h = np.where(rng.random(ROWS) < 0.9, 250, rng.integers(0, 500, ROWS))
    table = pa.table({"o": rng.permutation(ROWS), "g": g, "h": h, "v": v})
    assert table.nbytes > 5 * LIMIT
    return table


class Recorder:
    """Observer keeping the pool's largest reserved total and the spill files written."""

    def __init__(self):
        self.max_total = 0
        self.spills = 0

    def __call__(self, event):
        if isinstance(event, ReservationChanged):
            # a lagging observer may see only a consumer's latest event: pool_peak keeps the
            # peak that coalesced events carried
            self.max_total = max(self.max_total, event.pool_total, event.pool_peak)
        elif isinstance(event, SpillWritten):
            self.spills += 1


def _session(table, tmp_path, limit=LIMIT, partitions=1, batch_size=65536) -> ps.Session:
    s = ps.Session(target_partitions=partitions, memory_limit=limit, batch_size=batch_size,
                   spill_dir=str(tmp_path))
    s.register("t", table)
    return s


def _spilled(run) -> dict[str, int]:
    """Spill metrics as EXPLAIN ANALYZE shows them, summed over the plan's operators."""
    text = run.explain_analyze()
    return {name: sum(int(x) for x in re.findall(rf"{name}=(\d+)", text))
            for name in ("spill_count", "spilled_rows", "spilled_bytes")}


def _run_limited(table, sql, tmp_path, **options):
    recorder = Recorder()
    run = _session(table, tmp_path, **options).sql(sql).execute(observer=recorder)
    assert 0 < recorder.max_total <= options.get("limit", LIMIT)
    assert run.ctx.memory_pool.reserved == 0
    assert list(tmp_path.iterdir()) == []  # spill files and the query's folder removed
    return run, recorder


def _unlimited(table, sql, partitions=1) -> pa.Table:
    s = ps.Session(target_partitions=partitions, memory_limit="64GB", batch_size=65536)
    s.register("t", table)
    return s.sql(sql).to_arrow()


def _same_rows(got: pa.Table, expected: pa.Table) -> None:
    """Equal as sets of rows (no ORDER BY): both sorted by the unique column ``o``."""
    assert got.sort_by("o").equals(expected.sort_by("o"))


WHOLE = ("SELECT o, sum(v) OVER () AS s, count(v) OVER () AS c, count(*) OVER () AS n, "
         "avg(v) OVER () AS a, min(v) OVER () AS lo, max(v) OVER () AS hi, "
         "sum(v) FILTER (WHERE g < 100) OVER () AS f FROM t")


def test_whole_partition_aggregates_over_one_giant_partition(big, tmp_path):
    run, recorder = _run_limited(big, WHOLE, tmp_path)
    _same_rows(run.result, _unlimited(big, WHOLE))
    spilled = _spilled(run)
    assert spilled["spill_count"] > 0 and spilled["spilled_rows"] >= ROWS
    assert recorder.spills == len(run.spills) > 0
    totals = run.ctx.metrics.snapshot().values()  # every operator, internal stages too
    assert sum(m.get("spilled_rows", 0) for m in totals) == spilled["spilled_rows"]
    assert any(operator == "WindowAggExec" for operator, *_ in run.spills)


def test_partitioned_whole_aggregates_with_one_giant_partition(big, tmp_path):
    # the giant partition is followed by small ones: rows read past it must not be lost
    sql = ("SELECT o, h, sum(v) OVER (PARTITION BY h) AS s, max(v) OVER (PARTITION BY h) AS m, "
           "count(*) OVER (PARTITION BY h) AS n FROM t")
    run, _ = _run_limited(big, sql, tmp_path, partitions=2)
    _same_rows(run.result, _unlimited(big, sql, partitions=2))
    assert _spilled(run)["spill_count"] > 0


MOVING = ("SELECT o, sum(v) OVER (ORDER BY o ROWS 100 PRECEDING) AS s, "
          "min(v) OVER (ORDER BY o ROWS 100 PRECEDING) AS lo, "
          "count(v) OVER (ORDER BY o ROWS BETWEEN 100 PRECEDING AND 3 FOLLOWING) AS c FROM t")


def test_moving_frames_over_one_giant_partition_through_the_hash_executor(big, tmp_path):
    run, _ = _run_limited(big, MOVING, tmp_path)
    assert isinstance(run.plan.children()[0], HashWindowAggExec)
    _same_rows(run.result, _unlimited(big, MOVING))
    spilled = _spilled(run)  # the fallback's sorts, shown on HashWindowAggExec
    assert spilled["spill_count"] > 0
    totals = run.ctx.metrics.snapshot().values()  # moved from the internal stages, not copied
    assert sum(m.get("spill_count", 0) for m in totals) == spilled["spill_count"]
    assert sum(rows for _, _, rows, _ in run.spills) == spilled["spilled_rows"]
    assert "HashWindowAggExec" in run.explain_analyze().split("spill_count=")[0]


@pytest.mark.parametrize("executor", ["partition", "sorted"])
def test_moving_frames_stream_through_the_sorted_executors(big, tmp_path, monkeypatch,
                                                           executor):
    # WindowAggExec meets one partition larger than memory and streams it; the streaming
    # executor never holds more than its frames need
    expected = _unlimited(big, MOVING)
    session_defaults(monkeypatch, window_executor=executor)
    run, _ = _run_limited(big, MOVING, tmp_path)
    _same_rows(run.result, expected)


OFFSET_FRAMES = ("SELECT o, sum(v) OVER (ORDER BY o GROUPS BETWEEN 50 PRECEDING AND 2 FOLLOWING) "
                 "AS s, count(v) OVER (ORDER BY o RANGE BETWEEN 30 PRECEDING AND 30 FOLLOWING) "
                 "AS c, max(v) OVER (ORDER BY o RANGE BETWEEN UNBOUNDED PRECEDING AND 5 "
                 "PRECEDING) AS m FROM t")


@pytest.mark.parametrize("executor", ["auto", "partition", "sorted"])
def test_groups_and_range_offset_frames_stream_over_one_giant_partition(big, tmp_path,
                                                                       monkeypatch, executor):
    # frames a bounded number of peer groups / key units ahead stream like ROWS frames do
    expected = _unlimited(big, OFFSET_FRAMES)
    session_defaults(monkeypatch, window_executor=executor)
    run, _ = _run_limited(big, OFFSET_FRAMES, tmp_path)
    _same_rows(run.result, expected)


RANKING = ("SELECT o, g, rank() OVER (PARTITION BY g ORDER BY v DESC) AS rk, "
           "dense_rank() OVER (PARTITION BY g ORDER BY v DESC) AS dr, "
           "row_number() OVER (PARTITION BY g ORDER BY o) AS rn, "
           "lag(v, 2) OVER (PARTITION BY g ORDER BY o) AS lg, "
           "sum(v) OVER (PARTITION BY g ORDER BY o) AS running FROM t")


def test_ranking_and_lag_over_many_partitions(big, tmp_path):
    # two sorts in a row, with window stages between them that cannot spill
    run, _ = _run_limited(big, RANKING, tmp_path, partitions=2)
    assert isinstance(run.plan.children()[0], HashWindowAggExec)
    _same_rows(run.result, _unlimited(big, RANKING))
    assert _spilled(run)["spill_count"] > 0


def test_whole_partition_aggregates_reuse_the_running_frames_sort(big, tmp_path, monkeypatch):
    # rows sorted by (g, o) for the running frame are sorted by g: the whole-partition
    # aggregates over g need no second sort (which spilled every row again), whatever the
    # order of the windows in the query
    sql = ("SELECT o, count(*) OVER (PARTITION BY g) AS n, "
           "sum(v) OVER (PARTITION BY g ORDER BY o) AS running, "
           "max(v) OVER (PARTITION BY g) AS top FROM t")
    sorts = []

    class CountedSortExec(sort.SortExec):
        def __init__(self, keys, *args, **kwargs):
            sorts.append([str(key) for key in keys])
            super().__init__(keys, *args, **kwargs)

    monkeypatch.setattr(window_hash_agg, "SortExec", CountedSortExec)  # its sorting fallback
    run, _ = _run_limited(big, sql, tmp_path)
    assert isinstance(run.plan.children()[0], HashWindowAggExec)
    assert len(sorts) == 1 and len(sorts[0]) == 2  # one sort, by (g, o)
    spilled = _spilled(run)
    assert 0 < spilled["spilled_rows"] < 3 * ROWS  # runs and one merge level at most
    monkeypatch.undo()
    _same_rows(run.result, _unlimited(big, sql))


def test_a_spilling_aggregate_above_the_window_leaves_its_stages_room(big, tmp_path):
    # the aggregate grows until the pool says no; the window's streaming stage, which cannot
    # spill, holds a floor taken before any input arrived
    sql = ("SELECT g, count(*) AS n, sum(running) AS total FROM (SELECT g, "
           "sum(v) OVER (PARTITION BY g ORDER BY o) AS running FROM t) AS w GROUP BY g")
    recorder = Recorder()
    limit = 2_000_000  # without the floor: ResourcesExhausted from BoundedWindowAggExec
    run = _session(big, tmp_path, batch_size=8192, limit=limit).sql(sql).execute(
        observer=recorder)
    assert recorder.max_total <= limit and recorder.spills > 0
    assert run.result.sort_by("g").equals(_unlimited(big, sql).sort_by("g"))
    assert list(tmp_path.iterdir()) == []


def test_hash_executor_under_a_small_limit_matches_duckdb(tmp_path):
    rng = np.random.default_rng(11)
    n = 40_000
    table = pa.table({
        "o": np.arange(n), "g": pa.array(rng.integers(0, 40, n), mask=rng.random(n) < 0.05),
        "v": pa.array(rng.integers(0, 50, n).astype(float), mask=rng.random(n) < 0.05),
        "s": pa.array([f"s{x:03d}" for x in rng.integers(0, 300, n)])})
    sql = ("SELECT o, sum(v) OVER (PARTITION BY g) AS a, "
           "rank() OVER (PARTITION BY g ORDER BY s DESC NULLS FIRST) AS b, "
           "min(v) OVER (PARTITION BY g ORDER BY o ROWS 100 PRECEDING) AS c, "
           "lead(s) OVER (PARTITION BY g ORDER BY o) AS d, avg(v) OVER () AS e, "
           "count(*) OVER (ORDER BY v RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS f "
           "FROM t")
    run, _ = _run_limited(table, sql, tmp_path, limit=1_000_000, batch_size=8192)
    assert _spilled(run)["spill_count"] > 0
    assert_same(run.result, run_duckdb(sql, {"t": table}), ordered=False, sql=sql)


@pytest.mark.parametrize("sql, window", [
    (("SELECT o, sum(v) OVER (ORDER BY o ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) "
      "AS s FROM t"), "UNBOUNDED FOLLOWING"),
    ("SELECT o, count(DISTINCT g) OVER (ORDER BY o ROWS 100 PRECEDING) AS d FROM t",
     "count"),
    ("SELECT o, stddev(v) OVER () AS d FROM t", "stddev"),
])
def test_a_giant_partition_that_cannot_stream_or_fold_fails_clearly(big, tmp_path, sql, window):
    s = _session(big, tmp_path)
    with pytest.raises(ResourcesExhausted, match=r"WindowAggExec\[0\] could not reserve") as info:
        s.sql(sql).to_arrow()
    assert "needs the whole partition" in str(info.value) and window in str(info.value)
    assert list(tmp_path.iterdir()) == []
    assert s.sql("SELECT count(*) AS n FROM t").to_arrow().column("n").to_pylist() == [ROWS]


def test_no_spill_file_remains_after_a_failure_or_an_interrupt(big, tmp_path, monkeypatch):
    s = _session(big, tmp_path)
    # the row read last fails, after the giant partition was spilled
    last = int(big.column("o")[big.num_rows - 1].as_py())
    bad = (f"SELECT o, sum(v) OVER () AS s, CAST(CASE WHEN o = {last} THEN 'x' ELSE '1' END "
           "AS INTEGER) AS bad FROM t")
    recorder = Recorder()
    with pytest.raises(ExecutionError, match="Could not convert"):
        s.sql(bad).execute(observer=recorder)
    assert list(tmp_path.iterdir()) == []

    finish = SpillWriter.finish

    def interrupting(writer):  # observers run on their own thread: interrupt in the engine
        finish(writer)
        raise KeyboardInterrupt  # what a kernel interrupt looks like in the engine

    monkeypatch.setattr(SpillWriter, "finish", interrupting)
    with pytest.raises(Cancelled):
        s.sql(RANKING).execute()
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    assert s.sql("SELECT count(*) AS n FROM t").to_arrow().column("n").to_pylist() == [ROWS]


# ---------------------------------------------------------------- WindowAggExec on its own

def _window(func, args, partition_by, order_by, out_type):
    return WindowCall(func, tuple(args), out_type, tuple(partition_by), tuple(order_by))


@pytest.mark.parametrize("batch_size", [1, 7, 256])
def test_oversized_partition_between_small_ones_at_batch_boundaries(batch_size):
    # sorted input: small partitions, one partition far larger than the pool, small ones
    keys = np.concatenate([np.repeat([1, 2], 3), np.full(1500, 5), np.repeat([7, 8, 9], 2)])
    n = len(keys)
    values = np.arange(n, dtype=np.int64) % 13
    table = pa.table({"k#1": keys, "v#2": values, "o#3": np.arange(n)})
    k = Column(1, "k", pa.int64())
    v = Column(2, "v", pa.int64())
    o = Column(3, "o", pa.int64())
    windows = [_window("sum", [v], [k], [], pa.int64()),
               _window("row_number", [], [k], [SortKey(o)], pa.int64()),
               _window("lag", [v], [k], [SortKey(o)], pa.int64())]
    outputs = [Column(10 + i, f"w{i}", pa.int64()) for i in range(len(windows))]
    plan = WindowAggExec(windows, outputs, ValuesExec(table), order_keys=[SortKey(o)])
    ctx = TaskContext(SessionConfig(batch_size=batch_size), MemoryPool(12_000))
    got = collect_partition(plan, 0, ctx)
    expected = collect_partition(plan, 0, TaskContext(SessionConfig(), MemoryPool(None)))
    assert got.equals(expected)
    row_numbers = got.column(len(table.schema) + 1).to_pylist()
    assert row_numbers[6:1506] == list(range(1, 1501))
    metrics = ctx.metrics.partitions(plan.operator_id)[0]
    assert metrics["spill_count"] == 1 and metrics["spilled_rows"] == 1500
    assert ctx.memory_pool.reserved == 0 and ctx.memory_pool.peak <= 12_000
    ctx.cleanup()


def test_folded_aggregates_over_a_giant_partition_match_duckdb(tmp_path):
    rng = np.random.default_rng(23)
    n = 30_000
    table = pa.table({
        "o": np.arange(n), "i": pa.array(rng.integers(-5, 100, n), mask=rng.random(n) < 0.1),
        "p": np.where(np.arange(n) < n - 50, 1, 2),  # one giant partition, then a small one
        "s": pa.array([f"s{x:04d}" for x in rng.integers(0, 5000, n)],
                      mask=rng.random(n) < 0.1)})
    over = "OVER (PARTITION BY p)"
    sql = (f"SELECT o, sum(i) FILTER (WHERE i > 1000) {over} AS nothing, "
           f"count(i) FILTER (WHERE i > 1000) {over} AS zero, bool_and(i > -6) {over} AS ba, "
           f"bool_or(i > 98) {over} AS bo, min(s) {over} AS lo, max(s) {over} AS hi, "
           f"avg(i) {over} AS mean, sum(i) {over} AS total, count(*) {over} AS n FROM t")
    run, _ = _run_limited(table, sql, tmp_path, limit=250_000, batch_size=4096)
    assert any(operator == "WindowAggExec" for operator, *_ in run.spills)  # folded
    assert_same(run.result, run_duckdb(sql, {"t": table}), ordered=False, sql=sql)


def test_folded_statistics_over_a_giant_partition_match_duckdb(tmp_path):
    """corr / regr_* fold as co-moment states, bit_* as themselves, batch by batch."""
    rng = np.random.default_rng(29)
    n = 30_000
    x = rng.normal(size=n) * 4 + 100
    table = pa.table({
        "o": np.arange(n), "x": pa.array(x, mask=rng.random(n) < 0.1),
        "y": pa.array(2 * x + rng.normal(size=n), mask=rng.random(n) < 0.1),
        "b": pa.array(rng.integers(0, 1 << 20, n), mask=rng.random(n) < 0.1),
        "p": np.where(np.arange(n) < n - 50, 1, 2)})  # one giant partition, then a small one
    over = "OVER (PARTITION BY p)"
    sql = (f"SELECT o, corr(y, x) {over} AS r, regr_slope(y, x) {over} AS slope, "
           f"regr_intercept(y, x) FILTER (WHERE o % 2 = 0) {over} AS icpt, "
           f"covar_samp(y, x) {over} AS cov, regr_count(y, x) {over} AS n, "
           f"bit_or(b) {over} AS bo, bit_xor(b) {over} AS bx, bit_and(b) {over} AS ba FROM t")
    run, _ = _run_limited(table, sql, tmp_path, limit=250_000, batch_size=4096)
    assert any(operator == "WindowAggExec" for operator, *_ in run.spills)  # folded
    assert_same(run.result, run_duckdb(sql, {"t": table}), ordered=False, sql=sql)
