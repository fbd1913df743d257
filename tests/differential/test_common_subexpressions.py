"""A projection computes an expression its outputs share once per batch, against DuckDB:
decimals (TPC-H Q1's shape), NULLs, nesting (a shared part of a shared part), CASE branches
that must still run only on their own rows, -0.0 apart from 0.0, at partitions 1/2/3/8 and
batch sizes 1/3/7/8192; and random() is never shared."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import plansight as ps
from plansight.engine.physical.projection import ProjectionExec
from tests.differential.harness import check


def _tables() -> dict[str, pa.Table]:
    r = np.random.default_rng(9)
    n = 300

    def decimals(scale_max: int, every: int) -> pa.Array:
        values = [None if i % every == 0 else f"{v / 100:.2f}"
                  for i, v in enumerate(r.integers(0, scale_max, n))]
        return pa.array([None if v is None else __import__("decimal").Decimal(v)
                         for v in values], pa.decimal128(15, 2))

    d = r.integers(-2, 3, n)
    return {"t": pa.table({"price": decimals(10_000_000, 23), "discount": decimals(11, 19),
                           "tax": decimals(9, 29), "flag": pa.array(r.integers(0, 3, n),
                                                                    pa.int32()),
                           "d": pa.array([None if i % 13 == 0 else int(v)
                                          for i, v in enumerate(d)], pa.int64()),
                           "x": pa.array(r.normal(size=n), pa.float64())})}


QUERIES = [
    "SELECT flag, sum(price * (1 - discount)), sum(price * (1 - discount) * (1 + tax)), "
    "count(*) FROM t GROUP BY flag",
    "SELECT price * (1 - discount) AS a, price * (1 - discount) * (1 + tax) AS b, "
    "(1 - discount) * tax AS c FROM t",
    # the division only where the CASE allows it, however often it is written
    "SELECT CASE WHEN d <> 0 THEN 10 // d END, CASE WHEN d <> 0 THEN 10 // d + 1 END, "
    "coalesce(10 // nullif(d, 0), -1) FROM t",
    "SELECT x * 0.0, x * -0.0, x * 0.0 + 1 FROM t",
    "SELECT abs(x) + 1, (abs(x) + 1) * 2, sqrt(abs(x) + 1) FROM t WHERE flag = 1",
]


@pytest.mark.parametrize("batch_size", [1, 3, 7, 8192])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("sql", QUERIES)
def test_common_subexpressions_match_duckdb(sql, partitions, batch_size):
    check(sql, _tables(), target_partitions=partitions, batch_size=batch_size)


def _projections(sql: str) -> list[ProjectionExec]:
    session = ps.Session(target_partitions=1)
    session.register("t", _tables()["t"])
    plan = session.sql(sql).physical
    return [op for _, op in plan.walk() if isinstance(op, ProjectionExec)]


def test_the_shared_product_is_computed_once():
    shared = [str(e) for p in _projections(QUERIES[1]) for _, e in p._common]
    # (1 - discount), which the product shares with the third output, then the product
    assert shared == ["1 - discount", "price * __common"]


def test_random_and_conditional_branches_are_not_shared():
    assert [p._common for p in _projections("SELECT random(), random() FROM t")] == [[]]
    assert all(p._common == [] for p in _projections(QUERIES[2]))
