"""RANGE and GROUPS frames (the default one too) over ORDER BY keys that never tie within a
partition run as their ROWS frames in HashWindowAggExec, and rank / dense_rank as the row
number, without peer groups; COUNT of a column without NULLs counts rows, and a running
count of rows is the row number: the same answers as DuckDB, and a single tie anywhere keeps
the peer-group path."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from plansight.engine.functions.window.permutation import sort_permutation_unique, sort_ranks
from tests.differential.harness import check


def _table(rows: int, partitions: int, seed: int, tie: bool) -> pa.Table:
    """``(p, o, id)`` unique in (p, o) -- NULL p and NULL o included -- unless ``tie``
    copies one row's o onto another row of its partition."""
    rng = np.random.default_rng(seed)
    p = rng.integers(0, partitions, rows).astype(object)
    p[rng.random(rows) < 0.1] = None
    o = rng.permutation(rows).astype(object)  # distinct over the table
    if rows:
        o[int(rng.integers(0, rows))] = None  # one NULL key: no tie with another NULL
    if tie and rows > 1:
        first = next(i for i in range(rows) if p[i] == p[rows - 1] and i != rows - 1)
        o[rows - 1] = o[first]
    v = np.round(rng.normal(size=rows) * 10, 2).astype(object)
    v[rng.random(rows) < 0.15] = None
    return pa.table({"id": pa.array(np.arange(rows), pa.int64()),
                     "p": pa.array(list(p), pa.int64()), "o": pa.array(list(o), pa.int64()),
                     "v": pa.array(list(v), pa.float64())})


QUERIES = [
    "SELECT id, count(v) OVER (PARTITION BY p ORDER BY o) AS w FROM t",
    "SELECT id, sum(v) OVER (PARTITION BY p ORDER BY o DESC NULLS FIRST) AS w FROM t",
    "SELECT id, avg(v) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN CURRENT ROW AND "
    "UNBOUNDED FOLLOWING) AS w FROM t",
    "SELECT id, min(v) OVER (PARTITION BY p ORDER BY o GROUPS BETWEEN UNBOUNDED PRECEDING "
    "AND CURRENT ROW EXCLUDE CURRENT ROW) AS w FROM t",
    "SELECT id, max(v) OVER (PARTITION BY p ORDER BY v, o RANGE BETWEEN UNBOUNDED PRECEDING "
    "AND UNBOUNDED FOLLOWING) AS w FROM t",
    "SELECT id, first_value(v) OVER (PARTITION BY p ORDER BY o DESC RANGE BETWEEN CURRENT "
    "ROW AND CURRENT ROW) AS w, rank() OVER (PARTITION BY p ORDER BY o) AS r FROM t",
    "SELECT id, count(*) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN UNBOUNDED PRECEDING "
    "AND CURRENT ROW EXCLUDE TIES) AS w FROM t",
    "SELECT id, count(id) OVER (PARTITION BY p ORDER BY o) AS w, count(o) OVER (PARTITION BY "
    "p ORDER BY o ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS c, count(1) OVER (PARTITION "
    "BY p ORDER BY id DESC) AS n, count(id) FILTER (WHERE v > 0) OVER (PARTITION BY p "
    "ORDER BY o, id) AS f FROM t",
    "SELECT id, count(*) OVER (PARTITION BY p ORDER BY o ROWS BETWEEN UNBOUNDED PRECEDING "
    "AND CURRENT ROW) AS w, count(id) OVER (PARTITION BY p ORDER BY o ROWS UNBOUNDED "
    "PRECEDING EXCLUDE CURRENT ROW) AS x, count(*) FILTER (WHERE v < 0) OVER (PARTITION BY "
    "p ORDER BY o, id ROWS UNBOUNDED PRECEDING) AS f, count(v) OVER (PARTITION BY p ORDER "
    "BY o, id ROWS UNBOUNDED PRECEDING) AS c FROM t",
    "SELECT id, dense_rank() OVER (PARTITION BY p ORDER BY o DESC NULLS LAST) AS w, "
    "rank() OVER (PARTITION BY p ORDER BY v, o) AS r, lag(v) OVER (PARTITION BY p ORDER BY o, "
    "id) AS l FROM t",
]


