"""Differential tests: each scalar expression is bound with bind_scalar_node, evaluated over the
test table with evaluate_call / evaluate_cast, and compared with DuckDB running the same SQL.

Types are compared by family (integer widths, decimal precision and DuckDB's HUGEINT may
differ); decimal scales must match.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from plansight.errors import PlansightError
from tests.functions.scalar.scalar_table import bind_sql, evaluate_column, family, same_value

BASICS = [
    # literals
    "1", "3000000000", "2.5", "0.5", "1e3", "'str'", "TRUE", "NULL", "DATE '1995-01-31'",
    "TIMESTAMP '1995-01-31 10:11:12'", "-5", "-2.5",
    # arithmetic
    "i + 1", "i + j", "i - j", "i * j", "k + 1", "k * k", "i + 2.5", "d + 1", "d + e", "d - e",
    "d * e", "d * 2", "f + i", "f * d", "d + f", "i / j", "i / 0", "-i / 0", "f / 0", "d / e",
    "d / 3", "i // j", "-7 // 2", "i % j", "-7 % 2", "d % 3", "f % 2", "-i", "-d", "-f",
    "i // 2.5", "2 * 3 + 4", "i * 1e0", "k + 1000", "k * 2.5", "j + 1.5e0", "k = 300",
    "(i + 1) * 2", "i + NULL", "NULL - f",
    # comparisons and logic
    "i = j", "i <> j", "i < j", "i <= 2", "i > -1", "i >= 0", "d > 1", "d = 2.5", "d < i",
    "f > d", "s = 'hello'", "s < 'b'", "s > t", "dt < '1995-03-15'", "dt = DATE '2000-02-29'",
    "dt < ts", "ts >= '1999-12-31 00:00:01'", "b = TRUE", "b AND i > 0", "b OR i > 0",
    "NOT b", "b AND NULL", "b OR NULL", "NOT (i > 0)", "i > 0 AND j > 0 AND f > 0",
    "g = g", "g <> g", "g > 0", "g < 0", "g >= f", "g <= f", "g = 'NaN'::DOUBLE",
    "g IS DISTINCT FROM f", "g IS NOT DISTINCT FROM g", "g + 1", "g BETWEEN 0 AND 3",
    "greatest(g, f)", "least(g, f)", "g IN (1.0, 'NaN'::DOUBLE)", "g IN (f, 2.5)",
    "NULLIF(g, g)", "CAST(g AS VARCHAR)", "TRY_CAST(g AS INTEGER)", "sign(g)", "abs(g)",
    "i IS NULL", "s IS NOT NULL", "b IS TRUE", "b IS NOT FALSE", "i IS DISTINCT FROM j",
    "i IS NOT DISTINCT FROM NULL", "d IS DISTINCT FROM 2.5",
    # IN, BETWEEN
    "i IN (1, 0, 42)", "i IN (1, NULL)", "i NOT IN (1, 2)", "i NOT IN (1, NULL)",
    "s IN ('hello', '', 'x')", "dt IN ('1995-01-31', '1970-01-01')", "i IN (j, 0)",
    "d IN (2.5, 100)", "i BETWEEN 0 AND 10", "i NOT BETWEEN -3 AND 1",
    "dt BETWEEN '1995-01-01' AND '1999-12-31'", "s BETWEEN 'a' AND 'i'",
    # LIKE
    "s LIKE 'h%'", "s LIKE '%o'", "s LIKE '%ll%'", "s LIKE 'h_llo'", "s LIKE ''", "s LIKE '%'",
    "s NOT LIKE '%e%'", "s ILIKE 'HEL%'", "s NOT ILIKE '%WORLD'", "s LIKE 'a!_b%' ESCAPE '!'",
    "s LIKE 'a\\_b%'", "s LIKE p", "s ILIKE p", "s LIKE '%straße'", "s SIMILAR TO 'h.*o'",
    "s GLOB 'h*'", "s ~ 'l+'",
    # CASE
    "CASE WHEN i > 0 THEN 'pos' WHEN i < 0 THEN 'neg' ELSE 'zero' END",
    "CASE WHEN i > 0 THEN i END", "CASE i WHEN 1 THEN 'one' WHEN 42 THEN 'answer' END",
    "CASE WHEN b THEN d ELSE i END", "CASE WHEN b THEN f ELSE 1 END",
    "CASE WHEN i > 0 THEN dt ELSE '2000-01-01' END", "CASE WHEN NULL THEN 1 ELSE 2 END",
    "IF(i > 0, 'a', 'b')",
    # CAST
    "CAST(i AS VARCHAR)", "CAST(i AS BIGINT)", "CAST(i AS DOUBLE)", "CAST(i AS DECIMAL(12,2))",
    "CAST(f AS INTEGER)", "CAST(f AS DECIMAL(18,3))", "CAST(d AS INTEGER)", "CAST(d AS DOUBLE)",
    "CAST(d AS DECIMAL(10,1))", "CAST(d AS VARCHAR)", "CAST(f AS VARCHAR)",
    "CAST(dt AS VARCHAR)", "CAST(dt AS TIMESTAMP)", "CAST(ts AS DATE)", "CAST(ts AS VARCHAR)",
    "CAST(b AS VARCHAR)", "CAST(b AS INTEGER)", "CAST(i AS BOOLEAN)", "TRY_CAST(n AS INTEGER)",
    "TRY_CAST(n AS DOUBLE)", "TRY_CAST(n AS DECIMAL(10,2))", "TRY_CAST(s AS INTEGER)",
    "TRY_CAST(s AS DATE)", "i::VARCHAR || 'x'", "'1995-03-15'::DATE", "CAST('12' AS INT) + 1",
    "TRY_CAST(k * 100 AS TINYINT)", "CAST(i AS SMALLINT)", "TRY_CAST(i AS SMALLINT)",
    # COALESCE, NULLIF, IFNULL
    "COALESCE(i, j)", "COALESCE(i, 0)", "COALESCE(s, 'none')", "COALESCE(d, i)",
    "COALESCE(NULL, f, 1)", "IFNULL(i, -1)", "NULLIF(i, 0)", "NULLIF(s, '')", "NULLIF(d, 2.5)",
    # || and date arithmetic
    "s || t", "s || i", "'a' || NULL", "dt + 1", "dt - 1", "dt - dt2", "dt + INTERVAL 1 MONTH",
    "dt - INTERVAL 1 MONTH", "dt + INTERVAL '90' DAY", "dt + INTERVAL 3 YEAR",
    "dt + INTERVAL 1 DAY + INTERVAL 2 HOUR", "ts + INTERVAL 1 MONTH", "ts - INTERVAL '1' HOUR",
    "ts - ts", "ts - dt", "dt + INTERVAL '1 year 2 months'", "INTERVAL 1 DAY + INTERVAL 1 MONTH",
]

STRINGS = [
    "length(s)", "char_length(s)", "strlen(s)", "lower(s)", "upper(s)", "reverse(s)",
    "trim(s)", "ltrim(s)", "rtrim(s)", "trim(s, 'xz,')", "ltrim(s, t)", "substring(s, 2, 3)",
    "substring(s, 0, 2)", "substring(s, -3, 2)", "substring(s, -3)", "substring(s, 2)",
    "substring(s, 3, -1)", "substring(s, i, 2)", "substr(s, k)", "substring(s, -20, 3)",
    "substring(s, -3, 5)", "substring(s, -10, 7)", "substring(s, 0, -1)", "substring(s, -2, -1)",
    "substring(s, 4, -2)", "substring(s, 0)", "substring(s, 1, 0)", "substring(s, NULL, 1)",
    "left(s, 0)", "right(s, 0)", "left(s, -20)", "right(s, -20)", "lpad(s, 0, 'x')",
    "left(s, 2)", "left(s, -2)", "right(s, 3)", "right(s, -2)", "left(s, k)",
    "lpad(s, 8, '*')", "lpad(s, 3, 'xy')", "rpad(s, 12, 'ab')", "rpad(t, k, '.')",
    "repeat(t, 3)", "repeat(s, k)", "replace(s, 'l', 'L')", "replace(s, t, '#')",
    "starts_with(s, 'he')", "prefix(s, t)", "ends_with(s, 'ld')", "suffix(s, t)",
    "contains(s, 'll')", "contains(s, t)", "strpos(s, 'l')", "instr(s, 'ß')", "strpos(s, t)",
    "position('o' IN s)", "split_part(s, ',', 2)", "split_part(s, ',', -1)",
    "split_part(s, ' ', 1)", "split_part(s, ',', 0)", "split_part(s, t, 1)",
    "split_part(s, '', 2)", "regexp_matches(s, 'l+')", "regexp_matches(s, '^h')",
    "regexp_matches(s, 'WORLD', 'i')", "regexp_replace(s, 'l', 'L')",
    "regexp_replace(s, 'l', 'L', 'g')", "regexp_replace(s, '(l+)', '<\\1>')",
    "regexp_extract(s, '[a-z]+')", "regexp_extract(s, '([a-z])([a-z]+)', 2)",
    "concat(s, '-', t)", "concat(s, i, NULL)", "concat_ws(',', s, t)",
    "concat_ws(',', s, NULL, i)", "concat_ws(t, 'a', 'b')", "ascii(s)", "chr(k + 64)",
    "translate(s, 'lo', 'LO')", "upper(s) || lower(t)", "length(s || t)",
    "ucase(t)", "lcase(s)",
]
MATH = [
    "abs(i)", "abs(d)", "abs(f)", "abs(k)", "round(d)", "round(d, 1)", "round(d, -1)",
    "round(d, 5)", "round(f)", "round(f, 1)", "round(f, -1)", "round(i, -1)", "round(2.567, 2)",
    "round(f, k)", "floor(d)", "floor(f)", "floor(i)", "ceil(d)", "ceiling(f)", "trunc(d)",
    "trunc(f)", "sqrt(f)", "sqrt(i)", "sqrt(d)", "cbrt(f)", "power(i, 2)", "pow(f, 0.5)",
    "f ** 2", "exp(k)", "ln(f)", "ln(i)", "log10(i)", "log2(j)", "log(f)", "log(2, j)",
    "sign(i)", "sign(f)", "sign(d)", "mod(i, 3)", "mod(d, 2)", "pi() * 2", "degrees(f)",
    "radians(i)", "sin(f)", "cos(i)", "tan(d)", "atan2(f, i)", "isnan(f)", "isinf(f / 0)",
    "isfinite(f)", "gcd(i, j)", "lcm(k, j)", "greatest(i, j, 0)", "least(i, j)",
    "greatest(d, 2.5)", "least(s, t)", "greatest(dt, dt2)", "random() < 1.0",
]

TEMPORAL = [
    "year(dt)", "month(dt)", "day(dt)", "quarter(dt)", "dayofweek(dt)", "isodow(dt)",
    "dayofyear(dt)", "week(dt)", "yearweek(dt)", "year(ts)", "hour(ts)", "minute(ts)",
    "second(ts)", "millisecond(ts)", "microsecond(ts)", "extract(year FROM dt)",
    "extract(dow FROM ts)", "extract(epoch FROM ts)", "extract(epoch FROM dt)",
    "extract(doy FROM dt)", "extract(decade FROM dt)", "extract(century FROM dt)",
    "extract(isoyear FROM dt)", "extract(hour FROM dt)", "date_part('month', ts)",
    "date_part('quarter', dt)", "datepart('day', dt)", "epoch(ts)", "epoch(dt)",
    "epoch_ms(ts)", "date_trunc('month', dt)", "date_trunc('year', ts)",
    "date_trunc('quarter', dt)", "date_trunc('week', dt)", "date_trunc('day', ts)",
    "date_trunc('hour', ts)", "date_trunc('minute', ts)", "date_trunc('decade', dt)",
    "date_trunc('century', dt)", "date_diff('day', dt, dt2)", "date_diff('month', dt, dt2)",
    "date_diff('year', dt, dt2)", "date_diff('quarter', dt, dt2)", "date_diff('week', dt, dt2)",
    "datediff('day', dt2, dt)", "date_diff('hour', ts, dt)", "date_diff('minute', dt, ts)",
    "date_diff('second', ts, ts + INTERVAL 90 SECOND)", "date_add(dt, INTERVAL 1 MONTH)",
    "make_date(1995, k, 1)", "make_date(2000, 2, 29)", "last_day(dt)", "last_day(ts)",
    "dayname(dt)", "monthname(ts)", "strftime(dt, '%Y/%m/%d')",
    "strftime(ts, '%Y-%m-%d %H:%M:%S')", "strftime(ts, '%d.%m.%Y %H:%M:%S.%f')",
    "strptime('1995-01-31 10:11:12', '%Y-%m-%d %H:%M:%S')", "to_timestamp(i)",
    "epoch_ms(j * 86400000)", "to_days(k)", "dt + to_days(k)", "dt - INTERVAL (k) MONTH",
    "extract(month FROM INTERVAL 14 MONTH)", "extract(epoch FROM INTERVAL '1 day 2 hours')",
    "CAST(ts - dt AS VARCHAR)", "current_date > DATE '2020-01-01'", "typeof(dt)",
    "typeof(d * e)", "typeof(ts - ts)",
]

def _check(con, sql: str, options: dict | None = None) -> None:
    try:
        theirs = con.sql(f"SELECT {sql} AS v FROM t").to_arrow_table().column("v")
    except duckdb.Error as e:  # DuckDB fails on some row: so must we, with one of our errors
        with pytest.raises(PlansightError):
            evaluate_column(bind_sql(sql, options))
        return str(e)
    expr = bind_sql(sql, options)
    mine = evaluate_column(expr)
    assert mine.type == expr.type, f"kernel returned {mine.type}, call says {expr.type}"
    if hasattr(theirs, "combine_chunks"):
        theirs = theirs.combine_chunks()
    if not (pa.types.is_null(theirs.type) or family(theirs.type) == family(expr.type)
            or (family(theirs.type), family(expr.type)) == ("integer", "decimal")):
        pytest.fail(f"type {expr.type} ({family(expr.type)}), DuckDB {theirs.type}")
    if pa.types.is_decimal(theirs.type) and pa.types.is_decimal(expr.type):
        assert theirs.type.scale == expr.type.scale, (expr.type, theirs.type)
    for row, (a, b) in enumerate(zip(mine.to_pylist(), theirs.to_pylist())):
        assert same_value(a, b), f"row {row}: plansight {a!r}, DuckDB {b!r}"


@pytest.mark.parametrize("sql", BASICS)
def test_basics(con, sql):
    _check(con, sql)


@pytest.mark.parametrize("sql", STRINGS)
def test_strings(con, sql):
    _check(con, sql)


@pytest.mark.parametrize("sql", MATH)
def test_math(con, sql):
    _check(con, sql)


@pytest.mark.parametrize("sql", TEMPORAL)
def test_temporal(con, sql):
    _check(con, sql)


@pytest.mark.parametrize("sql", ["i / j", "7 / 2", "-7 / 2", "i / 2"])
def test_integer_division_option(con, sql):
    con.execute("SET integer_division = true")
    try:
        _check(con, sql, {"integer_division": True})
    finally:
        con.execute("SET integer_division = false")
