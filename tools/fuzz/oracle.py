"""Three ways to find a wrong answer, as SQLancer does:

1. DuckDB: the same SQL on the same Arrow tables, results compared by the differential
   harness (multisets, float tolerance, ORDER BY ties);
2. ternary logic partitioning: ``Q`` has the rows of ``Q WHERE p`` + ``Q WHERE NOT p`` +
   ``Q WHERE p IS NULL`` (on plansight alone: no oracle needed);
3. optimizer rules off vs on: the reference plan (only the rules a plan needs) against the
   optimized one.

Each query runs at a few (partitions, batch size) settings drawn from 1/2/3/8 x 1/3/7/8192.
An outcome is a ``Finding``: its ``kind`` names the class (wrong result, InternalError, raw
exception, refused valid SQL, NotSupported, disagreement), ``detail`` the message's gist.
Not bugs: ``float-rounding`` (a DOUBLE ORDER BY key that the engines round a few ulps apart
decides the order and which rows a LIMIT keeps, ``_order_decided_by_rounding``; or doubles a
few ulps apart that DISTINCT, a set operation or GROUP BY keeps as separate rows,
``_duplicates_decided_by_rounding``),
and ``evaluation-order`` (an error one engine's order of evaluation avoids, see ``check``;
e.g. DuckDB computes x of a correlated ``x IN (...)`` for rows that correlate with nothing,
plansight does not).
Results of queries with a variance-family aggregate (var_pop, stddev, ...) compare at 1e-6
relative, not 1e-9: DuckDB's streaming update loses digits on large values with a small
spread (``_compare``).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp

import plansight as ps
from plansight.errors import (
    Cancelled,
    ExecutionError,
    InternalError,
    NotSupportedError,
    PlanError,
    PlansightError,
)
from tests.differential.harness import (
    assert_same,
    has_top_level_order_by,
    normalize,
    order_key_positions,
    relative_tolerance,
    values_equal,
)

PARTITIONS = (1, 2, 3, 8)
BATCH_SIZES = (1, 3, 7, 8192)

# classes that are bugs (the rest: valid SQL plansight does not implement yet)
BUGS = ("wrong", "internal", "raw", "refused", "tlp", "optimizer", "error-only-plansight",
        "error-only-duckdb")


@dataclass(frozen=True)
class Finding:
    kind: str  # one of BUGS, or "not-supported"
    detail: str
    sql: str
    settings: tuple[int, int, bool]  # partitions, batch size, optimizer on

    @property
    def signature(self) -> tuple[str, str]:
        return self.kind, self.detail


class DuckDBRejects(Exception):
    """DuckDB refused the query while binding: it is not a valid oracle case."""


class Engines:
    """DuckDB and plansight over one set of tables, each registered once.

    A schema serves many queries (and each query several settings): connecting DuckDB and
    registering the tables once per schema, not per run, is a large share of the fuzzer's
    time. plansight runs in one session whose per-query ``options`` set the partitions, batch
    size and optimizer, which also checks that a session stays usable after any error.
    """

    def __init__(self, tables: dict[str, pa.Table]):
        self.tables = tables
        self._duckdb = None
        self._session = None
        self._planned: dict[str, ps.Query] = {}  # sql -> its query, planned once

    def duckdb(self, sql: str) -> pa.Table | Exception:
        """DuckDB's result, or the runtime error it raised (DuckDBRejects for invalid SQL)."""
        if self._duckdb is None:
            self._duckdb = duckdb.connect()
            self._duckdb.execute("SET threads = 1")
            for name, table in self.tables.items():
                self._duckdb.register(name, table)
        try:
            return self._duckdb.sql(sql).to_arrow_table()
        except (duckdb.BinderException, duckdb.ParserException, duckdb.CatalogException,
                duckdb.NotImplementedException) as e:
            raise DuckDBRejects(str(e)) from e
        except duckdb.ConversionException as e:
            if "Unimplemented type for cast" in str(e):  # a binding error (no such cast)
                raise DuckDBRejects(str(e)) from e
            return e
        except duckdb.Error as e:
            return e

    def duckdb_unoptimized(self, sql: str) -> pa.Table | Exception:
        """DuckDB's result (or error) with its optimizer off."""
        self.duckdb("SELECT 1")  # connected, tables registered
        self._duckdb.execute("PRAGMA disable_optimizer")
        try:
            return self._duckdb.sql(sql).to_arrow_table()
        except duckdb.Error as e:
            return e
        finally:
            self._duckdb.execute("PRAGMA enable_optimizer")

    def duckdb_unoptimized_fails(self, sql: str) -> bool:
        """Whether DuckDB raises for ``sql`` with its optimizer off: then an error plansight
        alone raises is one DuckDB's optimizer skipped (a filter folded to FALSE, an empty
        input pruned, statistics proving an expression NULL), not a wrong outcome."""
        self.duckdb("SELECT 1")  # connected, tables registered
        self._duckdb.execute("PRAGMA disable_optimizer")
        try:
            self._duckdb.sql(sql).to_arrow_table()
            return False
        except duckdb.Error:
            return True
        finally:
            self._duckdb.execute("PRAGMA enable_optimizer")

    def plansight(self, sql: str, partitions: int, batch_size: int,
                  optimizer: bool = True) -> pa.Table | Exception:
        """plansight's result or error. A text already planned (at another setting, or
        with the optimizer switched) is planned again from its bound logical plan
        (``Query.with_options``): binding depends on neither, and parsing and binding the
        same text again were a third of the fuzzer's time."""
        if self._session is None:
            self._session = ps.Session(target_partitions=1, memory_limit="1GB")
            for name, table in self.tables.items():
                self._session.register(name, table)
        options = {"target_partitions": partitions, "batch_size": batch_size,
                   "optimizer": optimizer}
        try:
            planned = self._planned.get(sql)
            if planned is not None:
                query = planned.with_options(options)
            else:
                query = self._session.sql(sql, options=options)
                self._planned = {sql: query}  # the latest text only
            return query.to_arrow()
        except Cancelled:  # only Ctrl-C cancels the fuzzer's queries: stop the run
            raise KeyboardInterrupt from None
        except Exception as e:  # noqa: BLE001 (classified by the caller)
            return e

    def close(self) -> None:
        if self._duckdb is not None:
            self._duckdb.close()
            self._duckdb = None


