"""Differential testing helpers: run the same SQL on plansight and on DuckDB, compare results.

    plansight_table, duckdb_table = run_both(sql, {"t": table}, batch_size=3)
    assert_same(plansight_table, duckdb_table, ordered=has_top_level_order_by(sql), sql=sql)

Comparison rules (what SQL leaves open is not checked):

- columns are compared positionally; names may differ;
- rows are compared as multisets unless ``ordered``; an ordered comparison checks the ORDER
  BY keys row by row and the rows *within a run of equal keys* as multisets, because tied rows
  may come in any order; with a LIMIT, the last run of ties may hold different rows (only its
  keys are compared);
- numbers compare by value across types (int widths, DuckDB HUGEINT / DECIMAL(38, x) versus
  int64 / decimal / double): integers exactly, everything else with a relative and absolute
  tolerance of 1e-9; NaN equals NaN; NULL equals only NULL;
- a DATE equals a TIMESTAMP at midnight; time-zone aware timestamps compare in UTC;
- intervals compare by value (1 month = 30 days = 720 hours), as SQL's ``=`` does.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp

import plansight as ps
from plansight.engine.exec.context import SessionConfig
from plansight.engine.sql.parser import _parse_once
from plansight.errors import PlansightError

REL_TOL = 1e-9
ABS_TOL = 1e-9


@contextlib.contextmanager
def relative_tolerance(rel_tol: float):
    """Compare with a looser relative tolerance inside the block (the fuzzer, for results
    DuckDB computes less precisely than plansight: see tools/fuzz/oracle.py)."""
    global REL_TOL
    saved, REL_TOL = REL_TOL, rel_tol
    try:
        yield
    finally:
        REL_TOL = saved

# Session constructor arguments; any other option is SET on both engines.
_SESSION_ARGS = ("target_partitions", "memory_limit", "batch_size", "spill_dir")


# ----------------------------------------------------------------------------- running

def run_plansight(sql: str, tables: Mapping[str, pa.Table], **session_options: Any) -> pa.Table:
    """``sql`` on a fresh plansight Session with ``tables`` registered."""
    args = {k: v for k, v in session_options.items() if k in _SESSION_ARGS}
    args.setdefault("target_partitions", 1)
    session = ps.Session(**args)
    for name, value in session_options.items():
        if name not in _SESSION_ARGS:
            session.set_option(name, value)
    for name, table in tables.items():
        session.register(name, table)
    return session.sql(sql).to_arrow()


def run_duckdb(sql: str, tables: Mapping[str, pa.Table], **session_options: Any) -> pa.Table:
    """``sql`` on a fresh DuckDB connection with the same tables and SET options."""
    con = duckdb.connect()
    try:
        con.execute("SET threads = 1")
        for name, value in session_options.items():
            if name not in _SESSION_ARGS:
                literal = f"'{value}'" if isinstance(value, str) else str(value).lower()
                try:
                    con.execute(f"SET {name} = {literal}")
                except duckdb.CatalogException:
                    # plansight's own tuning knobs (window_executor, ...) change how, not what
                    if name not in SessionConfig.__dataclass_fields__:
                        raise
        for name, table in tables.items():
            con.register(name, table)
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()


def run_both(sql: str, tables: Mapping[str, pa.Table], **session_options: Any
             ) -> tuple[pa.Table, pa.Table]:
    """Run ``sql`` on plansight and on DuckDB over the same Arrow ``tables``.

    ``session_options``: Session arguments (batch_size, target_partitions, ...) and options
    such as ``default_null_order`` or ``integer_division``, which are SET on DuckDB too.
    DuckDB failing means the query is not a valid oracle case: that is an AssertionError.
    """
    try:
        expected = run_duckdb(sql, tables, **session_options)
    except duckdb.Error as e:
        raise AssertionError(f"DuckDB rejects the query (fix the corpus): {e}\n  SQL: {sql}"
                             ) from e
    actual = run_plansight(sql, tables, **session_options)
    return actual, expected


def check(sql: str, tables: Mapping[str, pa.Table], **session_options: Any) -> None:
    """run_both + assert_same, ordered when the query has a top-level ORDER BY."""
    actual, expected = run_both(sql, tables, **session_options)
    assert_same(actual, expected, ordered=has_top_level_order_by(sql), sql=sql)


def check_expression_types(expression: str, tables: Mapping[str, pa.Table],
                           table_names: tuple[str, ...], **session_options: Any) -> None:
    """``expression`` over each of ``table_names`` (e.g. one with rows, one empty): its
    values, its ``typeof`` and its Arrow type the same as DuckDB's."""
    for table in table_names:
        sql = f"SELECT id, typeof({expression}) AS ty, {expression} AS x FROM {table}"
        mine, theirs = run_both(sql, tables, **session_options)
        assert mine.schema.field("x").type == theirs.schema.field("x").type, sql
        assert_same(mine, theirs, ordered=False, sql=sql)


