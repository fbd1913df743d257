"""Parsing SQL text with sqlglot (DuckDB dialect), turning its errors into SqlSyntaxError.

One addition to the dialect: ORDER BY items remember whether NULLS FIRST/LAST was written,
so that the session's ``default_null_order`` applies only where it was not.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError, TokenError

from plansight.errors import SqlSyntaxError


class _Dialect(DuckDB):
    class Parser(DuckDB.Parser):
        def _parse_ordered(self, *args, **kwargs):
            start = self._index
            node = super()._parse_ordered(*args, **kwargs)
            if isinstance(node, exp.Ordered):
                consumed = [t.text.upper() for t in self._tokens[start:self._index]]
                node.meta["explicit_nulls"] = "NULLS" in consumed
                node.meta["explicit_desc"] = "DESC" in consumed or "ASC" in consumed
            return node


def parse(sql: str) -> list[exp.Expression]:
    """Parse ``sql`` into statements; SqlSyntaxError carries line, column and a caret."""
    if not sql or not sql.strip():
        raise SqlSyntaxError("empty query: nothing to run", sql)
    try:
        statements = [s for s in sqlglot.parse(sql, dialect=_Dialect) if s is not None]
    except ParseError as e:
        info = e.errors[0] if e.errors else {}
        message = info.get("description") or str(e).split("\n")[0]
        token = info.get("highlight")
        if token:
            message = f"{message} (near {token!r})"
        raise SqlSyntaxError(f"syntax error: {message}", sql, info.get("line"),
                             info.get("col")) from None
    except TokenError as e:
        raise SqlSyntaxError(f"syntax error: {e}", sql) from None
    if not statements:
        raise SqlSyntaxError("empty query: nothing to run", sql)
    return statements
