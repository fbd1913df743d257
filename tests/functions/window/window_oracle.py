"""Differential-test helpers: random tables, DuckDB as oracle, evaluate_window as subject.

Two table flavours keep the comparison deterministic although DuckDB orders peers (rows with
equal ORDER BY keys) arbitrarily:

* ``by_key``: every value column is a function of (p, o), so rows of a peer group are
  interchangeable and any frame/peer order gives the same multiset of results per (p, o).
  Results are compared as multisets per (p, o). Covers ROWS frames, EXCLUDE, navigation.
* ``independent``: random values, compared per row id; used with functions/frames whose
  result does not depend on the order inside a peer group (RANGE/GROUPS aggregates,
  rank-like functions), or with ``id`` as a second ORDER BY key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.functions.window import FrameSpec, evaluate_window


@dataclass(frozen=True)
class Call:
    """One window function call, as SQL text and as evaluate_window arguments."""

    sql: str                      # e.g. "sum(xi)" (the OVER clause is added)
    func: str                     # evaluate_window name
    args: tuple = ()              # column names (str) or constants (wrapped in Const)
    distinct: bool = False
    ignore_nulls: bool = False
    filter_sql: str | None = None  # SQL predicate over columns; also evaluated for us
    float_result: bool = False
    rank_like: bool = False       # ignores the frame
    unordered: str | None = None  # separator: compare string_agg parts as a multiset


@dataclass(frozen=True)
class Const:
    value: object
    type: pa.DataType = field(default_factory=pa.int64)


def random_table(seed: int, flavour: str, n: int | None = None, key_type: str = "int",
                 partitions: int | None = None) -> pa.Table:
    """p (partition), o (order key with ties and NULLs), id (unique), value columns."""
    rng = np.random.default_rng(seed)
    if n is None:
        n = int(rng.choice([0, 1, 2, 5, 17, 40, 64]))
    parts = partitions if partitions is not None else int(rng.integers(1, 5))
    p = rng.integers(0, parts, n)
    ties = max(2, n // int(rng.choice([2, 3, 6])))
    o_int = rng.integers(0, ties, n)
    o_null = rng.random(n) < 0.15
    ids = rng.permutation(n)
    columns = {"p": pa.array(p, pa.int64()), "id": pa.array(ids, pa.int64())}
    columns["o"] = _order_key(o_int, o_null, key_type, rng)
    if flavour == "by_key":
        base = (o_int * 7 + p * 3) % 11 - 3
        null = o_null | ((o_int + p) % 5 == 0)
    else:
        base = rng.integers(-20, 20, n)
        null = rng.random(n) < 0.2
    columns["xi"] = pa.array(base, pa.int64(), mask=null)
    columns["xf"] = pa.array(base * 0.5 + 0.25, pa.float64(), mask=null)
    columns["xs"] = pa.array([f"s{v:+d}" for v in base], pa.string(), mask=null)
    columns["xb"] = pa.array(base > 0, pa.bool_(), mask=null)
    columns["xd"] = pa.array([_dec(v) for v in base], pa.decimal128(9, 2), mask=null)
    return pa.table(columns)


def _dec(v: int):
    import decimal
    return decimal.Decimal(int(v) * 25) / 100


def _order_key(o_int: np.ndarray, o_null: np.ndarray, key_type: str,
               rng: np.random.Generator) -> pa.Array:
    import datetime
    import decimal

    if key_type == "int":
        return pa.array(o_int, pa.int64(), mask=o_null)
    if key_type == "int8":
        return pa.array(o_int - 5, pa.int8(), mask=o_null)
    if key_type == "uint":
        return pa.array(o_int * 3 + 10, pa.uint32(), mask=o_null)
    if key_type == "float":
        values = o_int * 0.75 - 2.0
        special = rng.random(len(o_int))
        values = np.where(special < 0.05, np.nan, values)
        values = np.where((special >= 0.05) & (special < 0.08), np.inf, values)
        values = np.where((special >= 0.08) & (special < 0.1), -np.inf, values)
        return pa.array(values, pa.float64(), mask=o_null)
    if key_type == "float32":
        return pa.array((o_int * 0.1).astype(np.float32), pa.float32(), mask=o_null)
    if key_type == "decimal":
        return pa.array([decimal.Decimal(int(v) * 37) / 100 for v in o_int],
                        pa.decimal128(10, 2), mask=o_null)
    if key_type == "date":
        start = datetime.date(2024, 1, 28)
        return pa.array([start + datetime.timedelta(days=int(v) * 9) for v in o_int],
                        pa.date32(), mask=o_null)
    if key_type == "timestamp":
        start = datetime.datetime(2024, 1, 30, 22, 0)
        return pa.array([start + datetime.timedelta(hours=int(v) * 29) for v in o_int],
                        pa.timestamp("us"), mask=o_null)
    raise ValueError(key_type)


def sort_rows(table: pa.Table, order: list[tuple[str, bool, bool]]) -> pa.Table:
    """Sort by p, then (column, descending, nulls_first) keys, DuckDB-style (NaN largest)."""
    keys = [("p", "ascending", "at_end")]
    for name, desc, nulls_first in order:
        direction = "descending" if desc else "ascending"
        placement = "at_start" if nulls_first else "at_end"
        column = table[name]
        if pa.types.is_floating(column.type):
            nan_name = f"__{name}_nan"
            table = table.append_column(nan_name, pc.is_nan(column))
            keys.append((nan_name, direction, placement))
        keys.append((name, direction, placement))
    keys.append(("id", "ascending", "at_end"))
    table = table.take(pc.sort_indices(table, sort_keys=keys))
    return table.select([c for c in table.column_names if not c.startswith("__")])


def partition_starts(sorted_table: pa.Table) -> np.ndarray:
    p = sorted_table["p"].to_numpy()
    n = len(p)
    if n == 0:
        return np.array([0], dtype=np.int64)
    change = np.flatnonzero(p[1:] != p[:-1]) + 1
    return np.concatenate(([0], change, [n])).astype(np.int64)


def ours(sorted_table: pa.Table, call: Call, order: list[tuple[str, bool, bool]],
         frame: FrameSpec | None) -> list:
    n = sorted_table.num_rows
    args = []
    for a in call.args:
        if isinstance(a, Const):
            args.append(pa.array([a.value] * n, type=a.type))
        else:
            args.append(sorted_table[a])
    mask = None
    if call.filter_sql is not None:
        mask = duckdb_filter(sorted_table, call.filter_sql)
    result = evaluate_window(
        call.func, args, partition_starts=partition_starts(sorted_table),
        order_keys=[sorted_table[name] for name, _, _ in order],
        descending=[d for _, d, _ in order], nulls_first=[f for _, _, f in order],
        frame=frame, distinct=call.distinct, ignore_nulls=call.ignore_nulls,
        filter_mask=mask)
    assert len(result) == n
    return result.to_pylist()


_CONNECTION: duckdb.DuckDBPyConnection | None = None


def _connection(table: pa.Table) -> duckdb.DuckDBPyConnection:
    """One shared in-memory connection (connecting costs ~30 ms) with ``table`` as t."""
    global _CONNECTION
    if _CONNECTION is None:
        _CONNECTION = duckdb.connect()
    _CONNECTION.register("t", table)
    return _CONNECTION


def duckdb_filter(table: pa.Table, predicate: str) -> pa.Array:
    con = _connection(table)
    got = con.sql(f"SELECT ({predicate}) AS m FROM t").arrow()
    column = got["m"] if isinstance(got, pa.Table) else got.read_all()["m"]
    return column.combine_chunks()


def oracle(table: pa.Table, calls: list[Call], over_sql: str, order_sql: str) -> pa.Table:
    """DuckDB results of every call OVER (PARTITION BY p ORDER BY ... frame) plus p, o, id."""
    con = _connection(table)
    items = []
    for i, c in enumerate(calls):
        text = c.sql
        if c.filter_sql is not None:
            text += f" FILTER (WHERE {c.filter_sql})"
        over = f"(PARTITION BY p {order_sql})" if c.rank_like else f"(PARTITION BY p {over_sql})"
        items.append(f"{text} OVER {over} AS r{i}")
    query = f"SELECT p, o, id, {', '.join(items)} FROM t"
    got = con.sql(query).arrow()
    return got if isinstance(got, pa.Table) else got.read_all()


def order_sql(order: list[tuple[str, bool, bool]]) -> str:
    if not order:
        return ""
    parts = [f"{name} {'DESC' if d else 'ASC'} NULLS {'FIRST' if f else 'LAST'}"
             for name, d, f in order]
    return "ORDER BY " + ", ".join(parts)


def compare(expected: pa.Table, column: str, sorted_table: pa.Table, got: list,
            by_key: bool, float_result: bool, label: str, unordered: str | None = None) -> None:
    """Assert our column equals DuckDB's: per id, or as multisets per (p, o) when by_key."""
    exp_values = expected[column].to_pylist()
    if unordered is not None:
        def canonical(v):
            return None if v is None else unordered.join(sorted(v.split(unordered)))
        exp_values = [canonical(v) for v in exp_values]
        got = [canonical(v) for v in got]
    exp_rows = list(zip(expected["p"].to_pylist(), expected["o"].to_pylist(),
                        expected["id"].to_pylist(), exp_values))
    our_rows = list(zip(sorted_table["p"].to_pylist(), sorted_table["o"].to_pylist(),
                        sorted_table["id"].to_pylist(), got))
    if by_key:
        key = lambda r: (r[0], _sort_key(r[1]), _sort_key(r[3]))
    else:
        key = lambda r: r[2]
    exp_rows.sort(key=key)
    our_rows.sort(key=key)
    assert len(exp_rows) == len(our_rows), label
    for e, o in zip(exp_rows, our_rows):
        if not by_key:
            assert e[2] == o[2]
        assert _same(e[3], o[3], float_result), (
            f"{label}: row p={o[0]} o={o[1]} id={o[2]}: expected {e[3]!r}, got {o[3]!r}")


def _sort_key(v):
    if v is None:
        return (0, 0)
    if isinstance(v, float) and math.isnan(v):
        return (2, 0)
    return (1, v)


def _same(expected, got, float_result: bool) -> bool:
    if expected is None or got is None:
        return expected is None and got is None
    if isinstance(expected, float) or isinstance(got, float):
        expected, got = float(expected), float(got)
        if math.isnan(expected) or math.isnan(got):
            return math.isnan(expected) and math.isnan(got)
        if math.isinf(expected) or math.isinf(got):
            return expected == got
        return math.isclose(expected, got, rel_tol=1e-9, abs_tol=1e-9)
    return expected == got
