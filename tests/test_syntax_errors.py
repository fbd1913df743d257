"""Errors in the user's words: no sqlglot class or token reprs, and functions named as the
user wrote them (sqlglot reads ``unnest`` as Explode, ``string_split`` as Split)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import plansight as ps

BROKEN = [
    # (SQL, words the message must hold)
    ("SELECT * FROM t WHERE", "missing after 'WHERE'"),
    ("SELECT a FROM t WINDOW", "missing after 'WINDOW'"),
    ("SELECT a FROM t JOIN", "table name after 'JOIN' but the query ended"),
    ("SELEC a FROM t", "unexpected 'FROM'"),
    ("SELECT (a FROM t", "expected ')'"),
    ("res << SELECT 1", "missing after 'SELECT'"),
    ("SELECT a << 64 FROM t", "Left-shift value 64"),
    ("SELECT a & s FROM t", "'&' to BIGINT and VARCHAR"),
    ("SELECT unnest(l) FROM t", "'unnest'"),
    ("SELECT string_split(s, ',') FROM t", "'string_split'"),
    ("SELECT array_length(l) FROM t", "'array_length'"),
]


@pytest.mark.parametrize("sql,words", BROKEN)
def test_errors_use_the_users_words(sql, words):
    session = ps.Session(target_partitions=1)
    session.register("t", pa.table({"a": [1], "s": ["x"], "l": [[1, 2]]}))
    with pytest.raises(ps.PlansightError) as info:
        session.sql(sql).to_arrow()
    message = str(info.value)
    assert words in message, message
    for internal in ("<class", "sqlglot", "Token", "TokenType", "Explode", "explode",
                     "BitwiseLeftShift", "'split'", "array_size"):
        assert internal not in message, message


def test_syntax_error_keeps_its_caret():
    with pytest.raises(ps.SqlSyntaxError) as info:
        ps.Session().sql("SELECT *\nFROM t\nWHERE")
    lines = str(info.value).splitlines()
    assert lines[-2].strip() == "WHERE" and lines[-1].strip() == "^"
