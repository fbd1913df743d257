"""A Parquet scan partition opens each file once and reads its row groups through that one
reader (engine/catalog.py ``read_stored``'s ``readers``): opening a file per row group was
GIL-held Python work per unit. The rows must not change: every row group read once, in
order, dictionary-read string columns and dynamic join filters included."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps

N = 4_000
ROW_GROUP = 300  # 14 row groups per file


def _write(directory) -> tuple[list[str], dict[str, pa.Table]]:
    tables = {}
    paths = []
    for part in range(2):
        rows = range(part * N, (part + 1) * N)
        table = pa.table({"k": pa.array(list(rows), pa.int64()),
                          "g": pa.array([i % 9 for i in rows], pa.int64()),
                          "s": pa.array([None if i % 17 == 0 else f"m{i % 5}" for i in rows])})
        path = directory / f"part{part}.parquet"
        pq.write_table(table, path, row_group_size=ROW_GROUP)
        paths.append(str(path))
        tables[f"p{part}"] = table
    return paths, tables


@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
def test_one_reader_per_file_and_partition(tmp_path, monkeypatch, partitions):
    paths, _ = _write(tmp_path)
    session = ps.Session(target_partitions=partitions)
    session.register_parquet("t", str(tmp_path / "*.parquet"))
    opened = []
    original = pq.ParquetFile

    def counting(*args, **kwargs):
        opened.append(args[0] if args else kwargs.get("source"))
        return original(*args, **kwargs)

    monkeypatch.setattr(pq, "ParquetFile", counting)
    result = session.sql("SELECT count(*) AS n, sum(k) AS total, count(s) AS named "
                         "FROM t").to_arrow().to_pylist()
    everything = pa.concat_tables([pq.read_table(p) for p in paths])
    assert result == [{"n": 2 * N, "total": sum(range(2 * N)),
                       "named": everything["s"].drop_null().__len__()}]
    # at most one open per (file, partition); 28 row groups would have been 28 opens
    assert 0 < len(opened) <= 2 * partitions
    assert len(opened) < (2 * N) // ROW_GROUP


@pytest.mark.parametrize("partitions", [1, 2, 3])
@pytest.mark.parametrize("batch_size", [1, 7, 8192])
def test_rows_through_a_reused_reader(tmp_path, partitions, batch_size):
    """Grouped strings (dictionary-read) and a join whose key filter prunes row groups and
    filters batches: the rows of the files, each once."""
    _, tables = _write(tmp_path)
    both = pa.concat_tables(list(tables.values()))
    keys = pa.table({"k": pa.array([5, 777, 3_000, 4_100, 7_999], pa.int64())})
    session = ps.Session(target_partitions=partitions, batch_size=batch_size)
    session.register_parquet("t", str(tmp_path / "*.parquet"))
    session.register("keys", keys)
    got = session.sql("SELECT t.k, t.s FROM t JOIN keys ON t.k = keys.k ORDER BY t.k")
    expected = both.join(keys, "k", join_type="inner").sort_by("k").select(["k", "s"])
    assert got.to_arrow().to_pylist() == expected.to_pylist()
    grouped = session.sql("SELECT s, count(*) AS n, sum(g) AS total FROM t GROUP BY s "
                          "ORDER BY s NULLS LAST").to_arrow().to_pylist()
    reference = {}
    for row in both.to_pylist():
        n, total = reference.get(row["s"], (0, 0))
        reference[row["s"]] = (n + 1, total + row["g"])
    assert grouped == [{"s": s, "n": n, "total": total} for s, (n, total) in
                       sorted(reference.items(), key=lambda item: (item[0] is None, item[0]))]