def run_duckdb(sql: str, tables: dict[str, pa.Table]) -> pa.Table | Exception:
    """DuckDB's result on a fresh connection (see ``Engines`` to reuse one)."""
    engines = Engines(tables)
    try:
        return engines.duckdb(sql)
    finally:
        engines.close()


def run_plansight(sql: str, tables: dict[str, pa.Table], partitions: int, batch_size: int,
                  optimizer: bool = True) -> pa.Table | Exception:
    """plansight's result in a fresh session (see ``Engines`` to reuse one)."""
    return Engines(tables).plansight(sql, partitions, batch_size, optimizer)


def gist(message: str) -> str:
    """A message without its specifics (ids, numbers, quoted names): the error's class."""
    first = str(message).strip().split("\n")[0]
    first = re.sub(r"#\d+", "#", first)
    first = re.sub(r"'[^']*'|\"[^\"]*\"", "'?'", first)
    first = re.sub(r"\d+", "N", first)
    return first[:90]


def classify_error(error: Exception) -> tuple[str, str]:
    if isinstance(error, NotSupportedError):
        return "not-supported", gist(error)
    if isinstance(error, InternalError):
        return "internal", gist(error)
    if isinstance(error, PlanError):
        return "refused", gist(error)
    if isinstance(error, PlansightError):
        return "error-only-plansight", f"{type(error).__name__}: {gist(error)}"
    return "raw", f"{type(error).__name__}: {gist(error)}"


# aggregates that skip NULL arguments: agg(x) FILTER (WHERE c) = agg(CASE WHEN c THEN x END)
_NULL_SKIPPING = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg, exp.LogicalAnd, exp.LogicalOr)


def filter_as_case(sql: str) -> str | None:
    """``sql`` with each ``agg(x) FILTER (WHERE c)`` written ``agg(CASE WHEN c THEN x END)``
    (``count(*)``: ``count(CASE WHEN c THEN 1 END)``), or None when it has no FILTER or one
    on an aggregate that does not skip NULLs. DuckDB evaluates a FILTER'ed aggregate's
    argument on every row, also those the FILTER excludes; its CASE is lazy."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    filters = list(tree.find_all(exp.Filter))
    if not filters or not all(isinstance(f.this, _NULL_SKIPPING) for f in filters):
        return None

    def rewrite(node):
        if not isinstance(node, exp.Filter):
            return node
        call, condition = node.this, node.expression.this
        argument = call.this
        value = exp.Literal.number(1) if isinstance(argument, exp.Star) else argument
        call = call.copy()
        call.set("this", exp.Case(ifs=[exp.If(this=condition.copy(), true=value.copy())]))
        return call

    if any(isinstance(f.this.this, exp.Distinct) for f in filters):
        return None  # count(DISTINCT ...) FILTER: not generated
    return tree.transform(rewrite).sql(dialect="duckdb")


def _filter_evaluated_early(engines: Engines, sql: str, actual: pa.Table,
                            ordered: bool) -> bool:
    """Whether DuckDB's error comes from evaluating a FILTER'ed aggregate's argument on rows
    the FILTER excludes: with the FILTERs written as lazy CASEs DuckDB runs the query and
    returns plansight's result."""
    rewritten = filter_as_case(sql)
    if rewritten is None:
        return False
    try:
        expected = engines.duckdb(rewritten)
    except DuckDBRejects:
        return False
    return not isinstance(expected, Exception) and \
        _compare(actual, expected, sql, ordered) is None


