"""packed_sort_indices gives Arrow's stable sort permutation, or None when it cannot pack."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from plansight.engine.physical.sorts.packed_sort import MIN_ROWS, packed_sort_indices

ROWS = MIN_ROWS + 904
ORDERS = list(itertools.product(["ascending", "descending"], ["at_start", "at_end"]))


def _columns() -> dict[str, pa.Array | pa.ChunkedArray]:
    rng = np.random.default_rng(3)
    half = ROWS // 2
    return {
        "int64 ties, NULLs": pa.array(rng.integers(-5, 5, ROWS), mask=rng.random(ROWS) < 0.1),
        "int8 negative, NULLs": pa.array(rng.integers(-100, 100, ROWS).astype(np.int8),
                                         mask=rng.random(ROWS) < 0.3),
        "uint8": pa.array(rng.integers(0, 256, ROWS).astype(np.uint8)),
        "bool, NULLs": pa.array(rng.random(ROWS) < 0.5, mask=rng.random(ROWS) < 0.2),
        "date32": pa.array(rng.integers(0, 20_000, ROWS).astype(np.int32)).cast(pa.date32()),
        "timestamp tz": pa.array(rng.integers(-10**12, 10**12, ROWS)).cast(
            pa.timestamp("us", tz="UTC")),
        "all NULL": pa.nulls(ROWS, pa.int64()),
        "chunked": pa.chunked_array([pa.array(rng.integers(0, 3, half)),
                                     pa.array(rng.integers(0, 3, ROWS - half))]),
        "int64 wide": pa.array([-(2**49), 2**49 - 1,
                                 2**49 - 1, -(2**49)] * (ROWS // 4)),
    }


COLUMNS = _columns()


def _expected(columns, sort_keys) -> np.ndarray:
    table = pa.table(columns, names=[name for name, _, _ in sort_keys])
    return pc.sort_indices(table, sort_keys=sort_keys).to_numpy()


@pytest.mark.parametrize("order,placement", ORDERS)
@pytest.mark.parametrize("name", list(COLUMNS))
def test_one_key(name: str, order: str, placement: str) -> None:
    sort_keys = [("a", order, placement)]
    actual = packed_sort_indices([COLUMNS[name]], sort_keys)
    assert actual is not None
    np.testing.assert_array_equal(actual, _expected([COLUMNS[name]], sort_keys))


@pytest.mark.parametrize("second", ["int8 negative, NULLs", "bool, NULLs", "date32"])
@pytest.mark.parametrize("first", ["int64 ties, NULLs", "bool, NULLs", "chunked"])
def test_two_keys_every_order(first: str, second: str) -> None:
    columns = [COLUMNS[first], COLUMNS[second]]
    for (order1, place1), (order2, place2) in itertools.product(ORDERS, ORDERS):
        sort_keys = [("a", order1, place1), ("b", order2, place2)]
        actual = packed_sort_indices(columns, sort_keys)
        assert actual is not None
        np.testing.assert_array_equal(actual, _expected(columns, sort_keys), str(sort_keys))


def test_falls_back_when_it_cannot_pack() -> None:
    wide = COLUMNS["timestamp tz"]  # ~41 bits of range
    assert packed_sort_indices([wide, wide], [("a", "ascending", "at_end")] * 2) is None
    extremes = pa.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max] * (ROWS // 2))
    assert packed_sort_indices([extremes], [("a", "ascending", "at_end")]) is None
    assert packed_sort_indices([COLUMNS["int64 wide"], COLUMNS["bool, NULLs"]],
                               [("a", "ascending", "at_end")] * 2) is None
    for column in (pa.array(np.arange(ROWS, dtype=float)), pa.array(["x"] * ROWS),
                   pa.array(np.arange(ROWS, dtype=np.uint64))):
        assert packed_sort_indices([column], [("a", "ascending", "at_end")]) is None
    small = pa.array(np.arange(MIN_ROWS - 1))
    assert packed_sort_indices([small], [("a", "ascending", "at_end")]) is None


@pytest.mark.parametrize("order,placement", ORDERS)
def test_sorted_runs(order: str, placement: str) -> None:
    """A merge's input: runs each sorted by the keys, ties across runs keep run order."""
    sort_keys = [("a", order, placement), ("b", "ascending", "at_end")]
    pieces = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        run = pa.table({"a": pa.array(rng.integers(0, 4, 2000), mask=rng.random(2000) < 0.1),
                        "b": pa.array(rng.integers(0, 3, 2000))})
        pieces.append(run.take(pc.sort_indices(run, sort_keys=sort_keys)))
    table = pa.concat_tables(pieces)
    actual = packed_sort_indices(table.columns, sort_keys, sorted_runs=True)
    assert actual is not None
    np.testing.assert_array_equal(actual, _expected(table.columns, sort_keys))
