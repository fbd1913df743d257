"""Column statistics of sources (engine/statistics.py): Parquet metadata, in-memory tables
(exact and sampled distinct counts), NULLs, empty tables, strings, decimals and dates."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps
import plansight.engine.catalog as catalog
from plansight.engine.catalog import CsvSource, DataFrameSource, MemorySource, ParquetSource
from plansight.engine.statistics import (
    EXACT_DISTINCT_ROWS,
    ColumnStatistics,
    from_row_groups,
    sampled_distinct,
)

D = decimal.Decimal


def _table() -> pa.Table:
    n = 1000
    k = np.arange(n)
    return pa.table({
        "k": pa.array(k, pa.int64()),
        "g": pa.array(k % 10, pa.int32()),
        "n": pa.array([None if i % 4 == 0 else i for i in range(n)], pa.int64()),
        "s": pa.array([f"v{i % 50:02d}" for i in range(n)]),
        "m": pa.array([D(i % 200) / 100 for i in range(n)], pa.decimal128(12, 2)),
        "d": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=int(i % 100))
                       for i in range(n)]),
        "f": pa.array(k * 0.5),
        "b": pa.array(k % 3 == 0),
    })


EXPECTED = {
    "k": ColumnStatistics(0, 999, 0, 1000.0),
    "g": ColumnStatistics(0, 9, 0, 10.0),
    "n": ColumnStatistics(1, 999, 250, 750.0),
    "s": ColumnStatistics("v00", "v49", 0, 50.0),
    "m": ColumnStatistics(D("0.00"), D("1.99"), 0, 200.0),
    "d": ColumnStatistics(datetime.date(2020, 1, 1), datetime.date(2020, 4, 9), 0, 100.0),
    "f": ColumnStatistics(0.0, 499.5, 0, 1000.0),
    "b": ColumnStatistics(False, True, 0, 2.0),
}


@pytest.mark.parametrize("column", sorted(EXPECTED))
def test_memory_statistics_are_exact_for_a_small_table(column):
    assert MemorySource(_table()).column_statistics(column) == EXPECTED[column]


@pytest.mark.parametrize("column", sorted(EXPECTED))
def test_parquet_statistics_come_from_row_group_metadata(tmp_path, column):
    path = tmp_path / "t.parquet"
    pq.write_table(_table(), path, row_group_size=300)  # 4 row groups
    stats = ParquetSource(str(path)).column_statistics(column)
    expected = EXPECTED[column]
    assert (stats.min, stats.max, stats.null_count) == \
        (expected.min, expected.max, expected.null_count)
    if column in ("g", "d", "b"):
        # integers, dates, booleans: the key range (and the rows) bound the distinct count
        room = {"g": 10.0, "d": 100.0, "b": 2.0}[column]
        assert (stats.distinct_count, stats.distinct_is_bound) == (room, True)
    elif column in ("k", "n"):
        # sorted: the row groups' ranges do not overlap, and one of them is counted
        assert (stats.distinct_count, stats.distinct_is_bound) == \
            (expected.distinct_count, False)
    else:  # the range says nothing: counted in the row groups (all of them, 1000 rows)
        assert (stats.distinct_count, stats.distinct_is_bound) == \
            (expected.distinct_count, False)


def test_a_clustered_parquet_key_is_counted_in_one_row_group_not_bounded(tmp_path):
    """Four rows per order key (as l_orderkey): the range bounds the distinct count at the
    rows, 4x too many; the row groups' ranges do not overlap, so one row group's count per
    row scales to the table. Overlapping ranges (the same keys shuffled) keep the bound."""
    keys = np.repeat(np.arange(1, 2501) * 4, 4)  # 2,500 keys spread over 1..10,000
    path = tmp_path / "clustered.parquet"
    pq.write_table(pa.table({"k": keys}), path, row_group_size=1000)
    stats = ParquetSource(str(path)).column_statistics("k")
    assert (stats.distinct_count, stats.distinct_is_bound) == (2500.0, False)
    shuffled = tmp_path / "shuffled.parquet"
    pq.write_table(pa.table({"k": np.random.default_rng(3).permutation(keys)}), shuffled,
                   row_group_size=1000)
    stats = ParquetSource(str(shuffled)).column_statistics("k")
    assert (stats.distinct_count, stats.distinct_is_bound) == (9997.0, True)


def test_parquet_distinct_counts_of_row_groups_add_up():
    groups = [(0, 99, 0, 100), (100, 199, 3, 100)]
    assert from_row_groups(groups, 203) == ColumnStatistics(0, 199, 3, 200.0)
    # one row group without statistics: nothing known
    assert from_row_groups(groups + [(None, None, None, None)], 300) is None


def test_parquet_string_distinct_count_is_sampled_from_whole_row_groups(tmp_path):
    n = EXACT_DISTINCT_ROWS * 2
    values = pa.array([f"key{i % 5000}" for i in range(n)])
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"s": values}), path, row_group_size=n // 16)
    stats = ParquetSource(str(path)).column_statistics("s")
    assert stats.distinct_count == pytest.approx(5000, rel=0.05)
    assert not stats.distinct_is_bound


def test_empty_tables_have_no_values(tmp_path):
    empty = pa.table({"k": pa.array([], pa.int64()), "s": pa.array([], pa.string())})
    for column in ("k", "s"):
        stats = MemorySource(empty).column_statistics(column)
        assert stats == ColumnStatistics(None, None, 0, 0.0)
    path = tmp_path / "empty.parquet"
    pq.write_table(empty, path)
    assert ParquetSource(str(path)).column_statistics("k") == \
        ColumnStatistics(None, None, 0, 0.0)


def test_an_all_null_column_has_nulls_and_no_values():
    stats = MemorySource(pa.table({"x": pa.array([None] * 5, pa.int64())})).column_statistics("x")
    assert stats == ColumnStatistics(None, None, 5, 0.0)


def test_a_large_memory_table_samples_its_distinct_count():
    n = EXACT_DISTINCT_ROWS * 4
    k = np.arange(n)
    table = pa.table({"key": k, "sorted_repeats": k // 4, "few": k % 7,
                      "text": pa.array(np.char.add("t", (k % 1000).astype(str)))})
    source = MemorySource(table)
    assert source.column_statistics("key").distinct_count == pytest.approx(n, rel=0.01)
    # sorted, each value 4 times: an even spread sees it as a prefix would not
    assert source.column_statistics("sorted_repeats").distinct_count == \
        pytest.approx(n // 4, rel=0.25)
    assert source.column_statistics("few").distinct_count == 7
    assert source.column_statistics("text").distinct_count == pytest.approx(1000, rel=0.05)


def test_the_jackknife_estimate_at_its_extremes():
    assert sampled_distinct(pa.array(range(100)), 10_000) == pytest.approx(10_000)
    assert sampled_distinct(pa.array([1, 2, 3] * 30 + [None] * 10), 10_000) == 3
    assert sampled_distinct(pa.array([None, None], pa.int64()), 100) == 0


def test_statistics_are_computed_once_per_registration(monkeypatch):
    calls = []
    real = catalog.from_arrow

    def counting(values):
        calls.append(len(values))
        return real(values)

    monkeypatch.setattr(catalog, "from_arrow", counting)
    session = ps.Session()
    session.register("t", _table())
    session.register("u", pa.table({"g": pa.array(range(10), pa.int32())}))
    for _ in range(3):
        session.sql("SELECT count(*) FROM t JOIN u ON t.g = u.g WHERE t.k < 10").to_arrow()
    # t.k (filter), t.g and u.g (join keys): each once, not once per query
    assert len(calls) == 3


def test_a_dataframe_converts_only_the_column_asked_about():
    frame = pd.DataFrame({"a": [1, 2, 2, None], "b": ["x", "y", "z", "w"]})
    source = DataFrameSource(frame)
    assert source.column_statistics("a") == ColumnStatistics(1.0, 2.0, 1, 2.0)
    assert set(source._columns) == {"a"}


def test_csv_sources_know_nothing(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a\n1\n2\n")
    assert CsvSource(str(path)).column_statistics("a") is None


def test_interpolation_over_whole_values_and_the_number_line():
    ints = ColumnStatistics(0, 99, 0, 100.0)
    assert ints.fraction_between(None, 25, high_inclusive=False) == 0.25
    assert ints.fraction_between(10, 19) == 0.1
    assert ints.fraction_between(200, None) == 0.0
    dates = ColumnStatistics(datetime.date(2020, 1, 1), datetime.date(2020, 1, 10))
    assert dates.fraction_between(datetime.date(2020, 1, 6), None) == 0.5
    floats = ColumnStatistics(0.0, 10.0)
    assert floats.fraction_between(2.5, 5.0) == 0.25
    money = ColumnStatistics(D("0.00"), D("2.00"))
    assert money.fraction_between(None, D("0.50")) == 0.25
    assert ColumnStatistics("a", "z").fraction_between("c", None) is None