def in_as_exists(sql: str) -> str | None:
    """``sql`` with each ``x [NOT] IN (subquery)`` that is a conjunct of a WHERE written as
    ``[NOT] EXISTS (SELECT 1 FROM (subquery) AS __in(__v) WHERE __v = x [OR __v IS NULL OR x
    IS NULL])`` (the same rows kept: in a WHERE, NULL counts as FALSE), or None when it has
    none. DuckDB computes x of a correlated IN for every outer row (a key of its mark join)
    once any row correlates; written as EXISTS, only for the pairs that correlate, as
    plansight computes it."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    found = []
    for node in tree.find_all(exp.In):
        if not isinstance(node.args.get("query"), exp.Subquery):
            continue
        top = node.parent if isinstance(node.parent, exp.Not) else node
        parent = top.parent
        while isinstance(parent, (exp.And, exp.Paren)):
            parent = parent.parent
        if isinstance(parent, exp.Where):
            found.append((node, top))
    if not found:
        return None
    for number, (node, top) in enumerate(found):
        negated = top is not node
        value = exp.column(f"__v{number}")
        match = exp.EQ(this=value.copy(), expression=node.this.copy())
        if negated:
            match = exp.or_(match, exp.Is(this=value.copy(), expression=exp.Null()),
                            exp.Is(this=node.this.copy(), expression=exp.Null()))
        inner = node.args["query"].this.copy()
        derived = exp.Subquery(this=inner, alias=exp.TableAlias(
            this=exp.to_identifier(f"__in{number}"),
            columns=[exp.to_identifier(f"__v{number}")]))
        exists = exp.Exists(this=exp.select("1").from_(derived).where(match))
        top.replace(exp.Not(this=exists) if negated else exists)
    return tree.sql(dialect="duckdb")


def _needle_computed_early(engines: Engines, sql: str, actual: pa.Table,
                           ordered: bool) -> bool:
    """Whether DuckDB's error comes from computing the x of ``x [NOT] IN (correlated
    subquery)`` for outer rows that correlate with no inner row: with each such IN of a WHERE
    written as EXISTS (``in_as_exists``) DuckDB returns plansight's result."""
    rewritten = in_as_exists(sql)
    if rewritten is None:
        return False
    try:
        expected = engines.duckdb(rewritten)
    except DuckDBRejects:
        return False
    return not isinstance(expected, Exception) and \
        _compare(actual, expected, sql, ordered) is None


# operators and functions that are NULL when their first operand is NULL, whatever the others
_STRICT = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.EQ, exp.NEQ, exp.GT,
           exp.GTE, exp.LT, exp.LTE, exp.Nullif)


def null_operand_as_case(sql: str) -> str | None:
    """``sql`` with each ``a OP b`` (arithmetic, comparison, NULLIF) written ``CASE WHEN a IS
    NULL THEN NULL ELSE a OP b END``, or None when it has none. DuckDB skips the other
    operands of such an operator when its first operand is NULL in every row of a vector
    (``CASE j WHEN 7 THEN j END - j * 2`` computes no ``j * 2`` then); plansight computes
    them, and its CASE is lazy."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    for case in [c for c in tree.find_all(exp.Case) if c.args.get("this") is not None]:
        # CASE x WHEN y THEN r: the searched CASE WHEN x = y THEN r, whose = is guarded too
        operand = case.args["this"]
        case.set("this", None)
        for branch in case.args.get("ifs") or []:
            branch.set("this", exp.EQ(this=operand.copy(), expression=branch.this.copy()))
    nodes = [n for n in tree.find_all(*_STRICT)]
    if not nodes:
        return None
    for node in sorted(nodes, key=lambda n: -n.depth):  # the innermost first
        first = node.this.copy()
        node.replace(exp.Case(ifs=[exp.If(this=exp.Is(this=exp.Paren(this=first),
                                                      expression=exp.Null()),
                                          true=exp.Null())], default=node.copy()))
    return tree.sql(dialect="duckdb")


def _null_operand_skipped(engines: Engines, sql: str, expected: pa.Table,
                          ordered: bool, partitions: int, batch_size: int) -> bool:
    """Whether plansight's error comes from an operand DuckDB never computed because the
    operand before it was NULL (``null_operand_as_case``): plansight runs the query with
    those operands guarded by a lazy CASE and returns DuckDB's result."""
    rewritten = null_operand_as_case(sql)
    if rewritten is None:
        return False
    again = engines.plansight(rewritten, partitions, batch_size)
    return not isinstance(again, Exception) and \
        _compare(again, expected, sql, ordered) is None