# ----------------------------------------------------------------------------- ORDER BY keys

@functools.lru_cache(maxsize=64)
def _top_level(sql: str) -> exp.Expression:
    """The outermost query of ``sql`` (parsed once per text: the fuzzer asks for every
    comparison of one query; callers only read the tree). The trees are plansight's own
    remembered parse of the text, which running it needs anyway (a second parse with
    sqlglot was 5% of the fuzzer's time); sqlglot's when plansight's parser rejects it."""
    try:
        parsed = _parse_once(sql)
    except PlansightError:
        parsed = sqlglot.parse(sql, read="duckdb")
    statements = [s for s in parsed if s is not None and not isinstance(s, exp.Set)]
    node = statements[-1]
    while isinstance(node, exp.Subquery) and not node.args.get("order"):
        node = node.this
    return node


def has_top_level_order_by(sql: str) -> bool:
    """Whether the outermost query of ``sql`` (after SET statements) has an ORDER BY."""
    return _top_level(sql).args.get("order") is not None


@functools.lru_cache(maxsize=64)
def order_key_positions(sql: str) -> tuple[list[int] | None, bool]:
    """Output positions of the top-level ORDER BY keys (None if some key is not an output
    column, which makes the comparison strictly ordered) and whether a LIMIT follows."""
    node = _top_level(sql)
    order = node.args.get("order")
    has_limit = node.args.get("limit") is not None or node.args.get("offset") is not None
    if order is None:
        return None, has_limit
    if isinstance(node, exp.Select):
        selects = node.expressions
    else:  # set operation: the outputs are the first branch's
        first = node
        while isinstance(first, exp.SetOperation):
            first = first.this
        while isinstance(first, exp.Subquery):
            first = first.this
        selects = first.expressions if isinstance(first, exp.Select) else []
    if any(isinstance(s, exp.Star) or (isinstance(s, exp.Column) and isinstance(s.this, exp.Star))
           for s in selects):
        return None, has_limit
    names = [s.alias_or_name.lower() for s in selects]
    texts = [(s.this if isinstance(s, exp.Alias) else s).sql("duckdb").lower() for s in selects]
    positions: list[int] = []
    for ordered in order.expressions:
        key = ordered.this
        text = key.sql("duckdb").lower()
        if isinstance(key, exp.Literal) and not key.is_string:
            positions.append(int(key.this) - 1)
        elif isinstance(key, exp.Column) and not key.table and key.name.lower() in names:
            positions.append(names.index(key.name.lower()))
        elif text in texts:
            positions.append(texts.index(text))
        elif isinstance(key, exp.Column) and key.name.lower() in names:
            positions.append(names.index(key.name.lower()))
        else:
            return None, has_limit
    return positions, has_limit


# ----------------------------------------------------------------------------- values

class _NaN:
    """NaN as a value equal to itself."""

    def __eq__(self, other):
        return isinstance(other, _NaN)

    def __hash__(self):
        return 0

    def __repr__(self):
        return "nan"


NAN = _NaN()


