"""A seeded random generator of SQL over the tables of ``tables.py``.

Queries cover the SQL surface plansight supports: joins of every kind (comma, INNER, LEFT,
RIGHT, FULL, CROSS, derived tables), WHERE with subqueries (scalar, EXISTS, IN; correlated
and not), GROUP BY with ROLLUP / CUBE / GROUPING SETS and HAVING, DISTINCT, window functions
with ROWS / RANGE / GROUPS frames, set operations, ORDER BY + LIMIT, and CASE / CAST /
COALESCE / NULLIF / string, math and date functions.

Every result is deterministic: a window's ORDER BY ends with the table's unique ``id``, and a
top-level LIMIT comes with an ORDER BY over every output column.

    gen = QueryGenerator(random.Random(7), tables)
    case = gen.case()        # case.sql, and case.tlp: the TLP partition of it, when it has one
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pyarrow as pa

from tools.fuzz.tables import COLUMNS

CATEGORIES = ("int", "float", "dec", "str", "bool", "date")
NUMERIC = ("int", "float", "dec")

_LITERALS = {
    "int": ["0", "1", "-1", "2", "3", "7", "100", "2147483647", "NULL", "CAST(NULL AS INTEGER)"],
    "float": ["0.0::DOUBLE", "-0.0::DOUBLE", "1.5::DOUBLE", "'nan'::DOUBLE", "'inf'::DOUBLE",
              "'-inf'::DOUBLE", "-2.25::DOUBLE", "CAST(NULL AS DOUBLE)"],
    "dec": ["1.50", "0.00", "-2.25", "12.34", "0.5", "CAST(NULL AS DECIMAL(10, 2))"],
    "str": ["''", "'a'", "'A'", "'ab'", "'é'", "'zz'", "NULL", "CAST(NULL AS VARCHAR)"],
    "bool": ["TRUE", "FALSE", "NULL"],
    "date": ["DATE '2024-02-29'", "DATE '1970-01-01'", "DATE '2000-01-01'",
             "CAST(NULL AS DATE)"],
}

_PATTERNS = ["'a%'", "'%b'", "'_'", "'%'", "'a_'"]


@dataclass
class Scope:
    """Columns a query level can name: (qualified name, category); ``outer`` for correlation."""

    columns: list[tuple[str, str]] = field(default_factory=list)
    outer: Scope | None = None
    single_table: str | None = None  # the alias when FROM is one base table (windows)

    def of(self, category: str) -> list[str]:
        return [name for name, c in self.columns if c == category]


@dataclass
class Case:
    sql: str
    tlp: str | None = None  # the same rows as ``sql`` (a multiset), by ternary partitioning


class QueryGenerator:
    def __init__(self, rng: random.Random, tables: dict[str, pa.Table]):
        self.rng = rng
        self.tables = tables
        self.aliases = 0
        self.derived: list[tuple[str, list[str]]] = []

    # -- entry points -----------------------------------------------------------
    def case(self) -> Case:
        self.derived = []  # a case may name one of its derived tables again
        r = self.rng.random()
        signature = self._signature()
        if r < 0.15:
            return Case(self._set_operation(signature))
        if r < 0.45:
            sql, tlp = self._simple_select(signature, tlp=True)
            if self.rng.random() < 0.2:  # no TLP for a limited query
                return Case(self._order_limit(sql, len(signature)))
            return Case(sql, tlp)
        if r < 0.75:
            return Case(self._maybe_order_limit(self._aggregate_select(signature),
                                                len(signature)))
        if r < 0.8:
            return Case(self._nested_select())
        sql, width = self._window_select()
        return Case(self._maybe_order_limit(sql, width))

    # -- shapes ---------------------------------------------------------------------
    def _signature(self, n: int | None = None) -> list[str]:
        n = n or self.rng.randint(1, 3)
        return [self.rng.choice(CATEGORIES) for _ in range(n)]

    def _simple_select(self, signature=None, outer=None, tlp=False):
        scope, from_sql = self._from(outer)
        signature = signature or self._signature()
        items = [self.expr(c, scope, 2) for c in signature]
        where = self.expr("bool", scope, 2) if self.rng.random() < 0.7 else None
        distinct = "DISTINCT " if self.rng.random() < 0.15 else ""
        select = f"SELECT {distinct}{self._items(items)} FROM {from_sql}"
        sql = select + (f" WHERE {where}" if where else "")
        partition = None
        if tlp:
            p = self.expr("bool", scope, 2)
            base = f"({where})" if where else "TRUE"
            joiner = " UNION " if distinct else " UNION ALL "
            partition = joiner.join(f"{select} WHERE {base} AND {part}" for part in (
                f"({p})", f"NOT ({p})", f"({p}) IS NULL"))
        return sql, partition

    def _aggregate_select(self, signature=None, outer=None) -> str:
        scope, from_sql = self._from(outer)
        keys = [self.rng.choice(scope.columns) for _ in range(self.rng.randint(0, 2))]
        key_names = list(dict.fromkeys(name for name, _ in keys))
        key_categories = dict(keys)
        signature = signature or self._signature()
        items = []
        for category in signature:
            usable = [k for k in key_names if key_categories[k] == category]
            if usable and self.rng.random() < 0.5:
                items.append(self.rng.choice(usable))
            else:
                items.append(self.aggregate(category, scope))
        where = f" WHERE {self.expr('bool', scope, 1)}" if self.rng.random() < 0.5 else ""
        group = ""
        if key_names:
            form = self.rng.random()
            listed = ", ".join(key_names)
            if form < 0.6:
                group = f" GROUP BY {listed}"
            elif form < 0.75:
                group = f" GROUP BY ROLLUP ({listed})"
            elif form < 0.9:
                group = f" GROUP BY CUBE ({listed})"
            else:
                group = f" GROUP BY GROUPING SETS (({listed}), ())"
        elif self.rng.random() < 0.1:
            group = " GROUP BY GROUPING SETS (())"
        having = ""
        if self.rng.random() < 0.3:
            having = f" HAVING {self._aggregate_predicate(scope)}"
        return f"SELECT {self._items(items)} FROM {from_sql}{where}{group}{having}"

    def _window_select(self) -> tuple[str, int]:
        name = self.rng.choice(sorted(self.tables))
        alias = self._alias()
        scope = Scope([(f"{alias}.{c}", cat) for c, (_, cat) in COLUMNS.items()] +
                      [(f"{alias}.id", "int")], single_table=alias)
        items = [self.expr(self.rng.choice(CATEGORIES), scope, 1)]
        for _ in range(self.rng.randint(1, 2)):
            items.append(self.window(scope, alias))
        where = f" WHERE {self.expr('bool', scope, 1)}" if self.rng.random() < 0.4 else ""
        return f"SELECT {self._items(items)} FROM {name} AS {alias}{where}", len(items)

    def _nested_value(self, scope: Scope) -> str:
        """A struct or list value over columns (NULL fields and elements included)."""
        if self.rng.random() < 0.5:
            category = self.rng.choice(CATEGORIES)
            items = [self.expr(category, scope, 1) for _ in range(self.rng.randint(1, 2))]
            if self.rng.random() < 0.3:
                items.append("NULL")
            return f"[{', '.join(items)}]"
        fields = [self.expr(self.rng.choice(CATEGORIES), scope, 1)
                  for _ in range(self.rng.randint(1, 2))]
        return "{" + ", ".join(f"'f{i}': {f}" for i, f in enumerate(fields)) + "}"

    def _nested_select(self) -> str:
        """Struct / list keys: GROUP BY, DISTINCT, count(DISTINCT), PARTITION BY, a join
        and set operations on them."""
        scope, from_sql = self._from(None)
        value = self._nested_value(scope)
        where = f" WHERE {self.expr('bool', scope, 1)}" if self.rng.random() < 0.4 else ""
        form = self.rng.randint(0, 5)
        if form == 0:
            group = value if self.rng.random() < 0.7 else f"ROLLUP ({value})"
            return f"SELECT {value} AS c0, count(*) AS c1 FROM {from_sql}{where} " \
                   f"GROUP BY {group}"
        if form == 1:
            return f"SELECT DISTINCT {value} AS c0 FROM {from_sql}{where}"
        if form == 2:
            return f"SELECT count(DISTINCT {value}) AS c0 FROM {from_sql}{where}"
        if form == 3:
            return f"SELECT {value} AS c0, count(*) OVER (PARTITION BY {value}) AS c1 " \
                   f"FROM {from_sql}{where}"
        if form == 4:
            op = self.rng.choice(["UNION", "UNION ALL", "INTERSECT", "EXCEPT", "EXCEPT ALL"])
            other = f" WHERE {self.expr('bool', scope, 1)}"
            return f"(SELECT {value} AS c0 FROM {from_sql}{where}) {op} " \
                   f"(SELECT {value} AS c0 FROM {from_sql}{other})"
        name = self.rng.choice(sorted(self.tables))
        left, right = self._alias(), self._alias()
        column = self.rng.choice(list(COLUMNS))
        kind = self.rng.choice(["JOIN", "LEFT JOIN", "FULL JOIN"])
        return f"SELECT {left}.id AS c0, {right}.id AS c1 FROM {name} AS {left} {kind} " \
               f"{name} AS {right} ON [{left}.{column}] = [{right}.{column}]"

    def _set_operation(self, signature: list[str]) -> str:
        op = self.rng.choice(["UNION", "UNION ALL", "INTERSECT", "EXCEPT", "INTERSECT ALL",
                              "EXCEPT ALL"])
        branches = []
        for _ in range(2):
            if self.rng.random() < 0.6:
                branches.append(self._simple_select(signature)[0])
            else:
                branches.append(self._aggregate_select(signature))
        return f"({branches[0]}) {op} ({branches[1]})"

    def _maybe_order_limit(self, sql: str, width: int) -> str:
        return self._order_limit(sql, width) if self.rng.random() < 0.2 else sql

    def _order_limit(self, sql: str, width: int) -> str:
        # every output position: a total order (ties are whole equal rows)
        positions = ", ".join(f"{i + 1}{self.rng.choice(['', ' DESC'])} NULLS "
                              f"{self.rng.choice(['FIRST', 'LAST'])}" for i in range(width))
        return f"SELECT * FROM ({sql}) AS q ORDER BY {positions} LIMIT " \
               f"{self.rng.choice([0, 1, 2, 5])}"

    def _items(self, items: list[str]) -> str:
        return ", ".join(f"{item} AS c{i}" for i, item in enumerate(items))

    def _alias(self) -> str:
        self.aliases += 1
        return f"a{self.aliases}"

    # -- FROM -------------------------------------------------------------------------
    def _relation(self, outer) -> tuple[str, list[tuple[str, str]], bool]:
        alias = self._alias()
        reuse = outer is None and self.derived and self.rng.random() < 0.3
        if reuse or (outer is None and self.rng.random() < 0.15):
            if reuse:
                # the same derived table twice: plansight plans the copies as one shared
                # subplan (physical/shared.py), which no reader may see differently
                inner, signature = self.rng.choice(self.derived)
            else:
                signature = self._signature()
                inner = self._simple_select(signature)[0] if self.rng.random() < 0.6 else \
                    self._aggregate_select(signature)
                self.derived.append((inner, signature))
            return (f"({inner}) AS {alias}",
                    [(f"{alias}.c{i}", c) for i, c in enumerate(signature)], False)
        name = self.rng.choice(sorted(self.tables))
        columns = [(f"{alias}.{c}", cat) for c, (_, cat) in COLUMNS.items()]
        return f"{name} AS {alias}", columns + [(f"{alias}.id", "int")], True

    def _from(self, outer: Scope | None) -> tuple[Scope, str]:
        text, columns, base = self._relation(outer)
        scope = Scope(list(columns), outer)
        if base and self.rng.random() < 0.5:
            scope.single_table = text.split(" AS ")[1]
            return scope, text
        group = list(columns)  # the columns a JOIN's ON may name (since the last comma)
        for _ in range(self.rng.randint(0, 2 if outer is None else 1)):
            text_r, columns_r, _ = self._relation(outer)
            kind = self.rng.choice([",", "JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN",
                                    "CROSS JOIN", "INNER JOIN"])
            if kind == ",":
                text += f", {text_r}"
                group = list(columns_r)
            elif kind == "CROSS JOIN":
                text += f" CROSS JOIN {text_r}"
                group += columns_r
            else:
                local = Scope(group + columns_r, outer)
                condition = self._equality(Scope(group), Scope(columns_r))
                if self.rng.random() < 0.4:
                    condition = f"{condition} AND {self.expr('bool', local, 1)}"
                text += f" {kind} {text_r} ON {condition}"
                group += columns_r
            scope.columns += columns_r
        return scope, text

    def _equality(self, left: Scope, right: Scope) -> str:
        for _ in range(10):
            category = self.rng.choice(CATEGORIES)
            if left.of(category) and right.of(category):
                return f"{self.rng.choice(left.of(category))} = " \
                       f"{self.rng.choice(right.of(category))}"
        return "TRUE"

    # -- expressions ----------------------------------------------------------------
    def column(self, category: str, scope: Scope) -> str | None:
        names = scope.of(category)
        if category == "float" and not names:
            names = [f"CAST({n} AS DOUBLE)" for n in scope.of("int")]
        return self.rng.choice(names) if names else None

    def literal(self, category: str) -> str:
        return self.rng.choice(_LITERALS[category])

    def expr(self, category: str, scope: Scope, depth: int) -> str:
        r = self.rng.random()
        if depth <= 0 or r < 0.3:
            column = self.column(category, scope)
            if column is not None and self.rng.random() < 0.8:
                return column
            return self.literal(category)
        if r < 0.38 and depth >= 2:
            return self.subquery(category, scope)
        if r < 0.5:
            return self._conditional(category, scope, depth)
        return getattr(self, f"_{category}_expr")(scope, depth - 1)

    def _conditional(self, category: str, scope: Scope, depth: int) -> str:
        e = lambda: self.expr(category, scope, depth - 1)
        choice = self.rng.randint(0, 3)
        if choice == 0:
            return f"CASE WHEN {self.expr('bool', scope, depth - 1)} THEN {e()} ELSE {e()} END"
        if choice == 1:
            return f"COALESCE({e()}, {e()})"
        if choice == 2 and category != "bool":
            return f"NULLIF({e()}, {e()})"
        return f"CASE {e()} WHEN {e()} THEN {e()} END" if category != "bool" else e()

    def _int_expr(self, scope: Scope, depth: int) -> str:
        a = lambda: self.expr("int", scope, depth)
        return self.rng.choice([
            lambda: f"({a()} + {a()})", lambda: f"({a()} - {a()})",
            lambda: f"({a()} * {self.rng.choice(['2', '-1', '0', '3'])})",
            lambda: f"abs({a()})", lambda: f"(-({a()}))",
            lambda: f"length({self.expr('str', scope, depth)})",
            lambda: f"CAST({self.expr('dec', scope, depth)} AS INTEGER)",
            lambda: f"greatest({a()}, {a()})", lambda: f"least({a()}, {a()})",
            lambda: f"sign({a()})",
        ])()

    def _float_expr(self, scope: Scope, depth: int) -> str:
        a = lambda: self.expr("float", scope, depth)
        return self.rng.choice([
            lambda: f"({a()} + {a()})", lambda: f"({a()} * 1.5)", lambda: f"abs({a()})",
            lambda: f"CAST({self.expr('int', scope, depth)} AS DOUBLE)",
            lambda: f"round({a()}, {self.rng.randint(-1, 2)})", lambda: f"(-({a()}))",
            lambda: f"CAST({self.expr('dec', scope, depth)} AS DOUBLE)",
        ])()

    def _dec_expr(self, scope: Scope, depth: int) -> str:
        a = lambda: self.expr("dec", scope, depth)
        return self.rng.choice([
            lambda: f"({a()} + {a()})", lambda: f"({a()} - 1)", lambda: f"({a()} * 2)",
            lambda: f"abs({a()})", lambda: f"round({a()}, {self.rng.randint(-1, 2)})",
            lambda: f"CAST({self.expr('int', scope, depth)} AS DECIMAL(12, 2))",
            lambda: f"floor({a()})", lambda: f"ceil({a()})",
        ])()

    def _str_expr(self, scope: Scope, depth: int) -> str:
        a = lambda: self.expr("str", scope, depth)
        return self.rng.choice([
            lambda: f"upper({a()})", lambda: f"lower({a()})", lambda: f"({a()} || {a()})",
            lambda: f"concat({a()}, {a()})", lambda: f"concat_ws('-', {a()}, {a()})",
            lambda: f"substring({a()}, {self.rng.randint(0, 2)}, {self.rng.randint(0, 2)})",
            lambda: f"trim({a()})", lambda: f"replace({a()}, 'a', 'xy')",
            lambda: f"CAST({self.expr('int', scope, depth)} AS VARCHAR)",
            lambda: f"CAST({self.expr('date', scope, depth)} AS VARCHAR)",
            lambda: f"reverse({a()})", lambda: f"lpad({a()}, 3, '*')",
        ])()

    def _date_expr(self, scope: Scope, depth: int) -> str:
        a = lambda: self.expr("date", scope, depth)
        return self.rng.choice([
            lambda: f"({a()} + {self.rng.choice(['1', '-1', '31', '366'])})",
            lambda: f"greatest({a()}, {a()})", lambda: f"least({a()}, {a()})",
        ])()

    def _bool_expr(self, scope: Scope, depth: int) -> str:
        category = self.rng.choice(CATEGORIES)
        x = lambda: self.expr(category, scope, depth)
        b = lambda: self.expr("bool", scope, depth)
        op = self.rng.choice(["=", "<>", "<", "<=", ">", ">="])
        return self.rng.choice([
            lambda: f"({x()} {op} {x()})",
            lambda: f"({self.expr(self.rng.choice(NUMERIC), scope, depth)} {op} "
                    f"{self.expr(self.rng.choice(NUMERIC), scope, depth)})",
            lambda: f"({x()} IS NULL)", lambda: f"({x()} IS NOT NULL)",
            lambda: f"({x()} IS DISTINCT FROM {x()})",
            lambda: f"({x()} BETWEEN {x()} AND {x()})",
            lambda: f"({x()} {self.rng.choice(['', 'NOT '])}IN ({x()}, {x()}))",
            lambda: f"({b()} AND {b()})", lambda: f"({b()} OR {b()})", lambda: f"(NOT {b()})",
            lambda: f"({self.expr('str', scope, depth)} LIKE {self.rng.choice(_PATTERNS)})",
            lambda: self.subquery("bool", scope),
        ])()

    # -- subqueries -------------------------------------------------------------------
    def subquery(self, category: str, scope: Scope) -> str:
        name = self.rng.choice(sorted(self.tables))
        alias = self._alias()
        inner = Scope([(f"{alias}.{c}", cat) for c, (_, cat) in COLUMNS.items()] +
                      [(f"{alias}.id", "int")], scope)
        conditions = []
        if self.rng.random() < 0.7:  # correlated
            shared = [c for c in CATEGORIES if inner.of(c) and scope.of(c)]
            if shared:
                c = self.rng.choice(shared)
                op = "=" if self.rng.random() < 0.75 else self.rng.choice(["<", ">", "<>"])
                conditions.append(f"{self.rng.choice(inner.of(c))} {op} "
                                  f"{self.rng.choice(scope.of(c))}")
        if self.rng.random() < 0.4:
            conditions.append(self.expr("bool", inner, 1))
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        source = f"{name} AS {alias}"
        if category == "bool":
            kind = self.rng.random()
            if kind < 0.5:
                return f"({self.rng.choice(['', 'NOT '])}EXISTS (SELECT 1 FROM {source}{where}))"
            c = self.rng.choice(CATEGORIES)
            needle = self.expr(c, scope, 1)
            value = self.rng.choice(inner.of(c)) if inner.of(c) else self.literal(c)
            if self.rng.random() < 0.2:
                value = self.aggregate(c, inner)
            negated = self.rng.choice(["", "NOT "])
            return f"({needle} {negated}IN (SELECT {value} FROM {source}{where}))"
        if self.rng.random() < 0.7:
            return f"(SELECT {self.aggregate(category, inner)} FROM {source}{where})"
        value = self.rng.choice(inner.of(category)) if inner.of(category) else \
            self.literal(category)
        return f"(SELECT {value} FROM {source}{where} ORDER BY {alias}.id LIMIT 1)"

    # -- aggregates and windows ---------------------------------------------------------
    def aggregate(self, category: str, scope: Scope) -> str:
        x = lambda c: self.expr(c, scope, 1)
        options = {
            "int": [lambda: "count(*)", lambda: f"count({x(self.rng.choice(CATEGORIES))})",
                    lambda: f"count(DISTINCT {x(self.rng.choice(CATEGORIES))})",
                    lambda: f"sum({x('int')})", lambda: f"min({x('int')})",
                    lambda: f"max({x('int')})"],
            "float": [lambda: f"avg({x(self.rng.choice(NUMERIC))})", lambda: f"sum({x('float')})",
                      lambda: f"min({x('float')})", lambda: f"max({x('float')})",
                      lambda: f"var_pop({x(self.rng.choice(NUMERIC))})",
                      lambda: f"stddev_samp({x(self.rng.choice(NUMERIC))})"],
            "dec": [lambda: f"sum({x('dec')})", lambda: f"min({x('dec')})",
                    lambda: f"max({x('dec')})"],
            "str": [lambda: f"min({x('str')})", lambda: f"max({x('str')})",
                    lambda: f"min(upper({x('str')}))"],
            "bool": [lambda: f"bool_and({x('bool')})", lambda: f"bool_or({x('bool')})",
                     lambda: f"(count(*) > {self.rng.randint(0, 3)})"],
            "date": [lambda: f"min({x('date')})", lambda: f"max({x('date')})"],
        }[category]
        call = self.rng.choice(options)()
        if self.rng.random() < 0.1 and call.startswith(("sum(", "count(", "min(", "max(")):
            call += f" FILTER (WHERE {self.expr('bool', scope, 1)})"
        return call

    def _aggregate_predicate(self, scope: Scope) -> str:
        category = self.rng.choice(CATEGORIES)
        op = self.rng.choice(["=", "<>", "<", ">", "IS DISTINCT FROM"])
        return f"({self.aggregate(category, scope)} {op} {self.literal(category)}) " \
               f"{self.rng.choice(['AND', 'OR'])} ({self.aggregate('bool', scope)})"

    def window(self, scope: Scope, alias: str) -> str:
        partition = self.rng.choice(scope.columns)[0]
        order_category = self.rng.choice(CATEGORIES)
        order = self.column(order_category, scope)
        direction = self.rng.choice(["", " DESC"])
        nulls = self.rng.choice(["", " NULLS FIRST", " NULLS LAST"])
        over_total = f"PARTITION BY {partition} ORDER BY {order}{direction}{nulls}, {alias}.id"
        over_peers = f"PARTITION BY {partition} ORDER BY {order}{direction}{nulls}"
        value = lambda c: self.expr(c, scope, 1)
        numeric = self.rng.choice(["int", "dec", "float"])
        n, m = self.rng.randint(0, 2), self.rng.randint(0, 2)
        frames = [f"ROWS BETWEEN {n} PRECEDING AND {m} FOLLOWING",
                  "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
                  f"ROWS BETWEEN CURRENT ROW AND {m} FOLLOWING",
                  "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"]
        peer_frames = ["RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
                       "RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
                       f"GROUPS BETWEEN {n} PRECEDING AND {m} FOLLOWING",
                       "GROUPS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"]
        excludes = ["", "", " EXCLUDE CURRENT ROW", " EXCLUDE GROUP", " EXCLUDE TIES"]
        aggregate = self.rng.choice([f"sum({value(numeric)})", f"count({value(numeric)})",
                                     f"min({value(self.rng.choice(CATEGORIES))})",
                                     f"max({value(self.rng.choice(CATEGORIES))})",
                                     f"avg({value(numeric)})", "count(*)"])
        return self.rng.choice([
            lambda: f"row_number() OVER ({over_total})",
            lambda: f"rank() OVER ({over_peers})", lambda: f"dense_rank() OVER ({over_peers})",
            lambda: f"percent_rank() OVER ({over_peers})",
            lambda: f"cume_dist() OVER ({over_peers})",
            lambda: f"ntile({self.rng.randint(1, 3)}) OVER ({over_total})",
            lambda: f"lag({value(self.rng.choice(CATEGORIES))}, {n}) OVER ({over_total})",
            lambda: f"lead({value('int')}, 1, 0) OVER ({over_total})",
            lambda: f"first_value({value(self.rng.choice(CATEGORIES))}) OVER ({over_total} "
                    f"{self.rng.choice(frames)})",
            lambda: f"{aggregate} OVER ({over_total} {self.rng.choice(frames)}"
                    f"{self.rng.choice(excludes[:2])})",
            lambda: f"{aggregate} OVER ({over_peers} {self.rng.choice(peer_frames)}"
                    f"{self.rng.choice(excludes)})",
            lambda: f"{aggregate} OVER (PARTITION BY {partition})",
        ])()
