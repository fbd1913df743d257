"""Aggregation spills sorted state runs and re-aggregates them by merging (DuckDB is the oracle).

Many groups under a small limit, a key that holds 90% of the rows (one hash bucket could never
hold it; sorted runs do not care), NULL / NaN / -0.0 keys, multi-column keys with strings,
every aggregate kind, at 1, 2 and 3 partitions. Each run checks: the result equals DuckDB's,
the aggregate itself spilled (metrics and SpillWritten events agree), the pool's reserved total
never went above the limit (from the event stream) and no spill file is left.
"""

from __future__ import annotations

import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import plansight as ps
from plansight.engine.exec.events import ReservationChanged, SpillRead, SpillWritten
from plansight.engine.exec.spill import SpillManager, SpillWriter
from plansight.engine.physical.sorts import sorted_runs
from plansight.errors import Cancelled, ExecutionError, ResourcesExhausted
from tests.differential.harness import assert_same, run_duckdb
from tests.session_defaults import session_defaults

ROWS = 220_000
LIMIT = 3_000_000


def _table(rows: int, distinct: int, skew: float, seed: int) -> pa.Table:
    """``k`` (int, NULLs), ``s`` (string, NULLs, a function of k), ``f`` (double with NaN and
    -0.0), argument columns; a share ``skew`` of the rows has k = 7."""
    rng = np.random.default_rng(seed)
    k = rng.integers(0, distinct, rows)
    k[rng.random(rows) < skew] = 7
    k_null = rng.random(rows) < 0.01
    keys = pa.array(k, mask=k_null)
    s = pc.binary_join_element_wise("g", pc.cast(pa.array(k % 5_000), pa.string()), "")
    s = pc.if_else(pa.array(k % 997 == 3), pa.nulls(rows, pa.string()), s)
    f = (k % 4).astype(np.float64) - 1.0  # -1, 0, 1, 2
    f[k % 4 == 1] = np.where(rng.random(int((k % 4 == 1).sum())) < 0.5, -0.0, 0.0)
    f[k % 13 == 0] = np.nan
    v = np.round(rng.random(rows) * 100, 2)
    i = rng.integers(-1_000, 1_000, rows)
    return pa.table({
        "k": keys, "s": s, "f": f,
        "v": pa.array(v, mask=rng.random(rows) < 0.05),
        "i": pa.array(i, mask=rng.random(rows) < 0.05),
        "b": pa.array(i % 3 == 0, mask=rng.random(rows) < 0.05),
        "n": pc.binary_join_element_wise("n", pc.cast(pa.array(i % 50), pa.string()), ""),
    })


@pytest.fixture(scope="module")
def many() -> pa.Table:
    table = _table(ROWS, 2_000_000, skew=0.0, seed=1)
    assert pc.count_distinct(table["k"]).as_py() > 200_000
    return table


@pytest.fixture(scope="module")
def skewed() -> pa.Table:
    return _table(ROWS, 300_000, skew=0.9, seed=2)


class Recorder:
    """Observer keeping the pool's largest reserved total and the aggregate's spill events."""

    def __init__(self):
        self.max_total = 0
        self.written: list[SpillWritten] = []
        self.read: list[SpillRead] = []

    def __call__(self, event):
        if isinstance(event, ReservationChanged):
            # pool_peak: exact even when the observer lagged and got only the latest change
            self.max_total = max(self.max_total, event.pool_total, event.pool_peak)
        elif isinstance(event, SpillWritten) and event.operator == "AggregateExec":
            self.written.append(event)
        elif isinstance(event, SpillRead) and event.operator == "AggregateExec":
            self.read.append(event)


def _aggregate_metrics(run) -> dict[str, float]:
    totals = {"spill_count": 0, "spilled_bytes": 0, "spilled_rows": 0}
    for partitions in run.ctx.metrics._metrics.values():
        if partitions.operator == "AggregateExec":
            for name in totals:
                totals[name] += partitions.values.get(name, 0)
    return totals


def assert_same_groups(got: pa.Table, expected: pa.Table, sql: str) -> None:
    """The harness's comparison, vectorized for results of many groups: rows sorted by the
    group keys (the leading columns up to the first aggregate), then column by column: NULL
    where NULL, numbers equal within 1e-9 (NaN equals NaN), anything else exactly."""
    keys = len(sql.split("GROUP BY")[1].split(","))
    assert got.num_rows == expected.num_rows, sql

    def by_keys(table: pa.Table) -> pa.Table:
        names = [f"c{i}" for i in range(table.num_columns)]
        table = table.rename_columns(names)
        return table.take(pc.sort_indices(table, [(n, "ascending") for n in names[:keys]]))

    got, expected = by_keys(got), by_keys(expected)
    for name, a, b in zip(expected.column_names, got.columns, expected.columns):
        a, b = a.combine_chunks(), b.combine_chunks()
        where = f"{sql}: column {name}"
        assert a.is_null().equals(b.is_null()), where
        numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
                   for t in (a.type, b.type)]
        if all(numeric):
            x = np.asarray(pc.cast(a.drop_null(), pa.float64()))
            y = np.asarray(pc.cast(b.drop_null(), pa.float64()))
            assert np.isclose(x, y, rtol=1e-9, atol=1e-9, equal_nan=True).all(), where
        else:
            assert a.cast(b.type).equals(b), where