# operators that raise on some values (overflow, a conversion out of range)
_RAISING = (exp.Neg, exp.Abs, exp.Add, exp.Sub, exp.Mul, exp.Cast)
# what evaluates its operands only where needed (plansight promises it: a raise inside is a
# bug, never evaluation order), and what a probe cannot take out of its query
_LAZY = (exp.Case, exp.If, exp.Coalesce, exp.Nullif, exp.Filter)
_OPAQUE = (exp.Subquery, exp.Select, exp.AggFunc, exp.Window, exp.Star)
_MAX_PROBES = 8


def raising_probes(sql: str, needles_escape_lazy: bool = False) -> list[str]:
    """Queries that evaluate one expression of ``sql`` that may raise (negation, abs,
    + - *, CAST; not under CASE / COALESCE / NULLIF / IF / FILTER) on the rows it is
    evaluated on in the worst order SQL allows:

    - in a WHERE or JOIN ON condition, or the x of ``x [NOT] IN (subquery)``: every row of
      the one table it reads (``SELECT -(a.i) FROM t1 AS a``), or none for a constant
      (``SELECT 2147483647 * 2``): a predicate may go below joins that would remove the row
      (filter pushdown, as DuckDB does too), and an IN's x may be computed for an outer row
      that correlates with no inner row;
    - in a WHERE, reading several tables: every row of its FROM (``SELECT a.i + b.i FROM t0
      AS a CROSS JOIN t1 AS b``): a WHERE's parts may run in any order, each on all the rows
      (DuckDB computes every operand of ``x BETWEEN lo AND hi``; plansight's ``x >= lo AND x
      <= hi`` computes hi only where x >= lo, seed 9302 query 2492);
    - in a SELECT list: the rows of its own FROM and WHERE (``SELECT j + j FROM ... WHERE
      ...``): a derived table's values may be computed though a join above it with an empty
      input makes them unneeded (DuckDB skips such a probe side);
    - in an aggregate's FILTER (WHERE condition), in the SELECT list or HAVING: as in a
      SELECT list, or as an IN's x above. A FILTER guards its aggregate's argument, not its
      own condition, which both engines evaluate on every row the aggregate reads: plansight
      computed x of a FILTER's ``x IN (subquery correlated by a non-equality)`` though no row
      correlates, where DuckDB's empty subquery skipped it (seed 9302, query 33889).

    With ``needles_escape_lazy``, the x of ``x [NOT] IN (subquery)`` is probed under a lazy
    construct too: DuckDB turns the IN into a mark join below the CASE and computes x for
    every row, the rows of a branch no row takes included (``CASE WHEN a.b THEN abs(a.i)
    IN (SELECT ...) END``, seed 9602 query 12140). Only DuckDB's errors are excused that
    way: plansight promises a lazy CASE.
    """
    tree = sqlglot.parse_one(sql, read="duckdb")
    aliases = {t.alias: t.name for t in tree.find_all(exp.Table) if t.alias}
    constants: list[str] = []
    probes: list[str] = []
    for node in tree.find_all(*_RAISING):
        if isinstance(node, exp.TryCast) or any(True for _ in node.find_all(*_OPAQUE)):
            continue
        child, parent, needle, condition = node, node.parent, False, False
        while parent is not None and not isinstance(parent, exp.Select):
            if isinstance(parent, exp.Filter) and child.arg_key == "expression":
                condition = True  # a FILTER's condition: evaluated on every row it reads
            elif isinstance(parent, _LAZY) and not (needle and needles_escape_lazy):
                break
            needle |= isinstance(parent, exp.In) and parent.args.get("query") is not None \
                and child is parent.this
            child, parent = parent, parent.parent
        if not isinstance(parent, exp.Select):
            continue  # under a lazy construct, or not in a SELECT block
        text = node.sql(dialect="duckdb")
        columns = list(node.find_all(exp.Column))
        if needle or child.arg_key in ("where", "joins"):
            tables = {c.table for c in columns}
            if not columns:
                probe = f"SELECT {text}"
            elif len(tables) == 1 and next(iter(tables)) in aliases:
                alias = next(iter(tables))
                probe = f"SELECT {text} FROM {aliases[alias]} AS {alias}"
            elif child.arg_key == "where" and not needle and \
                    parent.args.get("from_") is not None:
                probe = _block_probe(parent, node, keep_where=False)
            else:
                continue
        elif (child.arg_key == "expressions" or condition) and \
                parent.args.get("from_") is not None:
            probe = _block_probe(parent, node, keep_where=True)
        else:
            continue
        kind = constants if probe == f"SELECT {text}" else probes
        if probe not in kind:
            kind.append(probe)
    # a constant alone is one cheap row: all of them, first; then at most _MAX_PROBES that
    # read tables (constants in SELECT lists of seed 9831's query 11889 had taken up every
    # place before its IN needle's ``SELECT 2147483647 * 2``)
    return constants + probes[:_MAX_PROBES]


