"""BoundedWindowAggExec streams: rows leave as soon as their frames are complete.

A recording source proves it emits before the input ends inside one huge partition and that
it holds only a few batches; a randomized comparison with the partition-at-a-time
WindowAggExec covers dropping and the carried state (row counts, dense ranks, running
aggregates) at batch sizes that cut partitions and peer groups everywhere.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from plansight.engine.exec.context import SessionConfig, TaskContext
from plansight.engine.exec.memory_pool import MemoryPool
from plansight.engine.functions.window import FrameBound, FrameSpec
from plansight.engine.logical.expr import Column, Literal, SortKey, WindowCall
from plansight.engine.physical.plan import ExecutionPlan
from plansight.engine.physical.windows.bounded_window_agg import (
    BoundedWindowAggExec,
    bounded_supported,
)
from plansight.engine.physical.windows.window_agg import WindowAggExec

P = Column(1, "p", pa.int64())
ORD = Column(2, "o", pa.int64())
V = Column(3, "v", pa.float64())
SCHEMA = pa.schema([(P.field_name, pa.int64()), (ORD.field_name, pa.int64()),
                    (V.field_name, pa.float64())])


class RecordingSource(ExecutionPlan):
    """Sorted batches; counts how many were pulled."""

    name = "RecordingSource"

    def __init__(self, table: pa.Table, batch_rows: int):
        super().__init__(SCHEMA)
        self.table, self.batch_rows = table, batch_rows
        self.pulled = 0

    def output_ordering(self):
        return (SortKey(P), SortKey(ORD))

    def _execute(self, partition, ctx):
        for batch in self.table.to_batches(max_chunksize=self.batch_rows):
            self.pulled += 1
            yield batch


def _rows(spec: str, lo: object, hi: object) -> FrameSpec:
    def bound(value, is_start):
        if value == "unbounded":
            return FrameBound("unbounded_preceding" if is_start else "unbounded_following")
        if value == 0:
            return FrameBound("current_row")
        return FrameBound("preceding", -value) if value < 0 else FrameBound("following", value)
    return FrameSpec(spec, bound(lo, True), bound(hi, False))


def _window(func, args=(), frame=None):
    return WindowCall(func, tuple(args), pa.float64(), partition_by=(P,),
                      order_by=(SortKey(ORD),), frame=frame)


def _one_partition(rows: int) -> pa.Table:
    return pa.table({P.field_name: pa.array([7] * rows, pa.int64()),
                     ORD.field_name: pa.array(np.arange(rows), pa.int64()),
                     V.field_name: pa.array(np.ones(rows))}, schema=SCHEMA)


def test_emits_inside_one_huge_partition_long_before_the_input_ends():
    source = RecordingSource(_one_partition(10_000), batch_rows=100)
    window = _window("sum", [V], _rows("rows", -5, 0))
    op = BoundedWindowAggExec([window], [Column(4, "s", pa.float64())], source)
    pool = MemoryPool(None)
    emitted = 0
    for batch in op.execute(0, TaskContext(SessionConfig(), pool)):
        # every row is final once its own batch has arrived
        assert emitted + batch.num_rows <= source.pulled * 100
        assert source.pulled <= emitted // 100 + 2
        emitted += batch.num_rows
    assert emitted == 10_000 and source.pulled == 100
    one_batch = 100 * 24
    assert pool.peak <= 3 * one_batch  # a batch plus 5 rows of context, never the partition
    assert pool.reserved == 0


@pytest.mark.parametrize("frame", [("groups", -2, 1), ("range", -5, 5), ("range", 2, 8)])
def test_groups_and_range_offsets_stream_inside_one_huge_partition(frame):
    table = _one_partition(10_000)
    # four peers per order key: keys 0, 0, 0, 0, 1, 1, ...
    table = table.set_column(1, ORD.field_name, pa.array(np.arange(10_000) // 4, pa.int64()))
    source = RecordingSource(table, batch_rows=100)
    op = BoundedWindowAggExec([_window("sum", [V], _rows(*frame))],
                              [Column(4, "s", pa.float64())], source)
    pool = MemoryPool(None)
    emitted, sums = 0, []
    for batch in op.execute(0, TaskContext(SessionConfig(), pool)):
        assert source.pulled <= emitted // 100 + 3  # at most a few batches behind
        emitted += batch.num_rows
        sums += batch.column(3).to_pylist()
    assert emitted == 10_000
    assert pool.peak <= 4 * 100 * 24  # a few batches of context, never the partition
    keys = np.arange(10_000) // 4
    _, lo, hi = frame
    first, last = keys + lo, keys + hi  # groups and key ranges coincide here
    want = [float(np.count_nonzero((keys >= a) & (keys <= b))) for a, b in zip(first, last)]
    assert sums == [w if w else None for w in want]


def test_following_frames_and_running_totals_wait_only_as_long_as_needed():
    source = RecordingSource(_one_partition(1_000), batch_rows=10)
    windows = [_window("sum", [V], _rows("rows", 0, 25)), _window("count_star"),
               _window("lead", [V, Literal(3, pa.int64())])]
    op = BoundedWindowAggExec(windows, [Column(10 + i, f"w{i}", pa.float64())
                                        for i in range(3)], source)
    seen = 0
    for batch in op.execute(0, TaskContext(SessionConfig(), MemoryPool(None))):
        if source.pulled < 100:  # before the end: rows 25 behind the input are complete
            assert seen + batch.num_rows <= source.pulled * 10 - 25
        sums, counts = batch.column(3).to_pylist(), batch.column(4).to_pylist()
        first = seen
        assert counts == list(range(first + 1, first + batch.num_rows + 1))
        assert sums == [float(min(26, 1000 - i)) for i in range(first, first + batch.num_rows)]
        seen += batch.num_rows
    assert seen == 1000


WINDOWS = [
    ("row_number", [], None), ("rank", [], None), ("dense_rank", [], None),
    ("lag", [V, Literal(2, pa.int64())], None), ("lead", [V, Literal(3, pa.int64())], None),
    ("count_star", [], None), ("count", [V], None), ("sum", [V], None), ("avg", [V], None),
    ("min", [V], None), ("max", [V], None),
    ("sum", [V], ("rows", "unbounded", 2)), ("min", [V], ("rows", "unbounded", -1)),
    ("sum", [V], ("rows", -3, 2)), ("max", [V], ("rows", -4, -1)), ("count", [V], ("rows", 1, 3)),
    ("first_value", [V], ("rows", -2, 0)), ("last_value", [V], ("rows", 0, 3)),
    ("count_star", [], ("range", 0, 0)), ("first_value", [V], ("range", 0, 0)),
    ("avg", [V], ("rows", "unbounded", 0)),
    ("nth_value", [V, Literal(2, pa.int64())], ("rows", -3, 1)),
    ("nth_value", [V, Literal(3, pa.int64())], ("range", 0, 0)),
    # carried rows must lie inside every later frame: these end before the current row
    ("sum", [V], ("rows", "unbounded", -3)), ("count", [V], ("rows", "unbounded", -2)),
    # GROUPS frames and RANGE offsets: bounds searched in the buffer
    ("sum", [V], ("groups", -2, 1)), ("count", [V], ("groups", 0, 2)),
    ("min", [V], ("groups", "unbounded", -1)), ("max", [V], ("groups", -3, -1)),
    ("last_value", [V], ("groups", 1, 2)), ("sum", [V], ("groups", 1, 3)),
    ("nth_value", [V, Literal(2, pa.int64())], ("groups", -1, 1)),
    ("sum", [V], ("range", -5, 3)), ("avg", [V], ("range", "unbounded", -4)),
    ("first_value", [V], ("range", -2, 2)), ("count_star", [], ("range", 2, 6)),
    ("max", [V], ("range", -6, -2)),
]


def _random_sorted(rows: int, partitions: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    p = np.sort(rng.integers(0, partitions, rows))
    o = rng.integers(0, max(2, rows // partitions // 3), rows)  # many ties
    table = pa.table({P.field_name: p, ORD.field_name: o,
                      V.field_name: np.round(rng.normal(size=rows), 2)})
    table = table.sort_by([(P.field_name, "ascending"), (ORD.field_name, "ascending")])
    v = table.column(2).to_numpy().astype(object)
    v[rng.random(rows) < 0.2] = None
    o = table.column(1).to_numpy().astype(object)
    o[-rows // 10:] = None  # NULLs sort last, in the last partition
    return pa.table({P.field_name: table.column(0), ORD.field_name: pa.array(list(o), pa.int64()),
                     V.field_name: pa.array(list(v), pa.float64())}, schema=SCHEMA)


def _run(op: ExecutionPlan) -> pa.Table:
    pool = MemoryPool(None)
    table = pa.Table.from_batches(list(op.execute(0, TaskContext(SessionConfig(), pool))),
                                  schema=op.schema)
    assert pool.reserved == 0
    return table


@pytest.mark.parametrize("batch_rows", [1, 4, 37])
@pytest.mark.parametrize("partitions", [1, 3, 40])
def test_bounded_equals_partition_at_a_time(batch_rows, partitions):
    table = _random_sorted(300, partitions, seed=batch_rows * 100 + partitions)
    specs = WINDOWS + [("sum", [V], "filtered")]
    windows, outputs = [], []
    for i, (func, args, frame) in enumerate(specs):
        typ = pa.int64() if func in ("row_number", "rank", "dense_rank", "count",
                                     "count_star") else pa.float64()
        windows.append(WindowCall(
            func, tuple(args), typ, partition_by=(P,), order_by=(SortKey(ORD),),
            frame=_rows(*frame) if isinstance(frame, tuple) else None,
            filter=_positive() if frame == "filtered" else None))
        outputs.append(Column(100 + i, f"w{i}", typ))
    assert all(bounded_supported(w) for w in windows)
    bounded = _run(BoundedWindowAggExec(windows, outputs, RecordingSource(table, batch_rows)))
    # both read the same sorted rows, so the results line up row by row
    expected = _run(WindowAggExec(windows, outputs, RecordingSource(table, 1000)))
    assert bounded.num_rows == expected.num_rows == 300
    assert bounded.column(0).equals(expected.column(0))
    for i, window in enumerate(windows):
        got = np.array(bounded.column(3 + i).to_pylist(), dtype=float)
        want = np.array(expected.column(3 + i).to_pylist(), dtype=float)
        assert np.allclose(got, want, equal_nan=True), (window, batch_rows, partitions)


def _positive():
    from plansight.engine.logical.expr import Call

    return Call("gt", (V, Literal(0.0, pa.float64())), pa.bool_())


@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
def test_streamed_integer_running_sums_are_exact_hugeints(partitions, batch_size):
    """A running integer SUM is a HUGEINT (DECIMAL(38, 0)): the carry across batches adds
    exactly past BIGINT; AVG and a SUM of booleans alike; against DuckDB."""
    import plansight as ps
    from tests.differential.harness import assert_same, run_duckdb

    n = 40
    table = pa.table({
        "g": pa.array([i // 20 for i in range(n)], pa.int64()),
        "id": pa.array(range(n), pa.int64()),
        "x": pa.array([None if i % 7 == 0 else (2**62 if i % 3 else -5) for i in range(n)],
                      pa.int64()),
        "b": pa.array([i % 2 == 0 for i in range(n)])})
    sql = ("SELECT id, sum(x) OVER (PARTITION BY g ORDER BY id) AS s, avg(x) OVER "
           "(PARTITION BY g ORDER BY id) AS a, sum(b) OVER (PARTITION BY g ORDER BY id) AS sb "
           "FROM t")
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    session.set_option("window_executor", "sorted")
    session.register("t", table, sorted_by=["g", "id"])
    query = session.sql(sql)
    assert "BoundedWindowAggExec" in query.explain()
    assert_same(query.to_arrow(), run_duckdb(sql, {"t": table}), ordered=False, sql=sql)
