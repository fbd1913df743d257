"""Replacement scans: a table name the session does not know is looked up among the caller's
variables, as DuckDB does, so ``Session().sql("SELECT * FROM df")`` reads the DataFrame ``df``
of the calling code, and a ``%%query`` cell reads notebook variables.

Only variables holding tables (Arrow tables/batches/readers, pandas or polars DataFrames) are
taken; a registered table of the same name wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
from sqlglot import exp

from plansight.engine.sql.parser import parse
from plansight.errors import PlansightError


def referenced_tables(sql: str | Iterable[exp.Expression]) -> set[str]:
    """Unqualified table names the SQL reads, CTE names excluded; empty if it does not parse.

    Example:
        >>> sql = "WITH c AS (SELECT * FROM a) SELECT * FROM c JOIN b USING (k)"
        >>> sorted(referenced_tables(sql))
        ['a', 'b']
    """
    if isinstance(sql, str):
        try:
            statements = parse(sql)
        except PlansightError:
            return set()  # the engine's parser reports the error with a caret
    else:
        statements = sql
    names: set[str] = set()
    ctes: set[str] = set()
    for statement in statements:
        if statement is None:
            continue
        ctes.update(cte.alias_or_name for cte in statement.find_all(exp.CTE))
        for table in statement.find_all(exp.Table):
            if table.name and not table.args.get("db") and isinstance(table.this, exp.Identifier):
                names.add(table.name)
    return names - ctes


def is_tabular(obj: Any) -> bool:
    """An Arrow table/batch/reader or a pandas/polars DataFrame (without importing either)."""
    if isinstance(obj, (pa.Table, pa.RecordBatch, pa.RecordBatchReader)):
        return True
    module = type(obj).__module__.split(".")[0]
    return module in ("pandas", "polars") and type(obj).__name__ == "DataFrame"


def find_tables(sql: str | Iterable[exp.Expression], registered: Iterable[str],
                *namespaces: Mapping[str, Any], views: Mapping[str, Any] | None = None,
                listed: tuple[Mapping[str, Any], ...] | None = None) -> dict[str, Any]:
    """Variables holding tables that the SQL names and ``registered`` does not hold, from
    the first namespace that has them (an exact name, else a unique case-insensitive match).
    Tables named inside the ``views`` the SQL reads count too; ``SHOW TABLES`` takes every
    table variable of the ``listed`` namespaces (default: all; a notebook's DataFrames are
    tables, a function's local variables need not be).

    Example:
        >>> import pyarrow as pa
        >>> found = find_tables("SELECT * FROM T JOIN u USING (k)", ["u"], {"t": pa.table({})})
        >>> list(found)
        ['T']
    """
    if isinstance(sql, str):
        try:
            sql = parse(sql)
        except PlansightError:
            return {}
    statements = list(sql)
    known = {name.lower() for name in registered}
    found: dict[str, Any] = {}
    if any(isinstance(s, exp.Show) and str(s.name).upper() == "TABLES" for s in statements):
        for namespace in reversed(namespaces if listed is None else listed):  # first wins
            found.update({name: obj for name, obj in namespace.items()
                          if isinstance(name, str) and not name.startswith("_") and
                          name.lower() not in known and is_tabular(obj)})
        return found
    names = referenced_tables(statements)
    views = {name.lower(): view for name, view in (views or {}).items()}
    pending = [name for name in names if name.lower() in views]
    while pending:  # the tables inside the views read, and inside views they read
        view = views.pop(pending.pop().lower())
        inner = referenced_tables([view.query]) - names
        names |= inner
        pending += [name for name in inner if name.lower() in views]
    for name in names:
        if name.lower() in known:
            continue
        for namespace in namespaces:
            obj = namespace.get(name)
            if not is_tabular(obj):
                matches = [key for key in namespace if isinstance(key, str) and
                           key.lower() == name.lower() and is_tabular(namespace[key])]
                obj = namespace[matches[0]] if len(matches) == 1 else None
            if obj is not None:
                found[name] = obj
                break
    return found
