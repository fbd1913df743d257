"""Integer SUM runs on int64 only when min/max prove no group can wrap; on 128 bits otherwise."""

from __future__ import annotations

import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.functions import aggregate
from tests.differential.harness import check


@pytest.mark.parametrize("values,may_wrap", [
    ([], False),
    ([None, None], False),
    ([1, -5, None, 3], False),
    ([(1 << 62) - 1, 1], False),          # 2 x (2**62 - 1) < 2**63
    ([1 << 62, 1], True),                 # 2 x 2**62 = 2**63
    ([-(1 << 62), 0], True),              # the most negative value counts by magnitude
    ([(1 << 61)] * 4, True),
])
def test_bound(values, may_wrap):
    assert aggregate._sum_may_wrap(pa.chunked_array([pa.array(values, pa.int64())])) \
        is may_wrap


def test_sums_are_exact_where_the_bound_fails():
    s = ps.Session()
    s.register("t", pa.table({"g": [1, 1, 2, 2], "x": [1 << 62, 1 << 62, 1 << 62, (1 << 62) - 1]}))
    total = s.sql("SELECT g, sum(x) FROM t GROUP BY g ORDER BY g").to_arrow()
    assert total.column(1).type == pa.decimal128(38, 0)
    assert [int(v) for v in total.column(1).to_pylist()] == [1 << 63, (1 << 63) - 1]


@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
def test_sums_near_the_bound_match_duckdb(partitions, batch_size):
    n = 64
    x = [((1 << 56) + i) * (-1 if i % 3 == 0 else 1) if i % 5 else None for i in range(n)]
    tables = {"t": pa.table({"g": [i % 4 for i in range(n)], "x": x})}
    check("SELECT g, sum(x), count(x) FROM t GROUP BY g", tables,
          target_partitions=partitions, batch_size=batch_size)
    check("SELECT sum(x) FROM t", tables, target_partitions=partitions, batch_size=batch_size)