def _block_probe(block: exp.Select, node: exp.Expression, keep_where: bool) -> str:
    """``SELECT node`` over ``block``'s FROM and joins (and its WHERE if ``keep_where``)."""
    block = block.copy()
    for key in ("distinct", "group", "having", "qualify", "order", "limit", "offset",
                "windows") + (() if keep_where else ("where",)):
        block.set(key, None)
    block.set("expressions", [node.copy()])
    return block.sql(dialect="duckdb")


def _raises_on_its_input(engines: Engines, sql: str, error: Exception, partitions: int,
                         batch_size: int, raised_by: str = "plansight") -> bool:
    """Whether the error of one engine (``raised_by``) comes from an expression that raises
    on a row of its input (``raising_probes``) which the other engine's plan happened not
    to evaluate it on: the probe raises in that engine with the same message, and in the
    other too. SQL leaves that order open, and each engine's answer depends on its plan:
    DuckDB pushes ``-(a.i) IS DISTINCT FROM a.id`` below a join and raises, but first
    rewrites ``-(a.i) IS DISTINCT FROM 1`` to ``a.i IS DISTINCT FROM -1``, which cannot
    (fuzz seed 9105); plansight's key filters from a join's build side remove rows before
    a probe side's CAST sees them (seed 9201, query 5552)."""
    for probe in raising_probes(sql, needles_escape_lazy=raised_by == "duckdb"):
        mine = engines.plansight(probe, partitions, batch_size)
        try:
            theirs = engines.duckdb(probe)
            if not isinstance(theirs, Exception):
                theirs = engines.duckdb_unoptimized(probe)
        except DuckDBRejects:
            continue
        if raised_by == "duckdb":
            mine, theirs = theirs, mine
        if isinstance(mine, (ExecutionError, duckdb.Error)) and gist(mine) == gist(error) \
                and isinstance(theirs, (ExecutionError, duckdb.Error)):
            return True
    return False


