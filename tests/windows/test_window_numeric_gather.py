"""Window arguments gathered and results scattered by the compiled loops of
kernels/gather.py: every integer and floating width, with and without NULLs (NULLs take
Arrow's take), one chunk or many (batch sizes), against DuckDB at partitions 1/2/3/8 and
batch sizes 1/3/7/8192, on a table with ties and NULL keys, an empty one and a one-row one."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from plansight.engine.physical.windows.window_hash_agg import _numbers
from tests.differential.harness import assert_same, run_duckdb, run_plansight

TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
         pa.uint64(), pa.float32(), pa.float64()]


def _table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 100, rows)
    columns = {"id": pa.array(np.arange(rows)),
               "g": pa.array(rng.integers(0, 5, rows), mask=rng.random(rows) < 0.1),
               "o": pa.array(rng.integers(0, 20, rows))}
    for typ in TYPES:
        values = pa.array(raw).cast(typ)
        columns[f"x_{typ}"] = values
        columns[f"n_{typ}"] = pa.array(values.to_pylist(), typ, mask=rng.random(rows) < 0.2)
    return pa.table(columns)


TABLES = {"t": _table(150, 3), "t_empty": _table(150, 3).slice(0, 0),
          "t_one": _table(150, 3).slice(0, 1)}


@pytest.mark.parametrize("table", sorted(TABLES))
@pytest.mark.parametrize(("partitions", "batch_size"), [(1, 8192), (2, 3), (3, 7), (8, 1)])
@pytest.mark.parametrize("typ", [str(t) for t in TYPES])
def test_gathered_arguments_match_duckdb(typ, partitions, batch_size, table):
    windows = ", ".join(
        f"{func}({prefix}_{typ}) OVER (PARTITION BY g ORDER BY o, id ROWS BETWEEN 2 PRECEDING "
        f"AND CURRENT ROW) AS {func}_{prefix}, lag({prefix}_{typ}, 2) OVER (PARTITION BY g "
        f"ORDER BY o DESC, id) AS lag_{func}_{prefix}"
        for func in ("sum", "min") for prefix in ("x", "n"))
    sql = f"SELECT id, {windows} FROM {table}"
    actual = run_plansight(sql, TABLES, target_partitions=partitions, batch_size=batch_size)
    assert_same(actual, run_duckdb(sql, TABLES), ordered=False, sql=sql)


def test_numbers_copies_chunks_and_refuses_nulls_and_other_types():
    chunked = pa.chunked_array([pa.array([1, 2], pa.int16()), pa.array([3], pa.int16()),
                                pa.array([], pa.int16())])
    numbers = _numbers(chunked)
    assert numbers.dtype == np.int16 and numbers.tolist() == [1, 2, 3]
    sliced = pa.chunked_array([pa.array([9.5, 1.5, 2.5]).slice(1), pa.array([4.0])])
    assert _numbers(sliced).tolist() == [1.5, 2.5, 4.0]
    assert _numbers(pa.chunked_array([pa.array([1, None]), pa.array([2])])) is None
    assert _numbers(pa.array(["a"])) is None
    assert _numbers(pa.array([1.0], pa.float16())) is None
    assert _numbers(pa.array([True])) is None


def test_the_hash_executor_runs_these_windows():
    import plansight as ps

    session = ps.Session(target_partitions=2)
    session.register("t", TABLES["t"])
    plan = session.sql("SELECT sum(x_int8) OVER (PARTITION BY g ORDER BY o, id ROWS BETWEEN 2 "
                       "PRECEDING AND CURRENT ROW) FROM t").explain()
    assert "HashWindowAggExec" in plan


@pytest.mark.parametrize(("partitions", "batch_size"), [(1, 8192), (2, 3), (3, 7), (8, 1)])
def test_arguments_read_again_after_their_last_window_match_duckdb(partitions, batch_size):
    # x_int32's last reader as an argument is lag; a later window still sorts by it (RANGE
    # offsets gather the key) and another partitions by it: each evaluates it again
    sql = ("SELECT id, sum(x_int32) OVER (PARTITION BY g ORDER BY o, id ROWS 1 PRECEDING) AS a, "
           "lag(x_int32, 1, -1) OVER (ORDER BY id) AS b, "
           "count(n_double) OVER (PARTITION BY g ORDER BY x_int32 RANGE BETWEEN 5 PRECEDING "
           "AND CURRENT ROW) AS c, min(n_double) OVER (PARTITION BY x_int32) AS d, "
           "max(x_int32) OVER (PARTITION BY o ORDER BY id ROWS 2 PRECEDING) AS e FROM t")
    actual = run_plansight(sql, TABLES, target_partitions=partitions, batch_size=batch_size)
    assert_same(actual, run_duckdb(sql, TABLES), ordered=False, sql=sql)


def test_forget_drops_evaluated_and_gathered_rows():
    from plansight.engine.logical.expr import Column
    from plansight.engine.physical.windows.window_hash_agg import _Permutation, _State

    # two chunks: the column is copied into numpy memory (_numbers) and gathered from there
    table = pa.Table.from_batches(pa.table({"x#1": pa.array(np.arange(20) * 3)}).to_batches(
        max_chunksize=7))
    state = _State(table)
    x = Column(id=1, name="x", type=pa.int64())
    perm = _Permutation(np.arange(20, dtype=np.int64)[::-1].copy(), np.array([0, 20]))
    first = state.column(x)
    assert x in state._numbers
    assert state.permuted_rows(x, perm, 0, 10).to_pylist() == list(range(57, 27, -3))
    state.forget([x])
    assert not state._taken_rows and x not in state._columns and x not in state._numbers
    assert state.column(x).equals(first)  # evaluated again when read again
