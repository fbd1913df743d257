"""Join probe shortcuts: unique build keys match by one gather; a dense integer key set
filters as its range."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from plansight.engine.physical.dynamic_filter import DynamicFilter
from plansight.engine.physical.joins import key_index
from plansight.engine.physical.joins.output import expand_matches
from tests.differential.harness import check


@pytest.mark.parametrize("build", [[5, 3, None, 9, 7], [5, 3, 5, None, 9]])
def test_matches_equal_expand_matches(build):
    index = key_index.KeyIndex([pa.array(build, pa.int64())])
    assert (index.build_row is not None) == (build == [5, 3, None, 9, 7])
    probe = pa.array([9, 4, None, 5, 3, 3, 11], pa.int64())
    codes, _ = index.probe_codes([probe])
    got = index.matches(codes)
    if index.build_row is None:
        starts, counts = index.starts, index.counts
    else:  # a unique build keeps neither: every group starts at its row, one row long
        assert index.starts is None and index.counts is None
        starts, counts = np.arange(len(index.order)), np.ones(len(index.order), np.int64)
    want = expand_matches(codes, starts, counts, index.order)
    assert [a.tolist() for a in got] == [a.tolist() for a in want]
    expected = [build.count(v) if v is not None else 0 for v in probe.to_pylist()]
    assert index.match_counts(codes).tolist() == expected
    hits = [(i, build.index(v)) for i, v in enumerate(probe.to_pylist())
            if v is not None and v in build]
    if index.build_row is not None:
        assert list(zip(*[a.tolist() for a in got])) == hits


def test_every_probe_row_matching_keeps_the_probe_rows_in_order():
    index = key_index.KeyIndex([pa.array([2, 0, 1])])
    codes, _ = index.probe_codes([pa.array([1, 1, 2, 0])])
    probe_idx, build_idx = index.matches(codes)
    assert probe_idx.tolist() == [0, 1, 2, 3] and build_idx.tolist() == [2, 2, 0, 1]


def _filter(keys) -> DynamicFilter:
    f = DynamicFilter("HashJoin[1]", keep_nulls=False)
    f.start("run")
    f.publish_build_keys(pa.array(keys, pa.int64()))
    return f


def test_dense_key_set_filters_as_its_range():
    f = _filter(list(range(10, 20)) + [None])
    assert f.key_set is not None and f.describe().endswith("IN (10 keys)")
    assert f._dense_set  # the mask below takes the range path
    assert f.mask(pa.array([10, 15, 19], pa.int64())) is None  # all inside: nothing to drop
    assert f.mask(pa.array([9, 10, None, 19, 20], pa.int64())).to_pylist() == \
        [False, True, False, True, False]
    assert f.unit_may_match((0, 9, 0)) is False and f.unit_may_match((19, 30, 0)) is True


def test_key_set_with_a_gap_still_tests_membership():
    f = _filter([10, 11, 13])
    assert not f._dense_set
    assert f.mask(pa.array([10, 12, 13], pa.int64())).to_pylist() == [True, False, True]


def _tables():
    rng = np.random.default_rng(11)
    n = 1500
    k = rng.integers(-3, 45, n)
    probe = pa.table({"k": pa.array(np.where(np.arange(n) % 29 == 0, None, k).tolist(),
                                    pa.int64()), "v": rng.integers(0, 100, n)})
    dim = pa.table({"k": list(range(40)), "name": [f"n{i % 6}" for i in range(40)]})
    sparse = pa.table({"k": list(range(0, 80, 2)) + [None],
                       "name": [f"s{i % 5}" for i in range(41)]})
    return {"p": probe, "d": dim, "s": sparse}


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", [
    "SELECT name, count(*), sum(v) FROM p JOIN d ON p.k = d.k GROUP BY name",
    "SELECT name, count(*), sum(v) FROM p JOIN s ON p.k = s.k GROUP BY name",
    "SELECT p.k, v, name FROM p LEFT JOIN d ON p.k = d.k",
    "SELECT p.k, v, name FROM d RIGHT JOIN p ON p.k = d.k",
    "SELECT d.k, name, v FROM d FULL JOIN p ON p.k = d.k",
    "SELECT k, v FROM p WHERE k IN (SELECT k FROM s)",
    "SELECT k, v FROM p WHERE k NOT IN (SELECT k FROM d)",
])
def test_joins_match_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)
