"""Which window executor runs, and every executor agrees with DuckDB.

The default plan for unsorted input is the sort-free HashWindowAggExec; the differential
corpus of test_window_sql.py runs through it. Here the same queries also run through the
sorted executor (forced), and plan shapes are checked: shared permutations, reversed
orderings, sorted input without a second sort, whole-partition broadcast, and the fall back
to sorting when the memory pool refuses the buffer.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.logical.expr import Column, SortKey, WindowCall
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.windows.window_hash_agg import HashWindowAggExec
from tests.differential.harness import check
from tests.session_defaults import session_defaults
from tests.windows.window_cases import QUERIES, TABLES


@pytest.mark.parametrize("sql", QUERIES[::2])
@pytest.mark.parametrize("executor", ["sorted", "partition"])
def test_sorted_executors_match_duckdb(sql, executor, monkeypatch):
    # "sorted": BoundedWindowAggExec wherever it applies, else WindowAggExec
    session_defaults(monkeypatch, window_executor=executor)
    check(sql, {"t": TABLES["mixed"]}, batch_size=7)


@pytest.mark.parametrize("sql", QUERIES[1::4])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_bounded_executor_at_tiny_batches(sql, batch_size, monkeypatch):
    session_defaults(monkeypatch, window_executor="sorted")
    check(sql, {"t": TABLES["one_partition"]}, batch_size=batch_size)
    check(sql, {"t": TABLES["mixed"]}, batch_size=batch_size)


@pytest.mark.parametrize("sql", QUERIES[1::5])
@pytest.mark.parametrize("partitions", [2, 3])
def test_hash_executor_at_several_partitions(sql, partitions):
    check(sql, {"t": TABLES["tiny_partitions"]}, batch_size=5, target_partitions=partitions)


def _plan(sql: str, partitions: int = 1) -> str:
    s = ps.Session(target_partitions=partitions)
    s.register("t", TABLES["mixed"])
    return s.sql(sql).explain()


def test_unsorted_input_gets_no_sort():
    plan = _plan("SELECT id, sum(v) OVER (PARTITION BY p ORDER BY o ROWS 2 PRECEDING) FROM t")
    assert "HashWindowAggExec" in plan and "SortExec" not in plan
    assert "mode=permuted by [p, o ASC NULLS LAST]" in plan


def test_whole_partition_aggregate_is_broadcast_without_permutation():
    plan = _plan("SELECT id, sum(v) OVER (PARTITION BY p), count(*) OVER (PARTITION BY p "
                 "ORDER BY o ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM t")
    assert plan.count("mode=hash-broadcast") == 2
    assert "SortExec" not in plan


def test_unsorted_input_is_merged_not_shuffled_and_not_sorted():
    """The single-pass executor gathers partitions (cheap) instead of hash-shuffling keys."""
    plan = _plan("SELECT id, rank() OVER (PARTITION BY p ORDER BY o) FROM t", partitions=3)
    assert "CoalescePartitionsExec" in plan
    assert "RepartitionExec" not in plan and "SortExec" not in plan


def test_windows_on_the_same_partition_share_one_operator_and_permutation():
    sql = ("SELECT id, lag(v) OVER (PARTITION BY p ORDER BY o, id) AS a, "
           "sum(v) OVER (PARTITION BY p ORDER BY o) AS b, "
           "max(v) OVER (PARTITION BY p ORDER BY o DESC NULLS FIRST, id DESC "
           "NULLS FIRST) AS c, count(*) OVER (PARTITION BY p) AS d FROM t")
    # max over peer-group frames reads no tie order, so it may walk a permutation backwards
    # (first_value would see ties reversed: test_window_source_order)
    plan = _plan(sql)
    assert plan.count("HashWindowAggExec") == 1
    assert "backwards" in plan
    assert plan.count("permuted by [p, o ASC NULLS LAST, id ASC NULLS LAST]") == 3
    for shape in ("mixed", "tiny_partitions"):
        check(sql, {"t": TABLES[shape]}, batch_size=7)


@pytest.mark.parametrize("frame, executor", [
    ("", "BoundedWindowAggExec: mode=bounded-streaming"),
    ("ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING", "BoundedWindowAggExec: mode=bounded-streaming"),
    ("ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING", "WindowAggExec: mode=partition-at-a-time"),
])
def test_sorted_input_streams_through_a_sorted_executor_without_a_second_sort(frame, executor):
    sql = (f"SELECT p, o, id, sum(v) OVER (PARTITION BY p ORDER BY o, id {frame}) AS w "
           "FROM (SELECT * FROM t ORDER BY p, o, id) AS sorted")
    plan = _plan(sql)
    assert executor in plan
    assert plan.count("SortExec") == 1
    check(sql, {"t": TABLES["mixed"]}, batch_size=3)


def test_reversed_sorted_input_is_read_backwards_instead_of_sorted_again():
    sql = ("SELECT p, o, id, lag(v) OVER (PARTITION BY p ORDER BY o, id) AS a, "
           "last_value(v) OVER (PARTITION BY p ORDER BY o, id ROWS BETWEEN 1 PRECEDING AND "
           "CURRENT ROW) AS b, rank() OVER (PARTITION BY p ORDER BY o) AS c "
           "FROM (SELECT * FROM t ORDER BY p DESC, o DESC NULLS FIRST, id DESC NULLS FIRST) "
           "AS sorted")
    plan = _plan(sql)
    assert plan.count("SortExec") == 1
    assert plan.count("(backwards)") == 3
    check(sql, {"t": TABLES["mixed"]}, batch_size=4)


@pytest.mark.parametrize("executor, operators", [
    ("sorted", {"BoundedWindowAggExec": 2, "WindowAggExec: mode=partition": 1}),
    ("partition", {"WindowAggExec: mode=partition": 1}),
])
def test_compatible_orderings_share_one_sort_in_the_sorted_path(executor, operators,
                                                                  monkeypatch):
    """ORDER BY o, ORDER BY o, id and their reverses on one partition key: one sort by the
    longest ordering (planned lowest) serves all of them."""
    session_defaults(monkeypatch, window_executor=executor)
    sql = ("SELECT id, sum(v) OVER (PARTITION BY p ORDER BY o) AS a, "
           "lag(v) OVER (PARTITION BY p ORDER BY o, id) AS b, "
           "row_number() OVER (PARTITION BY p ORDER BY o, id) AS c, "
           "lead(v) OVER (PARTITION BY p ORDER BY o DESC NULLS FIRST, id DESC NULLS FIRST) AS d, "
           "count(*) OVER (PARTITION BY p) AS e, "
           "rank() OVER (PARTITION BY p ORDER BY o DESC) AS f FROM t")
    plan = _plan(sql)
    assert plan.count("SortExec") == 1
    assert "SortExec: expr=[p ASC NULLS LAST, o ASC NULLS LAST, id ASC NULLS LAST, "\
           "__source_position ASC NULLS LAST]" in plan
    for operator, count in operators.items():
        assert plan.count(operator) == count, plan
    assert "lead(v) (backwards)" in plan
    assert "rank() (backwards, NULLs stay in place)" in plan
    for shape in ("mixed", "tiny_partitions", "one_partition", "empty"):
        for batch_size in (1, 3, 7, 8192):
            check(sql, {"t": TABLES[shape]}, batch_size=batch_size)


def test_incompatible_orderings_get_one_sort_each(monkeypatch):
    session_defaults(monkeypatch, window_executor="partition")
    sql = ("SELECT id, lag(v) OVER (PARTITION BY p ORDER BY o, id) AS a, "
           "lag(v) OVER (PARTITION BY p ORDER BY id) AS b, "
           "lag(v) OVER (PARTITION BY o ORDER BY id) AS c FROM t")
    plan = _plan(sql)
    assert plan.count("SortExec") == 3
    check(sql, {"t": TABLES["mixed"]}, batch_size=7)


@pytest.mark.parametrize("partition", ["", "PARTITION BY p "])
def test_descending_window_over_ascending_input_is_read_backwards(partition):
    """ORDER BY o DESC (NULLS LAST) over rows sorted by o ASC NULLS LAST: each partition's
    non-NULL run is read backwards and its NULL run stays last; no second sort."""
    inner = "p, o, id" if partition else "o, id"
    sql = (f"SELECT p, o, id, rank() OVER ({partition}ORDER BY o DESC) AS r, "
           f"sum(v) OVER ({partition}ORDER BY o DESC) AS s, "
           f"lag(v) OVER ({partition}ORDER BY o DESC, id DESC NULLS FIRST) AS l, "
           f"first_value(v) OVER ({partition}ORDER BY o DESC, id DESC NULLS FIRST "
           f"ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS f "
           f"FROM (SELECT * FROM t ORDER BY {inner}) AS sorted")
    plan = _plan(sql)
    assert plan.count("SortExec") == 1
    assert plan.count("(backwards, NULLs stay in place)") == 4
    assert "HashWindowAggExec" not in plan
    for shape in ("mixed", "tiny_partitions", "one_partition"):
        for batch_size in (1, 3, 8192):
            check(sql, {"t": TABLES[shape]}, batch_size=batch_size)


def test_input_sorted_by_a_permutation_of_the_partition_keys_needs_no_sort():
    sql = ("SELECT p, o, id, row_number() OVER (PARTITION BY p, o ORDER BY id) AS a, "
           "sum(v) OVER (PARTITION BY o, p ORDER BY id DESC NULLS FIRST) AS b "
           "FROM (SELECT * FROM t ORDER BY o DESC, p, id) AS sorted")
    plan = _plan(sql)
    assert plan.count("SortExec") == 1
    assert "SortExec: expr=[o DESC NULLS LAST, p ASC NULLS LAST, id ASC NULLS LAST]" in plan
    assert "HashWindowAggExec" not in plan
    check(sql, {"t": TABLES["tiny_partitions"]}, batch_size=3)


_ROWS_2 = "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW"
_WHOLE = "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
_RUNNING = "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"


@pytest.mark.parametrize("sql, expected", [
    (f"SELECT sum(v) OVER (PARTITION BY p ORDER BY o {_ROWS_2}) FROM t",
     f"HashWindowAggExec: wdw=[sum(v) {_ROWS_2}: mode=permuted by [p, o ASC NULLS LAST]]"),
    ("SELECT count(*) OVER (PARTITION BY p) FROM t",
     f"HashWindowAggExec: wdw=[count_star() {_WHOLE}: mode=hash-broadcast]"),
    ("SELECT min(v) OVER (PARTITION BY p ORDER BY o) FROM (SELECT * FROM t ORDER BY p, o) s",
     f"BoundedWindowAggExec: mode=bounded-streaming, wdw=[min(v) {_RUNNING}]"),
    ("SELECT lag(v) OVER (PARTITION BY p ORDER BY o) FROM (SELECT * FROM t ORDER BY p, o DESC) s",
     "WindowAggExec: mode=partition-at-a-time, wdw=[lag(v) (backwards, NULLs stay in place)]"),
])
def test_explain_names_executor_frame_and_mode(sql, expected):
    assert expected in _plan(sql)


@pytest.mark.parametrize("call, frame", [
    ("nth_value(v, 2)", "ROWS BETWEEN 3 PRECEDING AND 1 FOLLOWING"),
    ("nth_value(v, 3)", "ROWS BETWEEN CURRENT ROW AND 4 FOLLOWING"),
    ("nth_value(v, 1)", "RANGE BETWEEN CURRENT ROW AND CURRENT ROW"),
    ("first_value(v IGNORE NULLS)", "ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING"),
    ("last_value(v IGNORE NULLS)", "ROWS BETWEEN 3 PRECEDING AND CURRENT ROW"),
    ("nth_value(v, 2 IGNORE NULLS)", "ROWS BETWEEN 1 PRECEDING AND 3 FOLLOWING"),
])
def test_frame_values_stream_through_the_bounded_executor(call, frame, monkeypatch):
    """nth_value, and IGNORE NULLS, only look inside a bounded frame: they stream."""
    session_defaults(monkeypatch, window_executor="sorted")
    # (o, id) is unique: no engine-dependent order of peers
    sql = f"SELECT id, {call} OVER (PARTITION BY p ORDER BY o, id {frame}) AS w FROM t"
    plan = _plan(sql)
    assert "BoundedWindowAggExec" in plan and "WindowAggExec: mode=partition" not in plan
    if "IGNORE NULLS" in call:
        assert "IGNORE NULLS)" in plan.split("BoundedWindowAggExec")[1]
    for shape in ("mixed", "tiny_partitions", "one_partition", "empty"):
        for batch_size in (1, 3, 7, 8192):
            check(sql, {"t": TABLES[shape]}, batch_size=batch_size)


def test_lag_ignore_nulls_does_not_stream(monkeypatch):
    """lag(v IGNORE NULLS) may look back past any number of NULLs: partition-at-a-time."""
    session_defaults(monkeypatch, window_executor="sorted")
    sql = "SELECT id, lag(v IGNORE NULLS) OVER (PARTITION BY p ORDER BY o, id) AS w FROM t"
    assert "WindowAggExec: mode=partition-at-a-time" in _plan(sql)
    check(sql, {"t": TABLES["mixed"]}, batch_size=3)


# ----------------------------------------------------------------------------- operator level

P = Column(1, "p", pa.int64())
V = Column(2, "v", pa.int64())
OUT = Column(3, "s", pa.int64())


class _Source(ExecutionPlan):
    name = "Source"

    def __init__(self, batches: list[pa.RecordBatch]):
        super().__init__(batches[0].schema)
        self.batches = batches

    def _execute(self, partition, ctx):
        yield from self.batches


def _batches(rows: int, partitions: int, batch_rows: int) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(5)
    schema = pa.schema([(P.field_name, pa.int64()), (V.field_name, pa.int64())])
    p, v = rng.integers(0, partitions, rows), rng.integers(0, 100, rows)
    return [pa.RecordBatch.from_arrays([pa.array(p[i:i + batch_rows]),
                                        pa.array(v[i:i + batch_rows])], schema=schema)
            for i in range(0, rows, batch_rows)]


def _partition_totals(batches: list[pa.RecordBatch]) -> dict[int, int]:
    table = pa.Table.from_batches(batches)
    totals: dict[int, int] = {}
    for k, x in zip(table.column(0).to_pylist(), table.column(1).to_pylist()):
        totals[k] = totals.get(k, 0) + x
    return totals


def test_output_keeps_input_rows_and_batches_and_frees_memory():
    batches = _batches(1000, 13, 64)
    window = WindowCall("sum", (V,), pa.int64(), partition_by=(P,))
    op = HashWindowAggExec([window], [OUT], _Source(batches))
    pool = MemoryPool(None)
    out = list(op.execute(0, TaskContext(SessionConfig(), pool)))
    assert [b.num_rows for b in out] == [b.num_rows for b in batches]
    assert all(o.column(0).equals(b.column(0)) for o, b in zip(out, batches))
    totals = _partition_totals(batches)
    for batch in out:
        keys, sums = batch.column(0).to_pylist(), batch.column(2).to_pylist()
        assert sums == [totals[k] for k in keys]
    assert pool.reserved == 0


def test_falls_back_to_sorting_when_the_pool_refuses_the_buffer():
    batches = _batches(1000, 13, 64)
    window = WindowCall("sum", (V,), pa.int64(), partition_by=(P,),
                        order_by=(SortKey(V),))
    op = HashWindowAggExec([window], [OUT], _Source(batches))
    input_bytes = sum(b.nbytes for b in batches)
    pool = MemoryPool(int(input_bytes * 2.5))  # the sort fits, the permutation work does not
    out = pa.Table.from_batches(list(op.execute(0, TaskContext(SessionConfig(), pool))))
    unlimited = HashWindowAggExec([window], [OUT], _Source(batches))
    expected = pa.Table.from_batches(list(unlimited.execute(
        0, TaskContext(SessionConfig(), MemoryPool(None)))))
    key = [(name, "ascending") for name in expected.column_names]
    assert out.num_rows == 1000
    assert out.sort_by(key).equals(expected.sort_by(key))
    assert pool.reserved == 0


# Frames whose rows the streaming executor drops while later rows still need them, unless
# it waits: an UNBOUNDED PRECEDING frame ending 3+ rows (groups, key units) back, and the
# GROUPS / RANGE offset frames it streams by searching the buffer's frame bounds.
STREAMED_FRAMES = [
    "ROWS BETWEEN UNBOUNDED PRECEDING AND 3 PRECEDING",
    "GROUPS BETWEEN UNBOUNDED PRECEDING AND 3 PRECEDING",
    "RANGE BETWEEN UNBOUNDED PRECEDING AND 4 PRECEDING",
    "GROUPS BETWEEN 2 PRECEDING AND 1 FOLLOWING",
    "GROUPS BETWEEN 1 FOLLOWING AND 3 FOLLOWING",
    "RANGE BETWEEN 3 PRECEDING AND 2 FOLLOWING",
    "RANGE BETWEEN CURRENT ROW AND 5 FOLLOWING",
    "RANGE BETWEEN 6 PRECEDING AND 2 PRECEDING",
]


@pytest.mark.parametrize("frame", STREAMED_FRAMES)
@pytest.mark.parametrize("batch_size, partitions", [(1, 1), (3, 2), (7, 3), (8192, 8)])
def test_streamed_frames_match_duckdb(frame, batch_size, partitions, monkeypatch):
    session_defaults(monkeypatch, window_executor="sorted")
    order = "o, id" if frame.startswith("ROWS") else "o"
    sql = (f"SELECT id, sum(v) OVER w AS s, count(*) OVER w AS c, min(v) OVER w AS lo, "
           f"max(v) OVER w AS hi, avg(v) OVER w AS a FROM t "
           f"WINDOW w AS (PARTITION BY p ORDER BY {order} {frame}) ORDER BY id")
    for table in ("one_partition", "tiny_partitions", "empty"):
        check(sql, {"t": TABLES[table]}, batch_size=batch_size, target_partitions=partitions)


def test_streamed_frames_run_in_the_streaming_executor(monkeypatch):
    session_defaults(monkeypatch, window_executor="sorted")
    for frame in STREAMED_FRAMES:
        plan = _plan(f"SELECT sum(v) OVER (PARTITION BY p ORDER BY o {frame}) FROM t")
        assert "BoundedWindowAggExec" in plan and "WindowAggExec: mode=partition" not in plan, \
            frame