@pytest.mark.parametrize("sql", QUERIES)
@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("partitions", [1, 3])
def test_tie_free_peer_frames_match_duckdb(sql, tie, partitions):
    for rows, groups, seed in ((60, 4, 1), (200, 80, 2), (1, 1, 3), (0, 1, 4)):
        table = _table(rows, groups, seed, tie)
        for batch_size in (1, 7, 8192):
            check(sql, {"t": table}, batch_size=batch_size, target_partitions=partitions)


def test_direct_placement_reports_distinct_keys_and_ties_report_unknown():
    codes, ranks = np.array([1, 0, 1, 0]), np.array([2, 2, 0, 1])
    perm, unique = sort_permutation_unique([(codes, 2), (ranks, 3)])
    assert perm.tolist() == [3, 1, 2, 0] and unique
    tied = np.array([2, 2, 2, 1])  # rows 0 and 2: partition 1, rank 2
    perm, unique = sort_permutation_unique([(codes, 2), (tied, 3)])
    assert perm.tolist() == [3, 1, 0, 2] and not unique  # stable: row 0 before row 2
    wide = np.array([0, 10**9, 5, 7])  # too sparse to place: radix sort, "not known"
    perm, unique = sort_permutation_unique([(codes, 2), (wide, 10**9 + 1)])
    assert perm.tolist() == [3, 1, 0, 2] and not unique


@pytest.mark.parametrize("keys", [1, 2, 3])
@pytest.mark.parametrize("tie", [False, True])
def test_placement_sorts_like_a_stable_lexsort(keys, tie):
    """The compiled placement (one key, two, or the first ones combined) gives numpy's
    stable lexicographic order, with uint64 ranks as the window's sort_ranks makes them."""
    rng = np.random.default_rng(keys * 2 + tie)
    n = 5_000
    # a key space of at most 4n: rows are placed (keys > 1: the first keys combined)
    cardinalities = {1: [n + 17], 2: [60, 150], 3: [20, 50, 7]}[keys]
    space = int(np.prod(cardinalities))
    # distinct tuples: a sample of the key space without replacement, unpacked digit by digit
    flat = rng.choice(space, size=n, replace=tie)
    if tie:
        flat[rng.integers(0, n, 50)] = flat[0]
    columns = []
    for cardinality in reversed(cardinalities):
        columns.append(flat % cardinality)
        flat = flat // cardinality
    columns.reverse()
    pairs = [(c.astype(np.uint64) if i else c.astype(np.int64), k)
             for i, (c, k) in enumerate(zip(columns, cardinalities))]
    perm, unique = sort_permutation_unique(pairs)
    assert perm.tolist() == np.lexsort(columns[::-1]).tolist()
    assert unique == (not tie)


@pytest.mark.parametrize("typ", [pa.int64(), pa.int32(), pa.uint64(), pa.date32(),
                                 pa.bool_()])
@pytest.mark.parametrize("descending", [False, True])
def test_ranks_of_a_chunked_column_equal_those_of_the_combined_one(typ, descending):
    """A chunked integer column is ranked chunk by chunk into one array (no combined copy):
    the same ranks and bits as the one-chunk column, NULL-free or with NULLs."""
    rng = np.random.default_rng(5)
    numbers = rng.integers(0, 2 if typ == pa.bool_() else 1000, 300)
    for nulls in (False, True):
        mask = (rng.random(300) < 0.1) if nulls else None
        if typ == pa.bool_():
            flat = pa.array(numbers.astype(bool), mask=mask)
        else:  # dates through their int32 days
            flat = pa.array(numbers, mask=mask).cast(typ if pa.types.is_integer(typ) else
                                                     pa.int32()).view(typ)
        chunked = pa.chunked_array([flat.slice(0, 7), flat.slice(7, 0), flat.slice(7)])
        want, want_bits = sort_ranks(flat, descending)
        got, bits = sort_ranks(chunked, descending)
        assert got.tolist() == want.tolist() and bits == want_bits
    assert sort_ranks(pa.chunked_array([], typ))[0].tolist() == []