def _empty_operand_decides(engines: Engines, sql: str, actual: pa.Table) -> bool:
    """Whether ``sql`` is ``A INTERSECT B`` with A or B empty, or ``A EXCEPT B`` with A
    empty (DuckDB runs that operand alone without error and gets no row), and plansight's
    answer is the empty result that decides: DuckDB's error came from the other operand,
    which plansight skips."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    if actual.num_rows or not isinstance(tree, (exp.Intersect, exp.Except)) or \
            tree.args.get("order") or tree.args.get("limit"):
        return False
    operands = [tree.left] if isinstance(tree, exp.Except) else [tree.left, tree.right]
    for operand in operands:
        try:
            rows = engines.duckdb(operand.sql(dialect="duckdb"))
        except DuckDBRejects:
            continue
        if not isinstance(rows, Exception) and rows.num_rows == 0:
            return True
    return False


# the variance family: DuckDB updates a running mean and sum of squares per row in doubles
# (Welford), whose relative error grows with mean**2 / variance and reached ~1e-8 on the
# fuzzer's extremes (seeds 9001-9004, 2 queries), where plansight's matched the exact value
_VARIANCE = re.compile(r"\b(var_pop|var_samp|variance|stddev|stddev_pop|stddev_samp)\s*\(",
                       re.IGNORECASE)
VARIANCE_REL_TOL = 1e-6


def _compare(actual: pa.Table, expected: pa.Table, sql: str, ordered: bool) -> str | None:
    """The gist of the first difference, None when the results match. A query with a
    variance-family aggregate compares at VARIANCE_REL_TOL (1e-6 relative) instead of 1e-9."""
    try:
        if _VARIANCE.search(sql):
            with relative_tolerance(VARIANCE_REL_TOL):
                assert_same(actual, expected, ordered=ordered, sql=sql)
        else:
            assert_same(actual, expected, ordered=ordered, sql=sql)
    except AssertionError as e:
        return gist(str(e).split("\n")[0].split(":")[0])
    return None


# how far apart (in units in the last place) two engines' doubles of one ORDER BY key may be
# for the order (or a LIMIT's cut) they decide to count as rounding: DuckDB's streaming variance and
# plansight's differ by one or two on equal spreads (seed 9302, query 49607)
_ORDER_KEY_ULPS = 4
_MAX_ROUNDING_ROWS = 2000


def _order_decided_by_rounding(engines: Engines, sql: str, actual: pa.Table,
                               expected: pa.Table, partitions: int, batch_size: int) -> bool:
    """Whether ``ORDER BY ... [LIMIT n]`` put other rows first (and kept others) in plansight
    than in DuckDB only because a DOUBLE key of the same row differs by a few ulps between
    the engines (tied groups whose stddev rounds one way in one engine and the other way in
    the other, so a later key no longer decides). Strict:

    - the top-level ORDER BY keys are output columns, and no OFFSET follows;
    - without the LIMIT both engines return rows that pair up one to one, equal in every
      column (the usual tolerance) and in each DOUBLE key within ``_ORDER_KEY_ULPS``, with
      at least one DOUBLE key differing;
    - each engine's limited result is a top n of its own unlimited rows by its own values
      (sorted, and no row left out sorts before a row kept).
    """
    tree = sqlglot.parse_one(sql, read="duckdb")
    order = tree.args.get("order")
    if order is None or tree.args.get("offset") is not None:
        return False
    positions, _ = order_key_positions(sql)
    if positions is None:
        if not all(isinstance(o.this, exp.Literal) and not o.this.is_string
                   for o in order.expressions):
            return False
        positions = [int(o.this.this) - 1 for o in order.expressions]
    keys = [(position, bool(o.args.get("desc")), bool(o.args.get("nulls_first")))
            for position, o in zip(positions, order.expressions)]
    if any(not 0 <= position < expected.num_columns for position, _, _ in keys):
        return False
    floats = {position for position, _, _ in keys
              if pa.types.is_floating(expected.schema.field(position).type)}
    if not floats:
        return False
    unlimited = tree.copy()
    unlimited.set("limit", None)
    unlimited = unlimited.sql(dialect="duckdb")
    mine = engines.plansight(unlimited, partitions, batch_size)
    try:
        theirs = engines.duckdb(unlimited)
    except DuckDBRejects:
        return False
    if isinstance(mine, Exception) or isinstance(theirs, Exception) or \
            mine.num_rows != theirs.num_rows or mine.num_rows > _MAX_ROUNDING_ROWS:
        return False
    mine_rows, theirs_rows = mine.to_pylist(), theirs.to_pylist()
    if not _pair_within_ulps([list(r.values()) for r in mine_rows],
                             [list(r.values()) for r in theirs_rows], floats):
        return False
    try:
        return _is_top_n([list(r.values()) for r in actual.to_pylist()],
                         [list(r.values()) for r in mine_rows], keys) and \
            _is_top_n([list(r.values()) for r in expected.to_pylist()],
                      [list(r.values()) for r in theirs_rows], keys)
    except TypeError:  # a key type Python does not order as SQL does
        return False


def _within_ulps(a, b) -> bool:
    if a is None or b is None or isinstance(a, bool) or not isinstance(a, float) or \
            not isinstance(b, float):
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if a == b:
        return True
    if math.isinf(a) or math.isinf(b) or (a < 0) != (b < 0):
        return False
    return abs(a - b) <= _ORDER_KEY_ULPS * math.ulp(max(abs(a), abs(b)))


def _pair_within_ulps(mine: list[list], theirs: list[list], floats: set[int]) -> bool:
    """Whether the rows pair up one to one: DOUBLE key columns within a few ulps, the others
    equal (the usual tolerance), and some pair's DOUBLE key not exactly equal."""
    remaining = list(range(len(theirs)))
    rounded = False
    for row in mine:
        for index, j in enumerate(remaining):
            other = theirs[j]
            if all(_within_ulps(a, b) if c in floats else
                   values_equal(normalize(a), normalize(b))
                   for c, (a, b) in enumerate(zip(row, other))):
                rounded |= any(row[c] != other[c] and row[c] is not None for c in floats)
                del remaining[index]
                break
        else:
            return False
    return rounded