def _interval(months: int, days: int, nanos: int) -> tuple:
    """An interval by its value, as SQL compares them (a day is 24 hours, a month 30 days):
    1 month, 30 days and 720 hours are one value, shown by either engine as any of them."""
    day = 86_400 * 10**9
    days, nanos = days + nanos // day, nanos % day
    return ("interval", months + days // 30, days % 30, nanos)


def normalize(value: Any) -> Any:
    """A Python value in the comparison domain (see the module docstring)."""
    if value is None or isinstance(value, (bool, str, bytes)):
        return value
    if isinstance(value, float):
        return NAN if math.isnan(value) else value
    if isinstance(value, Decimal):
        if value.is_nan():
            return NAN
        if value == value.to_integral_value():
            return int(value)
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    if isinstance(value, dt.timedelta):
        return _interval(0, value.days, (value.seconds * 10**6 + value.microseconds) * 1000)
    if type(value).__name__ == "MonthDayNano":
        return _interval(value.months, value.days, value.nanoseconds)
    if isinstance(value, (list, tuple)):
        return tuple(normalize(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, normalize(v)) for k, v in value.items())
    return value


def values_equal(a: Any, b: Any) -> bool:
    """Equality of two normalized values with the numeric tolerance."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, _NaN) or isinstance(b, _NaN):
        return isinstance(a, _NaN) and isinstance(b, _NaN)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float, Decimal)) and isinstance(b, (int, float, Decimal)):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        if isinstance(a, float) and isinstance(b, float) and (math.isinf(a) or math.isinf(b)):
            return a == b
        x, y = Decimal(a) if not isinstance(a, Decimal) else a, \
            Decimal(b) if not isinstance(b, Decimal) else b
        if not (x.is_finite() and y.is_finite()):
            return x == y
        return abs(x - y) <= Decimal(ABS_TOL) + Decimal(REL_TOL) * max(abs(x), abs(y))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _sort_key(value: Any):
    """A total order consistent across engines: numbers by a rounded float (tolerance), then
    exactly, so equal-within-tolerance values sort the same on both sides and equal ones
    pair up even when many share one rounded key (-2147483647.0 .. -2147483643.0 all round
    to -2.1474836e9, and a tolerance-greedy pairing of them could strand a partner)."""
    if value is None:
        return (0,)
    if isinstance(value, _NaN):
        return (2,)
    if isinstance(value, bool):
        return (1, 0, int(value))
    if isinstance(value, (int, float, Decimal)):
        number = float(value)
        if math.isinf(number):
            return (1, 1, number, 0)
        rounded = float(f"{number:.8g}")
        return (1, 1, rounded, value if isinstance(value, int) else number)
    if isinstance(value, str):
        return (3, value)
    if isinstance(value, bytes):
        return (4, value)
    if isinstance(value, dt.datetime):
        return (5, value)
    if isinstance(value, tuple):
        return (6, tuple(_sort_key(v) for v in value))
    return (7, repr(value))


def _rows(table: pa.Table) -> list[tuple]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [tuple(normalize(c[r]) for c in columns) for r in range(table.num_rows)]


def _rows_equal(a: tuple, b: tuple) -> bool:
    return all(values_equal(x, y) for x, y in zip(a, b))


def _first_difference(a: tuple, b: tuple) -> int:
    return next(i for i, (x, y) in enumerate(zip(a, b)) if not values_equal(x, y))


# ----------------------------------------------------------------------------- comparing

def assert_same(plansight_table: pa.Table, duckdb_table: pa.Table, ordered: bool,
                sql: str = "", key_positions: Sequence[int] | None = None,
                limited: bool = False) -> None:
    """Assert both results hold the same rows (see the module docstring for the rules).

    ``ordered`` compares in order; ``key_positions`` (the output positions of the ORDER BY
    keys; derived from ``sql`` when omitted) make runs of tied rows order-insensitive and
    ``limited`` (a LIMIT/OFFSET follows the ORDER BY) relaxes the last run to its keys.
    """
    if ordered and key_positions is None and sql:
        key_positions, limited = order_key_positions(sql)
    where = f"\n  SQL: {sql}" if sql else ""
    if plansight_table.num_columns != duckdb_table.num_columns:
        raise AssertionError(
            f"column count differs: plansight {plansight_table.num_columns} "
            f"{plansight_table.column_names}, duckdb {duckdb_table.num_columns} "
            f"{duckdb_table.column_names}{where}")
    actual, expected = _rows(plansight_table), _rows(duckdb_table)
    names = duckdb_table.column_names
    if len(actual) != len(expected):
        extra = _multiset_difference(actual, expected)
        missing = _multiset_difference(expected, actual)
        raise AssertionError(
            f"row count differs: plansight {len(actual)}, duckdb {len(expected)}{where}\n"
            f"  rows only in plansight (first 5): {extra[:5]}\n"
            f"  rows only in duckdb (first 5): {missing[:5]}")
    if not ordered:
        _assert_multiset(actual, expected, names, where, "")
        return
    if key_positions is None:
        for i, (a, b) in enumerate(zip(actual, expected)):
            if not _rows_equal(a, b):
                _raise_row(i, a, b, names, where, "ordered, row")
        return
    keys = list(key_positions)
    runs = _tie_runs(expected, keys)
    for number, (start, stop) in enumerate(runs):
        for i in range(start, stop):  # the keys, row by row
            a_key = tuple(actual[i][k] for k in keys)
            b_key = tuple(expected[i][k] for k in keys)
            if not _rows_equal(a_key, b_key):
                _raise_row(i, actual[i], expected[i], names, where,
                           "ORDER BY keys differ at row")
        if limited and number == len(runs) - 1:
            break  # which tied rows make the cut is unspecified
        _assert_multiset(actual[start:stop], expected[start:stop], names, where,
                         f" among rows {start}..{stop - 1} tied on the ORDER BY keys")


def _tie_runs(rows: list[tuple], keys: list[int]) -> list[tuple[int, int]]:
    runs, start = [], 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or not _rows_equal(tuple(rows[i][k] for k in keys),
                                             tuple(rows[start][k] for k in keys)):
            runs.append((start, i))
            start = i
    return runs


def _assert_multiset(actual: list[tuple], expected: list[tuple], names, where, context) -> None:
    a_sorted = sorted(actual, key=lambda r: tuple(_sort_key(v) for v in r))
    b_sorted = sorted(expected, key=lambda r: tuple(_sort_key(v) for v in r))
    for i, (a, b) in enumerate(zip(a_sorted, b_sorted)):
        if not _rows_equal(a, b):
            extra = _multiset_difference(actual, expected)
            missing = _multiset_difference(expected, actual)
            if not extra and not missing:
                # values that round to one sort key (99999999.99 and 100000003.31 at 8
                # digits) keep each side's own order: every row still has its partner
                return
            column = _first_difference(a, b)
            raise AssertionError(
                f"results differ{context} (compared as multisets, row {i} after sorting), "
                f"column {column} ({names[column]!r}): plansight {a[column]!r}, "
                f"duckdb {b[column]!r}{where}\n  plansight row: {a}\n  duckdb row:    {b}\n"
                f"  rows only in plansight (first 5): {extra[:5]}\n"
                f"  rows only in duckdb (first 5): {missing[:5]}")


def _raise_row(i, a, b, names, where, context) -> None:
    column = _first_difference(a, b)
    raise AssertionError(
        f"results differ ({context} {i}), column {column} ({names[column]!r}): "
        f"plansight {a[column]!r}, duckdb {b[column]!r}{where}\n"
        f"  plansight row: {a}\n  duckdb row:    {b}")


def _multiset_difference(left: list[tuple], right: list[tuple]) -> list[tuple]:
    """Rows of ``left`` without a tolerance-equal partner in ``right`` (quadratic, for
    messages only)."""
    if len(left) * len(right) > 4_000_000:
        return [("too many rows to list the difference",)]
    remaining = list(right)
    out = []
    for row in left:
        for j, other in enumerate(remaining):
            if _rows_equal(row, other):
                del remaining[j]
                break
        else:
            out.append(row)
    return out
