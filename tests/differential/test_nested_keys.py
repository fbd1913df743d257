"""Struct and list keys (issue #12): GROUP BY, DISTINCT, count(DISTINCT), set operations,
joins, IN, window PARTITION BY and ``=`` on nested values, keyed by their canonical bytes
(optimizer/encode_nested_keys.py), and struct / list values (``{'a': 0}``, ``[1, NULL]``),
against DuckDB at partitions 1/2/3/8 and batch sizes 1/3/7/8192.

DuckDB's rules: a NULL field or element equals NULL inside a value (``[1, NULL] = [1,
NULL]`` is TRUE), -0.0 equals 0.0 and NaN equals NaN inside a value, a NULL struct or list
is NULL (it joins nothing and groups with the other NULLs), field order is part of the type.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.differential.harness import check
from tests.differential.test_regressions import CONFIGS

_S = pa.struct([("a", pa.int64()), ("b", pa.string())])
_F = pa.list_(pa.float64())
TABLES = {
    "n": pa.table({
        "id": pa.array(range(9), pa.int64()),
        "s": pa.array([{"a": 1, "b": "x"}, {"a": None, "b": "x"}, None, {"a": 1, "b": "x"},
                       {"a": None, "b": None}, {"a": None, "b": "x"}, {"a": 2, "b": None},
                       {"a": 2, "b": ""}, None], _S),
        "l": pa.array([[1, None], [], None, [1, None], [None], [], [2], [1], [None]],
                      pa.list_(pa.int64())),
        "f": pa.array([[0.0], [-0.0], [float("nan")], [float("nan"), 1.0], None, [],
                       [1.0, float("nan")], [0.0], [None]], _F),
        "ls": pa.array([[{"a": 1, "b": "x"}], [None], [], None, [{"a": 1, "b": "x"}], [None],
                        [{"a": None, "b": None}], [{"a": None, "b": None}], []],
                       pa.list_(_S)),
        "v": pa.array([1, 2, 3, 4, 5, None, 7, 8, 9], pa.int64())}),
    "e": pa.table({"id": pa.array([], pa.int64()), "s": pa.array([], _S),
                   "l": pa.array([], pa.list_(pa.int64()))}),
}

QUERIES = [
    "SELECT s, count(*), sum(v) FROM n GROUP BY s",
    "SELECT l, count(*), sum(v) FROM n GROUP BY l",
    "SELECT f, count(*) FROM n GROUP BY f",
    "SELECT ls, count(*) FROM n GROUP BY ls",
    "SELECT s, l, count(*) FROM n GROUP BY s, l",
    "SELECT s, l, count(*) FROM n GROUP BY ROLLUP (s, l)",
    "SELECT DISTINCT s FROM n",
    "SELECT DISTINCT l, f FROM n",
    "SELECT count(DISTINCT s), count(DISTINCT l), count(DISTINCT f), count(DISTINCT ls) FROM n",
    "SELECT v IS NULL, count(DISTINCT s) FROM n GROUP BY v IS NULL",
    "SELECT id, count(*) OVER (PARTITION BY s), sum(v) OVER (PARTITION BY l ORDER BY id), "
    "row_number() OVER (PARTITION BY f ORDER BY id) FROM n",
    "SELECT s FROM n UNION SELECT s FROM n",
    "SELECT l FROM n INTERSECT SELECT l FROM n WHERE id > 2",
    "SELECT l FROM n EXCEPT SELECT l FROM n WHERE id > 2",
    "SELECT f FROM n EXCEPT ALL SELECT f FROM n WHERE id > 5",
    "SELECT a.id, b.id FROM n a JOIN n b ON a.s = b.s",
    "SELECT a.id, b.id FROM n a JOIN n b ON a.l = b.l",
    "SELECT a.id, b.id FROM n a JOIN n b ON a.f = b.f",
    "SELECT a.id, b.id FROM n a LEFT JOIN n b ON a.ls = b.ls AND a.id < b.id",
    "SELECT a.id, b.id FROM n a FULL JOIN n b ON a.l = b.l AND a.s = b.s",
    "SELECT id FROM n WHERE l IN (SELECT l FROM n WHERE id > 3)",
    "SELECT id FROM n WHERE s NOT IN (SELECT s FROM n WHERE id > 6)",
    "SELECT id, l = [1, NULL], s IS DISTINCT FROM {'a': 1, 'b': 'x'}, f <> [0.0] FROM n",
    "SELECT id FROM n WHERE l = [1]",
    "SELECT s, count(*) FROM e GROUP BY s",
    "SELECT DISTINCT l FROM e",
    "SELECT count(DISTINCT s) FROM e",
    "SELECT {'a': 0}, [9], [1, NULL], {'x': [1, 2], 'y': NULL}, [], [[1], []] FROM n",
    "SELECT id, [v, id + 1, NULL], {'a': v, 'b': l} FROM n",
    "SELECT id, lag(s, 1, {'a': 0, 'b': 'z'}) OVER (ORDER BY id), "
    "lead(l, 2, [9]) OVER (ORDER BY id) FROM n",
    "SELECT [v % 2, NULL], count(*) FROM n GROUP BY [v % 2, NULL]",
]


@pytest.mark.parametrize("partitions,batch_size", CONFIGS)
@pytest.mark.parametrize("sql", QUERIES)
def test_nested_keys(sql: str, partitions: int, batch_size: int) -> None:
    check(sql, TABLES, target_partitions=partitions, batch_size=batch_size)


@pytest.mark.parametrize("sql", QUERIES)
def test_nested_keys_without_the_optimizer(sql: str) -> None:
    """The rule is required: the reference plan (optimizer off) keys nested values too."""
    check(sql, TABLES, target_partitions=3, batch_size=7, optimizer=False)


def test_canonical_bytes_depend_on_the_value_alone():
    """Equal values (by DuckDB's nested comparison) give equal bytes in any array, slice or
    position; different values different bytes; a NULL row is NULL."""
    from plansight.engine.kernels.nested_keys import canonical_bytes

    values = [[1, None], [], None, [None], [1], [None, 1], [1, None]]
    whole = canonical_bytes(pa.array(values, pa.list_(pa.int64()))).to_pylist()
    sliced = canonical_bytes(pa.array(values, pa.list_(pa.int64())).slice(3)).to_pylist()
    assert sliced == whole[3:]
    assert whole[0] == whole[6] and whole[2] is None
    assert len({b for b in whole if b is not None}) == 5
    floats = canonical_bytes(pa.array([[0.0], [-0.0], [float("nan")], [-float("nan")]],
                                      pa.list_(pa.float64()))).to_pylist()
    assert floats[0] == floats[1] and floats[2] == floats[3] and floats[0] != floats[2]
    # a string's length delimits it: ('ab', 'c') differs from ('a', 'bc')
    pair = pa.struct([("x", pa.string()), ("y", pa.string())])
    s = canonical_bytes(pa.array([{"x": "ab", "y": "c"}, {"x": "a", "y": "bc"}], pair))
    assert s[0] != s[1]
