"""Multi-column join keys: combined codes are renumbered before they could overflow."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.physical.joins import key_index


@pytest.mark.parametrize("max_code", [1 << 62, 64, 8])
def test_three_column_keys_match_exactly_whatever_the_code_space(monkeypatch, max_code):
    monkeypatch.setattr(key_index, "_MAX_CODE", max_code)  # force the renumbering path
    rng = np.random.default_rng(5)
    n = 3000
    a, b, c = (rng.integers(0, 12, n) for _ in range(3))
    left = pa.table({"a": a, "b": b, "c": c, "i": np.arange(n)})
    right = pa.table({"a": a[::3], "b": b[::3], "c": np.where(np.arange(len(a[::3])) % 5 == 0,
                                                          None, c[::3]),
                      "j": np.arange(len(a[::3]))})
    s = ps.Session(target_partitions=1)
    s.register("l", left)
    s.register("r", right)
    got = s.sql("SELECT i, j FROM l JOIN r USING (a, b, c)").to_arrow()
    pairs = sorted(zip(got.column("i").to_pylist(), got.column("j").to_pylist()))
    index = {}
    for j, key in enumerate(zip(right["a"].to_pylist(), right["b"].to_pylist(),
                                right["c"].to_pylist())):
        if None not in key:
            index.setdefault(key, []).append(j)
    expected = sorted((i, j) for i, key in enumerate(zip(a.tolist(), b.tolist(), c.tolist()))
                      for j in index.get(key, []))
    assert pairs == expected and len(expected) > 0


def test_tracked_code_space_covers_every_key_column():
    """The overflow check needs the true size of the combined code space: all columns'
    cardinalities, the first one included."""
    keys = [pa.array(np.arange(60) % m) for m in (12, 5, 3)]
    index = key_index.KeyIndex(keys)
    assert index._space == 12 * 5 * 3