def _check_spilled(sql: str, tables: dict[str, pa.Table], tmp_path, partitions: int,
                   limit: int = LIMIT, **options) -> Recorder:
    s = ps.Session(target_partitions=partitions, memory_limit=limit, spill_dir=str(tmp_path),
                   **options)
    for name, table in tables.items():
        s.register(name, table)
    recorder = Recorder()
    run = s.sql(sql).execute(observer=recorder)
    expected = run_duckdb(sql, tables)
    assert_same_groups(run.result, expected, sql)
    if expected.num_rows < 10_000:  # small enough for the harness's own comparison
        assert_same(run.result, expected, ordered=False, sql=sql)
    metrics = _aggregate_metrics(run)
    assert metrics["spill_count"] > 0 and metrics["spilled_rows"] > 0
    assert metrics["spilled_bytes"] > 0
    assert recorder.max_total <= limit
    assert len(recorder.written) == metrics["spill_count"]
    assert sum(e.rows for e in recorder.written) == metrics["spilled_rows"]
    assert not any(files for _, _, files in os.walk(tmp_path))  # spill files removed
    assert run.ctx.memory_pool.reserved == 0
    return recorder


DECOMPOSABLE = (
    "count(*) AS c, count(v) AS cv, sum(v) AS sv, sum(i) AS si, avg(v) AS av, avg(i) AS ai, "
    "min(v) AS lo, max(v) AS hi, min(n) AS ln, max(n) AS hn, min(i) AS li, max(f) AS hf, "
    "bool_and(b) AS ba, bool_or(b) AS bo")

# the other aggregates: their states do not merge, so runs hold rows sorted by the keys
HOLISTIC = (
    "count(DISTINCT i % 7) AS di, sum(DISTINCT i % 11) AS ds, median(v) AS m, "
    "quantile_disc(i, 0.25) AS q, stddev(v) AS sd, var_pop(i) AS vp, "
    "string_agg(n, '|' ORDER BY n, i) AS sa, count(*) AS c")


@pytest.mark.parametrize(("keys", "partitions"), [("k", 1), ("s, k", 2), ("f, s", 3), ("k", 3)])
def test_many_groups_spill_sorted_states_and_match_duckdb(many, keys, partitions, tmp_path):
    sql = f"SELECT {keys}, {DECOMPOSABLE} FROM t GROUP BY {keys}"
    _check_spilled(sql, {"t": many}, tmp_path, partitions)


@pytest.mark.parametrize("partitions", [1, 2, 3])
def test_non_mergeable_aggregates_spill_sorted_rows_and_match_duckdb(many, partitions,
                                                                     tmp_path):
    sql = f"SELECT k, s, {HOLISTIC} FROM t GROUP BY k, s"
    _check_spilled(sql, {"t": many}, tmp_path, partitions)


def test_any_value_and_array_agg_spill(many, tmp_path):
    """any_value of a column that is a function of the key (one right answer per group);
    array_agg's order is not specified: its lists are compared sorted."""
    sql = "SELECT k, any_value(s) AS a, array_agg(i) AS l FROM t GROUP BY k"
    s = ps.Session(target_partitions=1, memory_limit=LIMIT, spill_dir=str(tmp_path))
    s.register("t", many)
    recorder = Recorder()
    got = s.sql(sql).execute(observer=recorder).result
    assert recorder.written and recorder.max_total <= LIMIT
    assert list(tmp_path.iterdir()) == []
    con = duckdb.connect()
    con.register("got", got)
    con.register("t", many)
    sort_lists = "SELECT k, a, list_sort(l) FROM {}"
    assert_same_groups(con.sql(sort_lists.format("got")).to_arrow_table(),
                       con.sql(sort_lists.format(f"({sql})")).to_arrow_table(), sql)


@pytest.mark.parametrize("partitions", [1, 2, 3])
def test_a_key_holding_90_percent_of_the_rows_spills_and_matches_duckdb(skewed, partitions,
                                                                       tmp_path):
    """One hash bucket had to hold every row of key 7 and could not split again; sorted runs
    hold one state row per group, whatever the skew."""
    sql = f"SELECT k, s, {DECOMPOSABLE} FROM t GROUP BY k, s"
    _check_spilled(sql, {"t": skewed}, tmp_path, partitions, limit=1_500_000)


