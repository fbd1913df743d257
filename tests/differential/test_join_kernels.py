"""Hash joins on the compiled hash tables against DuckDB: every join type over NULL keys,
duplicate keys on both sides, keys that collide in the table, string and composite keys,
empty build and probe sides, at partitions 1/2/3/8 and batch sizes 1/3/7/8192."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tests.differential.colliding_keys import colliding_keys
from tests.differential.harness import check


def _tables() -> dict[str, pa.Table]:
    rng = np.random.default_rng(12)
    keys = colliding_keys(8, 4) + list(range(-3, 9))

    def side(n: int, null_every: int, seed: int) -> pa.Table:
        r = np.random.default_rng(seed)
        k = r.choice(keys, n).tolist()
        k = [None if i % null_every == 0 else v for i, v in enumerate(k)]
        s = [None if v is None else f"s{abs(v) % 7}" for v in k]
        return pa.table({"k": pa.array(k, pa.int64()), "s": pa.array(s, pa.string()),
                         "g": pa.array(r.integers(0, 3, n), pa.int32()),
                         "v": pa.array(r.integers(0, 1000, n), pa.int64())})

    a, b = side(120, 9, 1), side(70, 5, 2)
    return {"a": a, "b": b, "e": a.slice(0, 0), "u": pa.table({
        "k": pa.array(rng.permutation(keys), pa.int64()),
        "name": [f"u{i}" for i in range(len(keys))]})}


QUERIES = [
    "SELECT a.v, b.v FROM a JOIN b ON a.k = b.k",
    "SELECT a.v, b.v FROM a LEFT JOIN b ON a.k = b.k",
    "SELECT a.v, b.v FROM a RIGHT JOIN b ON a.k = b.k",
    "SELECT a.v, b.v FROM a FULL JOIN b ON a.k = b.k",
    "SELECT a.v, b.v FROM a JOIN b ON a.s = b.s AND a.g = b.g",
    "SELECT a.v, b.v FROM a FULL JOIN b ON a.k = b.k AND a.s = b.s AND a.v < b.v + 500",
    "SELECT v FROM a WHERE k IN (SELECT k FROM b)",
    "SELECT v FROM a WHERE k NOT IN (SELECT k FROM b WHERE k IS NOT NULL)",
    "SELECT v FROM a WHERE k NOT IN (SELECT k FROM b)",
    "SELECT v FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.s = a.s AND b.g = a.g)",
    "SELECT v FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.k = a.k)",
    "SELECT a.v, u.name FROM a JOIN u ON a.k = u.k",
    "SELECT a.v, e.v FROM a LEFT JOIN e ON a.k = e.k",
    "SELECT a.v, e.v FROM e RIGHT JOIN a ON a.k = e.k",
    "SELECT a.v, e.v FROM a FULL JOIN e ON a.s = e.s",
    "SELECT v FROM a WHERE k NOT IN (SELECT k FROM e)",
    "SELECT count(*) FROM e JOIN a ON a.k = e.k",
    "SELECT k, s FROM a INTERSECT SELECT k, s FROM b",
    "SELECT k, s FROM a EXCEPT SELECT k, s FROM b",
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_join_kernels_match_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)


def test_float_join_keys_negative_zero_and_nan_match_duckdb():
    left = pa.table({"x": pa.array([0.0, -0.0, float("nan"), 1.5, None, 2.0]),
                     "i": list(range(6))})
    right = pa.table({"y": pa.array([-0.0, float("nan"), 1.5, 1.5, None]), "j": list(range(5))})
    for partitions in (1, 3):
        check("SELECT i, j FROM l FULL JOIN r ON l.x = r.y", {"l": left, "r": right},
              target_partitions=partitions)
