"""Reduce a failing query to a minimal one that fails the same way.

Greedy and AST-based (sqlglot): try each simplification (drop a list element: a select
item, a join, a GROUP BY key, an ORDER BY key; drop a clause: WHERE, HAVING, ORDER BY, LIMIT,
DISTINCT; replace an expression by one of its operands, a condition by TRUE) and keep it when
the query still fails with the same signature; repeat until nothing applies. Then shrink the
tables: drop rows (halves first, then one at a time).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import sqlglot
from sqlglot import exp

_CLAUSES = ("where", "having", "order", "limit", "distinct", "qualify")


def _mutations(tree: exp.Expression):
    """(node index in tree.walk() order, description) of each simplification to try."""
    for index, node in enumerate(tree.walk()):
        parent, key = node.parent, node.arg_key
        if parent is not None and isinstance(parent.args.get(key), list) and \
                len(parent.args[key]) > 1:
            yield index, "drop"
        if isinstance(node, exp.Select):
            for clause in _CLAUSES:
                if node.args.get(clause) is not None:
                    yield index, f"clause:{clause}"
        if isinstance(node, (exp.Condition, exp.Func)) and not isinstance(
                node, (exp.Column, exp.Literal, exp.Star, exp.Boolean)):
            for position, _child in enumerate(c for c in node.iter_expressions()
                                             if isinstance(c, exp.Expression)):
                yield index, f"child:{position}"
            if isinstance(node, (exp.Predicate, exp.Connector, exp.Not, exp.Exists,
                                 exp.In, exp.Between)):
                yield index, "true"
        if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select) and \
                isinstance(parent, (exp.Select,)) is False and isinstance(
                    node.parent, (exp.Condition,)):
            yield index, "null"


def _apply(tree: exp.Expression, index: int, how: str) -> str | None:
    copy = tree.copy()
    node = next(n for i, n in enumerate(copy.walk()) if i == index)
    try:
        if how == "drop":
            node.pop()
        elif how.startswith("clause:"):
            node.set(how.split(":")[1], None)
        elif how.startswith("child:"):
            children = [c for c in node.iter_expressions() if isinstance(c, exp.Expression)]
            replacement = children[int(how.split(":")[1])]
            if isinstance(replacement, (exp.Identifier, exp.DataType)):
                return None
            node.replace(replacement.copy())
        elif how == "true":
            node.replace(exp.true())
        elif how == "null":
            node.replace(exp.null())
        return copy.sql(dialect="duckdb")
    except Exception:  # noqa: BLE001 (an invalid mutation is simply not tried)
        return None


def reduce_query(sql: str, tables: dict[str, pa.Table],
                 fails: Callable[[str, dict[str, pa.Table]], bool],
                 budget: int = 400) -> tuple[str, dict[str, pa.Table]]:
    """The smallest (sql, tables) found for which ``fails`` still holds; ``budget`` bounds the
    number of attempts."""
    attempts = 0
    changed = True
    while changed and attempts < budget:
        changed = False
        tree = sqlglot.parse_one(sql, read="duckdb")
        for index, how in list(_mutations(tree)):
            candidate = _apply(tree, index, how)
            if candidate is None or candidate == sql or len(candidate) >= len(sql):
                continue
            attempts += 1
            if fails(candidate, tables):
                sql, changed = candidate, True
                break
            if attempts >= budget:
                break
    return sql, _reduce_tables(sql, tables, fails, budget // 2)


def _reduce_tables(sql, tables, fails, budget):
    attempts = 0
    for name in sorted(tables):
        if name.lower() not in sql.lower():
            candidate = {k: v for k, v in tables.items() if k != name}
            attempts += 1
            if fails(sql, candidate):
                tables = candidate
                continue
        size = max(1, tables[name].num_rows // 2)
        while size >= 1 and attempts < budget:
            table = tables[name]
            shrunk = False
            for start in range(0, table.num_rows, size):
                keep = table.slice(0, start).to_batches() + \
                    table.slice(start + size).to_batches()
                smaller = pa.Table.from_batches(keep, schema=table.schema)
                attempts += 1
                if fails(sql, {**tables, name: smaller}):
                    tables = {**tables, name: smaller}
                    shrunk = True
                    break
            if not shrunk:
                size //= 2
    return tables


def table_literal(tables: dict[str, pa.Table]) -> str:
    """Python source recreating ``tables`` (to paste into a regression test)."""
    lines = []
    for name, table in sorted(tables.items()):
        columns = ", ".join(f"{c!r}: pa.array({table.column(c).to_pylist()!r}, "
                            f"pa.{_type_source(table.schema.field(c).type)})"
                            for c in table.column_names)
        lines.append(f"{name!r}: pa.table({{{columns}}}),")
    return "\n".join(lines)


def _type_source(t: pa.DataType) -> str:
    if pa.types.is_decimal(t):
        return f"decimal128({t.precision}, {t.scale})"
    return {pa.int32(): "int32()", pa.int64(): "int64()", pa.float64(): "float64()",
            pa.string(): "string()", pa.bool_(): "bool_()", pa.date32(): "date32()"}.get(
                t, f"{t}()")
