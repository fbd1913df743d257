"""Full sorts (SortExec without fetch, SortPreservingMergeExec) versus DuckDB.

A generated table with heavy ties on every key, NULLs, NaN, strings (plain and dictionary)
and a unique ``id``: multi-key, DESC, NULLS FIRST/LAST. Every query runs at batch sizes
1, 3, 7 and 8192 and at 1, 2, 3 and 8 partitions, so the sort sees one chunk and hundreds,
and the merge sees one stream and many, some of them empty. The ordered comparison checks
the keys row by row and tied rows as multisets; queries ending in ``id`` are fully ordered,
so they also check that no row is lost or duplicated at a chunk or run boundary.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tests.differential.harness import check
from tests.differential.tables import intervals

ROWS = 600


def _table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 7, rows)
    f = rng.integers(-3, 4, rows).astype(float) / 2
    f[rng.random(rows) < 0.05] = np.nan
    words = np.array(["", "a", "B", "b", "é", "中文", "zz", "a b"])
    s = words[rng.integers(0, len(words), rows)]
    return pa.table({
        "id": pa.array(np.arange(rows)),
        "k": pa.array(k, mask=rng.random(rows) < 0.1),
        "f": pa.array(f, mask=rng.random(rows) < 0.1),
        "s": pa.array(s, mask=rng.random(rows) < 0.1),
        "ds": pa.array(s, mask=rng.random(rows) < 0.1).dictionary_encode(),
        "big": pa.array(rng.integers(-(2**62), 2**62, rows)),
    })


TABLES = {"r": _table(ROWS, 7), "r_empty": _table(ROWS, 7).slice(0, 0),
          "iv": intervals(ROWS // 3, 5), "iv_empty": intervals(ROWS // 3, 5).slice(0, 0)}

QUERIES = [
    "SELECT * FROM r ORDER BY big",
    "SELECT id, k FROM r ORDER BY k, id",
    "SELECT id, k, s FROM r ORDER BY k DESC NULLS FIRST, s NULLS LAST, id DESC",
    "SELECT k, s FROM r ORDER BY k NULLS FIRST, s DESC NULLS LAST",
    "SELECT s, f, id FROM r ORDER BY s DESC NULLS FIRST, f NULLS FIRST, id",
    "SELECT f, k FROM r ORDER BY f DESC NULLS LAST, k",
    "SELECT ds, id FROM r ORDER BY ds NULLS FIRST, id DESC",
    "SELECT id, k FROM r ORDER BY k + 1 DESC, id",
    "SELECT id, k, f FROM r WHERE k > 2 ORDER BY f, k DESC, id",
    "SELECT k, count(*) AS c FROM r GROUP BY k ORDER BY c DESC, k NULLS FIRST",
    "SELECT * FROM r_empty ORDER BY k, s",
    # INTERVAL keys order like DuckDB (normalized, a month = 30 days); the text shows that
    # equal intervals keep their own spelling
    "SELECT id, iv::VARCHAR AS v FROM iv ORDER BY iv, id",
    "SELECT id, iv::VARCHAR AS v FROM iv ORDER BY iv DESC NULLS FIRST, id DESC",
    "SELECT id FROM iv ORDER BY iv NULLS FIRST, id LIMIT 9",
    "SELECT id FROM iv_empty ORDER BY iv",
]

CONFIGS = [pytest.param({"batch_size": b, "target_partitions": p}, id=f"b{b}p{p}")
           for b in (1, 3, 7, 8192) for p in (1, 2, 3, 8)]


@pytest.mark.parametrize("options", CONFIGS)
@pytest.mark.parametrize("sql", QUERIES)
def test_full_sort(sql: str, options: dict) -> None:
    check(sql, TABLES, **options)


def _integer_keys(rows: int, seed: int) -> pa.Table:
    """Keys that the packed sort handles (integers, dates, timestamps, booleans)."""
    rng = np.random.default_rng(seed)
    day = rng.integers(18_000, 18_040, rows).astype(np.int32)
    return pa.table({
        "id": pa.array(np.arange(rows)),
        "k": pa.array(rng.integers(-3, 4, rows), mask=rng.random(rows) < 0.1),
        "u": pa.array(rng.integers(0, 200, rows).astype(np.uint8)),
        "d": pa.array(day, mask=rng.random(rows) < 0.1).cast(pa.date32()),
        "ts": pa.array(rng.integers(-10**12, 10**12, rows)).cast(pa.timestamp("us")),
        "b": pa.array(rng.random(rows) < 0.5, mask=rng.random(rows) < 0.2),
        "wide": pa.array(rng.integers(-(2**62), 2**62, rows)),  # too wide to pack with more
    })


PACKED_QUERIES = [
    "SELECT k, id FROM w ORDER BY k DESC NULLS FIRST, id",
    "SELECT k, u, id FROM w ORDER BY k NULLS LAST, u DESC, id DESC",
    "SELECT d, b, id FROM w ORDER BY d DESC NULLS LAST, b NULLS FIRST, id",
    "SELECT ts, k FROM w ORDER BY ts DESC",
    "SELECT b, k, wide FROM w ORDER BY b, k, wide",
    "SELECT k, d FROM w ORDER BY k NULLS FIRST, d",
]


@pytest.mark.parametrize("options", [
    pytest.param({"batch_size": b, "target_partitions": p}, id=f"b{b}p{p}")
    for b, p in ((7, 1), (8192, 1), (1000, 2), (8192, 3))])
@pytest.mark.parametrize("sql", PACKED_QUERIES)
def test_integer_keys(sql: str, options: dict) -> None:
    """Enough rows per partition for the packed-key sort (and the merge of its runs)."""
    check(sql, {"w": _integer_keys(12_000, 5)}, **options)


def test_many_chunks_with_ties() -> None:
    """20,000 rows in 7-row batches (~2,900 chunks) on 3 partitions, 50 distinct keys: chunk
    boundaries inside runs of ties, every row kept once."""
    table = _table(20_000, 11)
    check("SELECT k, s, id FROM r ORDER BY k DESC, s NULLS FIRST, id", {"r": table},
          batch_size=7, target_partitions=3)
    check("SELECT k, s, id FROM r ORDER BY k DESC, s NULLS FIRST, id", {"r": table},
          batch_size=7, target_partitions=1)