def test_a_non_mergeable_group_larger_than_memory_fails_naming_the_aggregate(skewed,
                                                                            tmp_path):
    s = ps.Session(target_partitions=1, memory_limit=1_500_000, spill_dir=str(tmp_path))
    s.register("t", skewed)
    recorder = Recorder()
    with pytest.raises(ResourcesExhausted, match=r"AggregateExec\(Single\)\[0\] could not "
                                                 r"reserve"):
        s.sql("SELECT k, median(v) AS m FROM t GROUP BY k").execute(observer=recorder)
    assert recorder.written  # it spilled before meeting the one giant group
    assert list(tmp_path.iterdir()) == []
    assert s.sql("SELECT count(*) AS c FROM t WHERE k = 7").to_arrow().num_rows == 1


def test_many_runs_merge_in_levels(many, tmp_path, monkeypatch):
    session_defaults(monkeypatch, spill_merge_fan_in=2)
    levels = []
    merge_level = sorted_runs.SortedRuns._merge_level
    monkeypatch.setattr(sorted_runs.SortedRuns, "_merge_level",
                        lambda runs, group: levels.append(len(group)) or merge_level(runs, group))
    sql = f"SELECT s, k, {DECOMPOSABLE} FROM t GROUP BY s, k"
    # 64K-row scan batches (4096 x widen_scan_batches' 16): a run per batch or two, enough
    # runs for two merge levels
    recorder = _check_spilled(sql, {"t": many}, tmp_path, 1, batch_size=4096)
    assert levels and len(recorder.written) > 2 + len(levels)
    # every file is read back once: the first runs by a level, the level files by the last
    assert len(recorder.read) == len(recorder.written)


@pytest.mark.parametrize("batch_size", [1, 3, 7])
def test_small_batches_and_empty_input(batch_size, tmp_path):
    table = _table(600, 300, skew=0.3, seed=3)
    sql = f"SELECT s, k, {DECOMPOSABLE} FROM t GROUP BY s, k"
    _check_spilled(sql, {"t": table}, tmp_path, 1, limit=40_000, batch_size=batch_size)
    # two partitions' merges need more than the 16 KiB each reserves ahead
    s = ps.Session(target_partitions=2, memory_limit=100_000, batch_size=batch_size)
    s.register("t", table)
    assert s.sql(sql + " HAVING count(*) < 0").to_arrow().num_rows == 0
    assert s.sql(f"SELECT k, {DECOMPOSABLE} FROM t WHERE k < -5 GROUP BY k"
                 ).to_arrow().num_rows == 0


# -- failure and cancellation ------------------------------------------------------------

def _fails_at(condition: str) -> str:
    return f"CAST(CASE WHEN {condition} THEN 'x' ELSE '1' END AS INTEGER)"


def test_no_spill_file_remains_after_a_failure(many, tmp_path, monkeypatch):
    created = []  # unfinished spill files publish no event: note every file opened
    new_path = SpillManager._new_path
    monkeypatch.setattr(SpillManager, "_new_path",
                        lambda manager, metrics: created.append(new_path(manager, metrics))
                        or created[-1])
    # 64K-row scan batches (4096 x widen_scan_batches' 16): runs spill before the last one
    s = ps.Session(target_partitions=1, memory_limit=LIMIT, spill_dir=str(tmp_path),
                   batch_size=4096)
    s.register("t", many)
    s.register("t", many.append_column("row_id", pa.array(np.arange(ROWS))))
    # the last row fails, after runs were spilled
    sql = f"SELECT k, sum({_fails_at(f'row_id = {ROWS - 1}')}) AS bad FROM t GROUP BY k"
    with pytest.raises(ExecutionError, match="Could not convert"):
        s.sql(sql).execute()
    assert any("AggregateExec" in path.name for path in created)
    assert not any(path.exists() for path in created)
    assert list(tmp_path.iterdir()) == []
    assert s.sql("SELECT count(*) AS c FROM t").to_arrow().column(0).to_pylist() == [ROWS]


@pytest.mark.parametrize("phase", ["writing", "merging"])
def test_an_interrupt_while_spilling_cancels_and_cleans_up(many, tmp_path, monkeypatch, phase):
    calls = []
    if phase == "writing":
        finish = SpillWriter.finish

        def interrupting_finish(writer):
            calls.append(finish(writer))
            if len(calls) == 2:
                raise KeyboardInterrupt  # what a kernel interrupt looks like in the engine
            return calls[-1]

        monkeypatch.setattr(SpillWriter, "finish", interrupting_finish)
    else:
        read = SpillManager.read

        def interrupting_read(manager, file, metrics, delete=True):
            calls.append(file)
            for number, batch in enumerate(read(manager, file, metrics, delete)):
                if number == 1:
                    raise KeyboardInterrupt
                yield batch

        monkeypatch.setattr(SpillManager, "read", interrupting_read)
    s = ps.Session(target_partitions=1, memory_limit=LIMIT, spill_dir=str(tmp_path))
    s.register("t", many)
    with pytest.raises(Cancelled):
        s.sql(f"SELECT k, {DECOMPOSABLE} FROM t GROUP BY k").execute()
    assert calls
    assert list(tmp_path.iterdir()) == []
    assert s.sql("SELECT count(*) AS c FROM t").to_arrow().column(0).to_pylist() == [ROWS]