def _deduplicates(sql: str) -> bool:
    """Whether the query has an operator that merges equal rows (DISTINCT, UNION, INTERSECT,
    EXCEPT, GROUP BY): the only way doubles a few ulps apart can change the row count."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    return any(isinstance(node, (exp.Distinct, exp.Intersect, exp.Except, exp.Group)) or
               (isinstance(node, exp.Union) and node.args.get("distinct"))
               for node in tree.walk())


def _snap_doubles(values: list[float]) -> dict[float, float]:
    """Each double mapped to the smallest of its run of values each within a few ulps of
    the next (NaN, infinities and exact values map to themselves)."""
    finite = sorted({v for v in values if isinstance(v, float) and math.isfinite(v)})
    snapped: dict[float, float] = {}
    start = None
    for previous, value in zip([None] + finite, finite):
        if previous is None or not _within_ulps(previous, value):
            start = value
        snapped[value] = start
    return snapped


def _duplicates_decided_by_rounding(actual: pa.Table, expected: pa.Table, sql: str) -> bool:
    """Whether the results differ only because a deduplicating operator (DISTINCT, a set
    operation, GROUP BY) kept apart doubles that one engine computed a few ulps apart and
    the other computed equal: two grouping sets of a ROLLUP over the same rows whose stddev
    the partitions' arrival order rounds differently, then a UNION (seed 9402, query 13883).
    Strict:

    - the query has such an operator and no top-level ORDER BY;
    - snapping every DOUBLE to the smallest of its run of values within ``_ORDER_KEY_ULPS``
      (over both results together) makes the two results the same set of rows;
    - neither result holds a row twice before snapping (an exact duplicate is not rounding),
      and snapping changed at least one value.
    """
    if not _deduplicates(sql) or has_top_level_order_by(sql) or \
            actual.num_columns != expected.num_columns or \
            max(actual.num_rows, expected.num_rows) > _MAX_ROUNDING_ROWS:
        return False
    floats = {c for c in range(expected.num_columns)
              if pa.types.is_floating(expected.schema.field(c).type) and
              pa.types.is_floating(actual.schema.field(c).type)}
    if not floats:
        return False
    mine = [list(r.values()) for r in actual.to_pylist()]
    theirs = [list(r.values()) for r in expected.to_pylist()]
    snap = _snap_doubles([row[c] for row in mine + theirs for c in floats])

    def snapped(rows: list[list]) -> list[tuple]:
        return [tuple(snap.get(v, normalize(v)) if c in floats and isinstance(v, float) else
                      normalize(v) for c, v in enumerate(row)) for row in rows]

    def exact(rows: list[list]) -> list[tuple]:
        return [tuple(normalize(v) for v in row) for row in rows]

    try:
        if any(len(set(exact(rows))) != len(rows) for rows in (mine, theirs)):
            return False
        mine_snapped, theirs_snapped = snapped(mine), snapped(theirs)
        if set(mine_snapped) != set(theirs_snapped):
            return False
    except TypeError:  # an unhashable value (a list or struct column): not this class
        return False
    return mine_snapped != exact(mine) or theirs_snapped != exact(theirs)


class _Reversed:
    """A value that sorts in the opposite order (a DESC key)."""

    def __init__(self, value):
        self.value = value

    def __lt__(self, other):
        return other.value < self.value

    def __eq__(self, other):
        return self.value == other.value


def _sort_key(row: list, keys: list[tuple[int, bool, bool]]) -> tuple:
    """``row``'s ORDER BY key as SQL (and both engines) order it: NaN above every number,
    NULLs first or last as written."""
    parts = []
    for position, desc, nulls_first in keys:
        value = row[position]
        if value is None:
            parts.append((0 if nulls_first else 2, 0))
            continue
        if isinstance(value, float) and math.isnan(value):
            value = (1, 0.0)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            value = (0, value)
        parts.append((1, _Reversed(value) if desc else value))
    return tuple(parts)


def _is_top_n(kept: list[list], rows: list[list], keys: list[tuple[int, bool, bool]]) -> bool:
    """Whether ``kept`` is sorted and holds the first len(kept) of ``rows`` by ``keys``: each
    kept row is one of ``rows``, and no row left out sorts before the last one kept."""
    kept_keys = [_sort_key(r, keys) for r in kept]
    if any(b < a for a, b in zip(kept_keys, kept_keys[1:])):
        return False
    left = list(rows)
    for row in kept:
        if row not in left:
            return False
        left.remove(row)
    return not kept_keys or not any(_sort_key(r, keys) < kept_keys[-1] for r in left)


def check(sql: str, tables: dict[str, pa.Table] | Engines, settings: list[tuple[int, int]],
          tlp: str | None = None, optimizer_check: bool = True) -> list[Finding]:
    """Every finding for ``sql`` (empty: it matched everywhere). Raises DuckDBRejects.

    ``tables`` may be an ``Engines`` over them, reused across the queries of one schema.
    """
    if not isinstance(tables, Engines):
        engines = Engines(tables)
        try:
            return check(sql, engines, settings, tlp, optimizer_check)
        finally:
            engines.close()
    engines = tables
    expected = engines.duckdb(sql)
    ordered = has_top_level_order_by(sql)
    findings: list[Finding] = []
    first_result = None
    for partitions, batch_size in settings:
        actual = engines.plansight(sql, partitions, batch_size)
        where = (partitions, batch_size, True)
        if isinstance(actual, Exception):
            kind, detail = classify_error(actual)
            if isinstance(expected, Exception) and isinstance(actual, ExecutionError):
                continue  # both fail at run time (overflow, division by zero, conversion)
            if isinstance(actual, ExecutionError) and engines.duckdb_unoptimized_fails(sql):
                findings.append(Finding("evaluation-order", f"DuckDB's optimizer skipped: "
                                        f"{detail}", sql, where))
                break
            if isinstance(actual, ExecutionError) and not isinstance(expected, Exception) \
                    and _null_operand_skipped(engines, sql, expected, ordered, partitions,
                                              batch_size):
                findings.append(Finding("evaluation-order", f"DuckDB skips an operand beside "
                                        f"a NULL one: {detail}", sql, where))
                break
            if isinstance(actual, ExecutionError) and not isinstance(expected, Exception) \
                    and _raises_on_its_input(engines, sql, actual, partitions, batch_size):
                findings.append(Finding("evaluation-order", f"DuckDB's plan skips an "
                                        f"expression that raises on its input: {detail}",
                                        sql, where))
                break
            findings.append(Finding(kind, detail, sql, where))
            break
        if isinstance(expected, Exception):
            if _filter_evaluated_early(engines, sql, actual, ordered):
                findings.append(Finding("evaluation-order", "DuckDB evaluates an aggregate's "
                                        "argument on rows its FILTER excludes", sql, where))
                break
            reference = engines.plansight(sql, partitions, batch_size, optimizer=False)
            if isinstance(reference, ExecutionError):
                # the mirror of DuckDB's optimizer skipping: plansight's pruned an expression
                # no result needs (an unused aggregate of a derived table), which DuckDB and
                # plansight's reference plan both evaluate and fail on
                findings.append(Finding("evaluation-order", f"plansight's optimizer skipped: "
                                        f"{gist(expected)}", sql, where))
                break
            unoptimized = engines.duckdb_unoptimized(sql)
            if not isinstance(unoptimized, Exception) and \
                    _compare(actual, unoptimized, sql, ordered) is None:
                # DuckDB's optimizer moved an expression before what guards it (its plan
                # without the optimizer returns plansight's result)
                findings.append(Finding("evaluation-order", f"DuckDB's optimizer evaluated "
                                        f"early: {gist(expected)}", sql, where))
                break
            if _needle_computed_early(engines, sql, actual, ordered):
                findings.append(Finding("evaluation-order", "DuckDB computes x of x IN "
                                        "(correlated subquery) for rows that correlate with "
                                        "no inner row", sql, where))
                break
            if _empty_operand_decides(engines, sql, actual):
                findings.append(Finding("evaluation-order", "DuckDB evaluates the other "
                                        "operand of INTERSECT/EXCEPT beside an empty one",
                                        sql, where))
                break
            if _raises_on_its_input(engines, sql, expected, partitions, batch_size,
                                    raised_by="duckdb"):
                findings.append(Finding("evaluation-order", f"plansight's plan skips an "
                                        f"expression that raises on its input: "
                                        f"{gist(expected)}", sql, where))
                break
            findings.append(Finding("error-only-duckdb", gist(expected), sql, where))
            break
        difference = _compare(actual, expected, sql, ordered)
        if difference is not None:
            if ordered and _order_decided_by_rounding(engines, sql, actual, expected,
                                                      partitions, batch_size):
                findings.append(Finding("float-rounding", "a DOUBLE ORDER BY key a few ulps "
                                        "apart decides the order (and a LIMIT's cut)", sql,
                                        where))
                break
            if not ordered and _duplicates_decided_by_rounding(actual, expected, sql):
                findings.append(Finding("float-rounding", "doubles a few ulps apart kept as "
                                        "separate rows by DISTINCT, a set operation or GROUP "
                                        "BY", sql, where))
                break
            findings.append(Finding("wrong", difference, sql, where))
            break
        first_result = first_result if first_result is not None else (actual, where)
    if findings or first_result is None:
        return findings
    result, (partitions, batch_size, _) = first_result
    if optimizer_check:
        reference = engines.plansight(sql, partitions, batch_size, optimizer=False)
        where = (partitions, batch_size, False)
        if isinstance(reference, ExecutionError):
            # without filter pushdown the reference plan computes expressions on rows the
            # optimized plan filters out first: an overflow there is evaluation order (SQL
            # leaves it open), not a wrong answer
            findings.append(Finding("evaluation-order", f"reference plan: {gist(reference)}",
                                    sql, where))
        elif isinstance(reference, Exception):
            kind, detail = classify_error(reference)
            findings.append(Finding("optimizer" if kind != "not-supported" else kind,
                                    f"reference plan: {detail}", sql, where))
        else:
            difference = _compare(reference, result, sql, ordered)
            if difference is not None:
                findings.append(Finding("optimizer", difference, sql, where))
    if tlp is not None:
        partitioned = engines.plansight(tlp, partitions, batch_size)
        where = (partitions, batch_size, True)
        if isinstance(partitioned, Exception):
            kind, detail = classify_error(partitioned)
            if not isinstance(partitioned, ExecutionError):
                findings.append(Finding("tlp" if kind != "not-supported" else kind,
                                        f"partitioned query: {detail}", tlp, where))
        else:
            difference = _compare(partitioned, result, tlp, False)
            if difference is not None:
                findings.append(Finding("tlp", difference, tlp, where))
    return findings


def draw_settings(rng: random.Random, count: int = 2) -> list[tuple[int, int]]:
    """``count`` (partitions, batch size) pairs; the first is always the plain 1 x 8192."""
    pairs = [(p, b) for p in PARTITIONS for b in BATCH_SIZES if (p, b) != (1, 8192)]
    return [(1, 8192)] + rng.sample(pairs, count - 1)
