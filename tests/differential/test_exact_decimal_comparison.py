"""Decimals compare exactly, whatever their types.

The common type of DECIMAL(38, 0) and DECIMAL(10, 2) is DECIMAL(38, 0) (beyond 38 digits the
scale gives way, as DuckDB types CASE and UNION), but a comparison in that type rounds -2.25
to -2 and calls them equal: a silent wrong answer in WHERE, CASE, IN, BETWEEN, joins and
correlated subqueries (fuzz seed 9004, a SUM(ceil(..)) compared with a DECIMAL column).
Comparisons now use a decimal256 wide enough for both, against DuckDB at partitions
1/2/3/8 and batch sizes 1/3/7/8192.
"""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from tests.differential.harness import check
from tests.differential.test_regressions import CONFIGS

TABLES = {
    "t": pa.table({"id": pa.array(range(6), pa.int64()),
                   "d": pa.array([Decimal("-2.25"), Decimal("-2.00"), None, Decimal("3.50"),
                                  Decimal("3.00"), Decimal("0.01")], pa.decimal128(10, 2))}),
    "u": pa.table({"h": pa.array([Decimal("-2"), Decimal("3"), None, Decimal(10) ** 30,
                                  Decimal("0")], pa.decimal128(38, 0))}),
    "e": pa.table({"d": pa.array([], pa.decimal128(10, 2))}),
}

QUERIES = [
    "SELECT id, d = CAST(-2 AS DECIMAL(38, 0)) AS e, d < CAST(-2 AS DECIMAL(38, 0)) AS lt, "
    "d >= CAST(3 AS DECIMAL(38, 0)) AS ge, d <> CAST(3 AS DECIMAL(38, 0)) AS ne FROM t "
    "ORDER BY id",
    "SELECT id, CASE d WHEN CAST(-2 AS DECIMAL(38, 0)) THEN 'two' WHEN "
    "CAST(3 AS DECIMAL(38, 0)) THEN 'three' END AS w FROM t ORDER BY id",
    "SELECT id, d IN (CAST(-2 AS DECIMAL(38, 0)), CAST(3 AS DECIMAL(38, 0))) AS i, "
    "d BETWEEN CAST(-2 AS DECIMAL(38, 0)) AND CAST(3 AS DECIMAL(38, 0)) AS b FROM t "
    "ORDER BY id",
    "SELECT d, h FROM t JOIN u ON d = h ORDER BY 1",
    "SELECT d, h FROM t LEFT JOIN u ON d < h AND h < 5 ORDER BY 1, 2",
    "SELECT id FROM t WHERE d IN (SELECT h FROM u) ORDER BY 1",
    "SELECT id FROM t WHERE d NOT IN (SELECT h FROM u WHERE h IS NOT NULL) ORDER BY 1",
    "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.h = t.d) ORDER BY 1",
    "SELECT id, (SELECT count(*) FROM u WHERE u.h > t.d) AS n FROM t ORDER BY 1",
    "SELECT d FROM t INTERSECT SELECT h FROM u ORDER BY 1",
    "SELECT id FROM t WHERE d = (SELECT sum(ceil(d)) FROM t WHERE d > 3) ORDER BY 1",
    "SELECT count(*) FROM e WHERE d = CAST(1 AS DECIMAL(38, 0))",
]


@pytest.mark.parametrize("partitions, batch_size", CONFIGS)
@pytest.mark.parametrize("sql", QUERIES)
def test_decimals_compare_exactly(sql, partitions, batch_size):
    check(sql, TABLES, target_partitions=partitions, batch_size=batch_size)
