"""Parsing SQL text with sqlglot (DuckDB dialect), turning its errors into SqlSyntaxError.

Four additions to the dialect: a literal written ``.5`` remembers that it had no whole
digits (sqlglot spells it ``0.5``; DuckDB types it DECIMAL(1, 1)); ORDER BY items remember
whether NULLS FIRST/LAST was written, so that the session's ``default_null_order`` applies only
where it was not; a ``:name``
parameter right after a keyword (``SELECT :x``) stays a parameter instead of being read as
DuckDB's prefix alias ``name: expr`` with the keyword taken for the name; and ``EXPLAIN
[ANALYZE] query`` parses into a Describe node marked ``explain`` (sqlglot's DuckDB dialect
keeps EXPLAIN as an opaque Command string).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
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

        def _parse_primary(self):
            # sqlglot reads ``.5`` as the literal ``0.5``; DuckDB types it by the digits written
            # (DECIMAL(1, 1), not DECIMAL(2, 1)), so the literal remembers it had no whole part
            bare = (self._curr is not None and self._curr.token_type == TokenType.DOT
                    and self._next is not None and self._next.token_type == TokenType.NUMBER)
            node = super()._parse_primary()
            if bare and isinstance(node, exp.Literal):
                node.meta["bare_fraction"] = True
            return node

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
    """Parse ``sql`` into statements; SqlSyntaxError carries line, column and a caret.

    Every function call remembers the name as written (``meta["written"]``): sqlglot turns
    ``unnest`` into Explode and ``string_split`` into Split, and an error must name what the
    user wrote.

    The same text is parsed once: a query run again (a notebook cell, the differential
    fuzzer's settings and reference plan) gets a copy of the remembered trees, a third of a
    parse's time (sqlglot parsing was the fuzzer's largest single cost after running).
    """
    return [statement.copy() for statement in _parse_once(sql)]


@functools.lru_cache(maxsize=64)
def _parse_once(sql: str) -> tuple[exp.Expression, ...]:
    """The statements of ``sql``, never handed out (callers get copies to change)."""
    return tuple(_parse(sql))


def _parse(sql: str) -> list[exp.Expression]:
    if not sql or not sql.strip():
        raise SqlSyntaxError("empty query: nothing to run", sql)
    try:
        with _quiet_fallback():
            statements = [s for s in sqlglot.parse(sql, dialect=_Dialect) if s is not None]
    except ParseError as e:
        info = e.errors[0] if e.errors else {}
        message = user_words(info.get("description") or str(e).split("\n")[0],
                             info.get("highlight"))
        raise SqlSyntaxError(f"syntax error: {message}", sql, info.get("line"),
                             info.get("col")) from None
    except TokenError as e:
        raise SqlSyntaxError(f"syntax error: {user_words(str(e), None)}", sql) from None
    if not statements:
        raise SqlSyntaxError("empty query: nothing to run", sql)
    for statement in statements:
        for node in statement.find_all(exp.Func):
            start, end = node.meta.get("start"), node.meta.get("end")
            if start is not None and end is not None:
                node.meta["written"] = sql[start:end + 1]
    return statements


class _FallbackFilter(logging.Filter):
    """Drops sqlglot's 'Falling back to parsing as a Command' warning: the binder reports
    such statements (or runs them: CALL dbgen) in its own words."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


_FALLBACK_FILTER = _FallbackFilter()


@contextlib.contextmanager
def _quiet_fallback():
    logger = logging.getLogger("sqlglot")
    logger.addFilter(_FALLBACK_FILTER)
    try:
        yield
    finally:
        logger.removeFilter(_FALLBACK_FILTER)


_MISSING = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]+'>")
_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: .*?>")


def user_words(message: str, near: str | None) -> str:
    """sqlglot's parse error in the words of the SQL: no class or token reprs.

    Example:
        >>> user_words("Required keyword: 'this' missing for "
        ...            "<class 'sqlglot.expressions.query.Where'>", "WHERE")
        "something is missing after 'WHERE'"
        >>> user_words("Expected table name but got <Token token_type: TokenType.SENTINEL, "
        ...            "text: SENTINEL, line: 1, col: 1, start: 0, end: 0, comments: []>", "JOIN")
        "expected a table name after 'JOIN' but the query ended"
        >>> user_words("Invalid expression / Unexpected token", "FROM")
        "unexpected 'FROM'"
    """
    if _MISSING.search(message):
        return f"something is missing after {near!r}" if near else "the query is incomplete"
    match = _TOKEN.search(message)
    if match:
        ended = match.group(1) == "SENTINEL"
        head = message[:match.start()].replace("Expected table name but got", "").strip()
        what = "a table name" if "table name" in message else (head or "more")
        after = f" after {near!r}" if near else ""
        return f"expected {what}{after} but " + \
            ("the query ended" if ended else f"found {match.group(2)!r}")
    if message.startswith("Expecting "):
        expected = message[len("Expecting "):].strip()
        return f"expected {expected!r}" + (f" before {near!r}" if near else "")
    if message.startswith("Invalid expression / Unexpected token"):
        return f"unexpected {near!r}" if near else "unexpected token"
    return f"{message} (near {near!r})" if near else message
