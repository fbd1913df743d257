"""ORDER BY, window ORDER BY, MIN/MAX and ``<`` / ``<=`` / ``>`` / ``>=`` on structs and lists, in
DuckDB's order: field by field, element by element with a prefix first, a NULL field or
element after every value (before, in DESC). Arrow sorts no nested values: ORDER BY one
failed with Arrow's "Sorting not supported", and ``<`` with an InternalError."""

from __future__ import annotations

import pyarrow as pa
import pytest

from plansight.engine.kernels.order_keys import order_bytes
from tests.differential.harness import check

NAN = float("nan")

T = pa.table({
    "k": pa.array(range(12), pa.int64()),
    "l": pa.array([[1, 2], [1], [1, None], None, [], [None], [0, 5], [1, 2, 3], [1, 2],
                   [-3], [1, 2, 3], None], pa.list_(pa.int64())),
    "s": pa.array([{"a": 1, "b": "x"}, {"a": None, "b": "y"}, {"a": 1, "b": None}, None,
                   {"a": 0, "b": "z"}, {"a": 1, "b": "x"}, {"a": -1, "b": ""},
                   {"a": 1, "b": "xa"}, {"a": 1, "b": "x\x00"}, {"a": None, "b": None},
                   {"a": 0, "b": "z"}, {"a": 2, "b": "a"}],
                  pa.struct([("a", pa.int32()), ("b", pa.string())])),
    "f": pa.array([[1.5], [NAN], [-0.0], [0.0], [-1.0], [float("-inf")], None, [],
                   [float("inf")], [0.0, NAN], [-0.0, 1.0], [None]], pa.list_(pa.float64())),
    "w": pa.array([["ab"], ["a"], ["a", None], ["b"], [""], ["a", ""], None, ["ab"], [],
                   [None, "a"], ["a"], ["ba"]], pa.list_(pa.string())),
    "n": pa.array([[[1], [2]], [[1]], [[1, 2]], [[]], [], None, [None], [[1], None],
                   [[0, 9]], [[1], [2]], [[1], [2, 3]], [[2]]], pa.list_(pa.list_(pa.int64()))),
})
TABLES = {"t": T, "e": T.slice(0, 0)}

QUERIES = [
    "SELECT l, k FROM t ORDER BY l, k",
    "SELECT l, k FROM t ORDER BY l DESC, k",
    "SELECT l, k FROM t ORDER BY l NULLS FIRST, k DESC",
    "SELECT l, k FROM t ORDER BY l DESC NULLS LAST, k LIMIT 5",
    "SELECT s, k FROM t ORDER BY s, k",
    "SELECT s, k FROM t ORDER BY s DESC, k",
    "SELECT f, k FROM t ORDER BY f, k",
    "SELECT w, k FROM t ORDER BY w DESC, k",
    "SELECT n, k FROM t ORDER BY n, k",
    "SELECT k, row_number() OVER (ORDER BY l, k) AS r, rank() OVER (ORDER BY s DESC) AS q "
    "FROM t",
    "SELECT k, sum(k) OVER (PARTITION BY l IS NULL ORDER BY w, k) AS c FROM t",
    "SELECT k FROM t WHERE l < [1, 2]",
    "SELECT k FROM t WHERE l >= [1, NULL]",
    "SELECT k FROM t WHERE s > {'a': 1, 'b': 'x'}",
    "SELECT k FROM t WHERE f <= [0.0]",
    "SELECT a.k, b.k FROM t a, t b WHERE a.l < b.l AND a.k < 4",
    "SELECT k, l < [k - 5, 1] AS lt, s >= {'a': 1, 'b': 'x'} AS ge FROM t",
    "SELECT l, k FROM e ORDER BY l",
    "SELECT k % 3 AS g, min(l) AS lo, max(l) AS hi, min(s) AS slo, max(w) AS whi "
    "FROM t GROUP BY g",
    "SELECT min(n) AS lo, max(n) AS hi, max(f) AS fhi, min(f) AS flo FROM t",
    "SELECT min(l) AS lo, max(s) AS hi FROM e",
]

CONFIGS = [
    pytest.param({"batch_size": 1, "target_partitions": 1}, id="b1p1"),
    pytest.param({"batch_size": 3, "target_partitions": 2}, id="b3p2"),
    pytest.param({"batch_size": 7, "target_partitions": 3}, id="b7p3"),
    pytest.param({"batch_size": 8192, "target_partitions": 8}, id="b8192p8"),
]


@pytest.mark.parametrize("options", CONFIGS)
@pytest.mark.parametrize("sql", QUERIES)
def test_nested_values_order_as_in_duckdb(sql, options):
    check(sql, TABLES, **options)


def test_order_bytes_keep_null_rows_null_and_never_prefix_each_other():
    keys = order_bytes(T.column("w")).to_pylist()
    assert keys[6] is None
    present = [k for k in keys if k is not None]
    for a in present:
        for b in present:
            assert a == b or not b.startswith(a), (a, b)
