"""HashWindowAggExec split over threads: the partition keys encoded in row ranges, groups of
window partitions evaluated on their own threads (engine/exec/concurrent.py), equal DuckDB.

Pieces are normally at least 64K rows; here one row is enough, so the small tables of the
window corpus split into as many pieces as target_partitions allows (string keys take the
ranged encoding, integer keys the rank path).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import plansight.engine.exec.concurrent as concurrent
from plansight.engine.exec.concurrent import run_concurrently, split_runs
from plansight.engine.functions.window.permutation import partition_codes
from tests.differential.harness import check
from tests.windows.window_cases import QUERIES, TABLES


@pytest.fixture(autouse=True)
def _one_row_pieces(monkeypatch):
    monkeypatch.setattr(concurrent, "MIN_ROWS_PER_PIECE", 1)


def _with_string_keys(table: pa.Table) -> pa.Table:
    """``p`` as strings (NULLs kept), so partition codes come from the ranged encoding."""
    return table.set_column(1, "p", table.column("p").cast(pa.string()))


@pytest.mark.parametrize("sql", QUERIES[::3])
@pytest.mark.parametrize("partitions", [2, 3, 8])
def test_windows_in_pieces_match_duckdb(sql, partitions):
    check(sql, {"t": _with_string_keys(TABLES["tiny_partitions"])}, batch_size=7,
          target_partitions=partitions)


@pytest.mark.parametrize("sql", QUERIES[1::7])
@pytest.mark.parametrize("batch_size", [1, 3, 8192])
def test_windows_in_pieces_at_batch_sizes(sql, batch_size):
    for name in ("mixed", "one_partition", "empty"):
        check(sql, {"t": _with_string_keys(TABLES[name])}, batch_size=batch_size,
              target_partitions=3)


def test_ranged_encoding_finds_the_partitions_of_one_pass():
    keys = pa.chunked_array([["b", None, "a"], ["c", "b", None, "d", "a"]])
    one_pass, count = partition_codes([keys], len(keys), workers=1)
    assert one_pass.tolist() == [0, 1, 2, 3, 0, 1, 4, 2] and count == 5
    for workers in (2, 3, 8):
        codes, pieces_count = partition_codes([keys], len(keys), workers=workers)
        assert pieces_count == count and codes.max() < count
        # codes of the non-NULL keys in first-appearance order, NULL the last
        assert codes.tolist() == [0, 4, 1, 2, 0, 4, 3, 1]


def test_runs_split_into_balanced_groups_of_whole_runs():
    starts = np.array([0, 3, 4, 9, 10])
    assert split_runs(starts, 2) == [(0, 2), (2, 4)]
    assert split_runs(starts, 1) == [(0, 4)]
    groups = split_runs(np.arange(0, 101, dtype=np.int64), 3)
    assert [b - a for a, b in groups] == [33, 33, 34]
    assert split_runs(np.array([0, 10]), 4) == [(0, 1)]  # one run cannot split
    assert split_runs(np.array([0]), 2) == [(0, 0)]


def test_the_first_error_in_call_order_is_raised_after_every_call_finished():
    finished = []

    def fail(message):
        def call():
            finished.append(message)
            raise ValueError(message)
        return call

    with pytest.raises(ValueError, match="first"):
        run_concurrently([lambda: finished.append("ok"), fail("first"), fail("second")])
    assert sorted(finished) == ["first", "ok", "second"]


@pytest.mark.parametrize("workers", [2, 3, 8])
def test_ranged_encoding_over_many_batches_numbers_in_first_appearance_order(workers):
    """Pieces spanning many batches (empty ones too), NULLs in one piece only, empty and
    non-ASCII strings: the merged codes are the one-pass first-appearance numbering, NULL
    last, as ``pc.dictionary_encode`` numbers the whole column."""
    rng = np.random.default_rng(7)
    words = np.array(["", "é", "日本", "a", "ab", "b" * 120, "a\x00b", "A"], dtype=object)
    values = list(words[rng.integers(0, len(words), 200)])
    values[150] = values[151] = None  # NULLs in the last piece only
    batches, start = [], 0
    for size in [0, 1, 7, 3, 0, 50, 39, 100]:
        batches.append(pa.array(values[start:start + size], pa.string()))
        start += size
    keys = pa.chunked_array(batches, type=pa.string())
    codes, count = partition_codes([keys], len(keys), workers=workers)
    expected = pc.dictionary_encode(pa.array(values, pa.string()))
    distinct = len(expected.dictionary)
    assert count == distinct + 1
    assert codes.tolist() == expected.indices.fill_null(distinct).to_pylist()


@pytest.mark.parametrize("typ", [pa.int32(), pa.int64(), pa.float64()])
def test_pieces_scatter_back_to_input_order_with_nulls_in_some_pieces(typ):
    """The result pieces are written back to their rows on their own threads: every row gets
    its piece's value and validity, NULLs only where a piece had them (one piece without any,
    one empty, one sliced)."""
    from plansight.engine.physical.windows.window_hash_agg import _scatter_primitive

    rng = np.random.default_rng(3)
    perm = rng.permutation(40).astype(np.int64)
    permuted = [None if i % 5 == 0 and i >= 20 else i * 3 for i in range(40)]
    sliced = pa.array([99] + permuted[25:40], typ).slice(1)
    pieces = [pa.array(permuted[:20], typ), pa.array([], typ), pa.array(permuted[20:25], typ),
              sliced]
    scattered = _scatter_primitive(pieces, perm)
    expected = [None] * 40
    for position, row in enumerate(perm):
        expected[row] = permuted[position]
    assert scattered.type == typ and scattered.to_pylist() == expected


def test_windows_sharing_an_argument_gather_it_per_piece_alike():
    """Two windows over the same argument and permutation, evaluated in pieces: each piece's
    rows are gathered once and all read them (DuckDB agrees; ties broken by id)."""
    sql = ("SELECT p, o, v, SUM(v) OVER (PARTITION BY p ORDER BY o, id ROWS 2 PRECEDING) AS s, "
           "LAG(v) OVER (PARTITION BY p ORDER BY o, id) AS l, "
           "MIN(v) OVER (PARTITION BY p ORDER BY o, id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) "
           "AS m FROM t")
    for partitions in (1, 2, 3, 8):
        check(sql, {"t": _with_string_keys(TABLES["tiny_partitions"])}, batch_size=7,
              target_partitions=partitions)
