"""GROUP BY on one-byte string keys (flags: numbered from their data buffers, keys.py
``one_byte_values``) against DuckDB: NULL flags as a group, empty input, values and Parquet
dictionaries that differ between row groups, keys of other widths beside them, more than 256
distinct values (which no byte holds: the packed and hashed paths), dictionary-typed Arrow
inputs, at partitions 1/2/3/8 and batch sizes 1/3/7/8192."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plansight as ps
from tests.differential.harness import assert_same, check, has_top_level_order_by, run_duckdb


def _tables() -> dict[str, pa.Table]:
    rng = np.random.default_rng(13)
    n = 400
    flag = rng.choice(list("ANR"), n)
    status = rng.choice(list("FO"), n)
    # values differ per stretch of rows (so per batch and per Parquet row group)
    zone = np.where(np.arange(n) < n // 2, rng.choice(list("xyz"), n), rng.choice(list("XY"), n))
    mixed = rng.choice(["a", "bb", "", "c"], n)  # one-byte values beside others
    many = [f"{i % 290:03d}" for i in range(n)]  # 290 distinct three-byte keys (packed)
    wide = [chr(0x100 + i % 300) for i in range(n)]  # 300 distinct one-character keys, 2 bytes
    t = pa.table({
        "rf": pa.array(flag.tolist()),
        "ls": pa.array(status.tolist()),
        "zone": pa.array(zone.tolist()),
        "rfn": pa.array([None if i % 7 == 0 else v for i, v in enumerate(flag.tolist())]),
        "mixed": pa.array(mixed.tolist()),
        "many": pa.array(many),
        "wide": pa.array(wide),
        "bin": pa.array([v.encode() for v in status.tolist()], pa.binary()),
        "k": pa.array(rng.integers(-3, 5, n), pa.int64()),
        "v": pa.array([None if i % 5 == 0 else int(x) for i, x in
                       enumerate(rng.integers(-1000, 1000, n))], pa.int64()),
    })
    return {"t": t, "e": t.slice(0, 0)}


QUERIES = [
    "SELECT rf, ls, sum(v), count(*), avg(v), min(v) FROM t GROUP BY rf, ls ORDER BY rf, ls",
    "SELECT ls, rf, count(v) FROM t GROUP BY ls, rf",
    "SELECT rf, count(*) FROM t GROUP BY rf",
    "SELECT zone, ls, sum(v) FROM t GROUP BY zone, ls ORDER BY zone, ls",
    "SELECT rfn, ls, count(*), sum(v) FROM t GROUP BY rfn, ls ORDER BY rfn NULLS FIRST, ls",
    "SELECT rfn, count(*) FROM t GROUP BY rfn",
    "SELECT rf, mixed, count(*) FROM t GROUP BY rf, mixed",
    "SELECT mixed, count(*) FROM t GROUP BY mixed",
    "SELECT wide, count(*), sum(v) FROM t GROUP BY wide",
    "SELECT rf, wide, count(*) FROM t GROUP BY rf, wide",
    "SELECT many, rf, count(*) FROM t GROUP BY many, rf",
    "SELECT rf, k, ls, sum(v) FROM t GROUP BY rf, k, ls",
    "SELECT bin, rf, count(*) FROM t GROUP BY bin, rf",
    "SELECT ls, count(*), median(v), count(DISTINCT rf) FROM t WHERE rf <> 'N' GROUP BY ls",
    "SELECT rf, ls, count(*) FROM t WHERE v > 0 GROUP BY rf, ls HAVING count(*) > 20",
    "SELECT rf, ls, count(*), sum(v) FROM e GROUP BY rf, ls",
    "SELECT rf, count(*) FROM e GROUP BY rf",
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_flag_keys_match_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)


@pytest.mark.parametrize("sql", QUERIES[:7])
def test_dictionary_typed_arrow_inputs(sql):
    """Flags registered as Arrow dictionaries (as a Parquet reader hands them out)."""
    tables = _tables()
    t = tables["t"]
    encoded = pa.table({name: t[name].dictionary_encode() if t[name].type == pa.string()
                        else t[name] for name in t.column_names})
    for partitions, batch_size in [(1, 8192), (2, 7), (3, 1)]:
        actual_tables = {"t": encoded, "e": encoded.slice(0, 0)}
        session = ps.Session(target_partitions=partitions, batch_size=batch_size)
        for name, table in actual_tables.items():
            session.register(name, table)
        actual = session.sql(sql).to_arrow()
        assert_same(actual, run_duckdb(sql, tables), ordered=has_top_level_order_by(sql),
                    sql=sql)


@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
def test_parquet_flags_whose_dictionaries_differ_per_row_group(tmp_path, partitions):
    """Row groups of 50 rows, sorted so each row group's dictionary of ``zone`` and ``rf``
    holds other values (and NULLs in one of them only)."""
    t = _tables()["t"]
    t = t.sort_by([("zone", "ascending"), ("rf", "ascending")])
    path = str(tmp_path / "t.parquet")
    pq.write_table(t, path, row_group_size=50)
    assert pq.ParquetFile(path).num_row_groups > 4
    for sql in QUERIES[:7]:
        for batch_size in (3, 8192):
            session = ps.Session(target_partitions=partitions, batch_size=batch_size)
            session.register_parquet("t", path)
            session.register("e", t.slice(0, 0))
            actual = session.sql(sql).to_arrow()
            assert_same(actual, run_duckdb(sql, {"t": t, "e": t.slice(0, 0)}),
                        ordered=has_top_level_order_by(sql), sql=sql)


def test_one_byte_values_reads_flags_from_the_data_buffer():
    from plansight.engine.kernels.keys import group_ids, one_byte_values

    flags = pa.chunked_array([pa.array(["A", "N"]), pa.array([], pa.string()),
                              pa.array(["R", "A"]).slice(1)])
    assert one_byte_values(flags).tolist() == [ord("A"), ord("N"), ord("A")]
    assert one_byte_values(pa.array(["A", None])) is None
    assert one_byte_values(pa.array(["A", "BB"])) is None
    assert one_byte_values(pa.array(["", ""])) is None
    assert one_byte_values(pa.array(["A"]).dictionary_encode()) is None
    assert one_byte_values(pa.array(["é"])) is None
    assert one_byte_values(pa.array([], pa.string())).tolist() == []
    assert one_byte_values(pa.array(["x", "y"], pa.large_string())).tolist() == [120, 121]
    ids, groups = group_ids([pa.array(["b", "a", "b"]), pa.array(["F", "F", "F"])])
    assert (ids.tolist(), groups) == ([0, 1, 0], 2)
    ids, groups = group_ids([pa.array(["b", "a", "b", "c"])])
    assert (ids.tolist(), groups) == ([0, 1, 0, 2], 3)
