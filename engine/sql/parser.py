"""Parsing SQL text with sqlglot (DuckDB dialect), turning its errors into SqlSyntaxError.

Three additions to the dialect: ORDER BY items remember whether NULLS FIRST/LAST was written,
so that the session's ``default_null_order`` applies only where it was not; a ``:name``
parameter right after a keyword (``SELECT :x``) stays a parameter instead of being read as
DuckDB's prefix alias ``name: expr`` with the keyword taken for the name; and ``EXPLAIN
[ANALYZE] query`` parses into a Describe node marked ``explain`` (sqlglot's DuckDB dialect
keeps EXPLAIN as an opaque Command string).
"""

from __future__ import annotations

from typing import ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from plansight.engine.errors import SqlSyntaxError


class _Dialect(DuckDB):
    class Tokenizer(DuckDB.Tokenizer):
        KEYWORDS: ClassVar = {**DuckDB.Tokenizer.KEYWORDS, "EXPLAIN": TokenType.DESCRIBE}

    class Parser(DuckDB.Parser):
        def _parse_describe(self):
            explain = self._prev.text.upper() == "EXPLAIN"
            node = super()._parse_describe()
            node.meta["explain"] = explain
            return node

        def _parse_expression(self):
            # A prefix alias needs a name before the colon; SELECT, WHERE, THEN... are not names
            if (self._next is not None and self._next.token_type == TokenType.COLON
                    and self._curr.token_type not in self.ALIAS_TOKENS):
                return super(DuckDB.Parser, self)._parse_expression()
            return super()._parse_expression()

        def _parse_placeholder(self):
            # remember where ``:name`` was written, so an unbound one gets a caret under it
            first = self._curr
            node = super()._parse_placeholder()
            if isinstance(node, exp.Placeholder) and first is not None:
                node.update_positions(line=self._prev.line, col=self._prev.col, start=first.start,
                                      end=self._prev.end)
            return node

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
