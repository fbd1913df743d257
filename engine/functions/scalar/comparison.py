"""Comparisons and predicates: = <> < <= > >=, IS [NOT] NULL, IS [NOT] DISTINCT FROM,
IN (list), BETWEEN, LIKE / ILIKE / SIMILAR TO / GLOB / regexp_matches.

Operands are brought to their common supertype first (string literals take the other side's
type: ``o_orderdate < '1995-03-15'`` compares dates). NULL semantics are SQL's: a comparison
with NULL is NULL; ``x IN (1, NULL)`` is TRUE or NULL, never FALSE.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import PlanError
from plansight.engine.functions.scalar import calendar as C
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import cast_expr
from plansight.engine.functions.scalar.registry import (
    binder,
    call,
    coerce,
    kernel,
    operator,
    operator_error,
)
from plansight.engine.functions.scalar.vector import (
    Value,
    broadcast,
    finish,
    from_numpy,
    is_scalar,
    scalar_value,
)
from plansight.engine.kernels import decimal as D
from plansight.engine.logical.expr import Call, Expr, Literal

SYMBOLS = {"eq": "=", "neq": "<>", "lt": "<", "lte": "<=", "gt": ">", "gte": ">=",
           "is_distinct_from": "IS DISTINCT FROM",
           "is_not_distinct_from": "IS NOT DISTINCT FROM"}
_ARROW = {"eq": pc.equal, "neq": pc.not_equal, "lt": pc.less, "lte": pc.less_equal,
          "gt": pc.greater, "gte": pc.greater_equal}


def unify_operands(args: list[Expr], symbol: str) -> tuple[list[Expr], pa.DataType]:
    """Operands cast to their common type; PlanError "cannot compare ..." when there is none.

    Decimals are compared exactly: where their common type would pass 38 digits, and so
    give up scale (DECIMAL(38, 0) and DECIMAL(10, 2) meet at DECIMAL(38, 0), where -2.25
    rounds to -2 and would equal it), they are compared as a wider decimal256 instead.
    """
    try:
        typed, target = T.unify(args, f"'{symbol}'", cast=cast_expr)
    except PlanError as e:
        if "common type" not in str(e):
            raise
        types = " and ".join(dict.fromkeys(T.type_name(a.type) for a in args))
        raise PlanError(f"cannot apply '{symbol}' to {types}: an explicit CAST is "
                        f"required") from e
    exact = _exact_decimal_type([a.type for a in args], target)
    if exact is not None:
        typed = [a if a.type == exact else cast_expr(a, exact) for a in args]
        target = exact
    return typed, target


def _exact_decimal_type(types: list[pa.DataType], target: pa.DataType) -> pa.DataType | None:
    """A decimal256 that holds every operand exactly, when ``target`` would round one."""
    if not T.is_decimal(target):
        return None
    operands = [T.as_decimal(t) for t in types
                if T.is_decimal(t) or T.is_integer(t) or T.is_boolean(t)]
    scale = max(t.scale for t in operands)
    digits = max(t.precision - t.scale for t in operands)
    if scale <= target.scale and digits <= target.precision - target.scale:
        return None
    return pa.decimal256(digits + scale, scale)


def _comparison_binder(op: str):
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        typed, _ = unify_operands(args, SYMBOLS[op])
        return call(op, typed, pa.bool_())
    return bind


for _op in ("eq", "neq", "lt", "lte", "gt", "gte", "is_distinct_from", "is_not_distinct_from"):
    operator(_op)(_comparison_binder(_op))


def _comparable(value: Value) -> Value:
    """Intervals compare like DuckDB: normalised with a month = 30 days."""
    if T.is_interval(value.type):
        (array,), scalar = broadcast([value])
        months, days, nanos, valid = C.interval_parts(array)
        total = (months * 30 + days) * C.NANOS_PER_DAY + nanos
        return finish(from_numpy(total, valid, pa.int64()), scalar)
    if pa.types.is_dictionary(value.type):
        return pc.cast(value, value.type.value_type)
    return value


@kernel("interval_order_key")
def interval_order_key_kernel(args: list[Value], call_: Call) -> Value:
    """An INTERVAL as the int64 that orders it as comparisons do (a month = 30 days): the
    sort and peer key of a window ``ORDER BY interval``, so 1 month and 30 days are peers."""
    return _comparable(args[0])


@kernel("eq", "neq", "lt", "lte", "gt", "gte")
def comparison_kernel(args: list[Value], call_: Call) -> Value:
    a, b = (_comparable(x) for x in args)
    if T.is_float(a.type) or T.is_float(b.type):
        return _float_comparison(call_.func, a, b)
    if D.fits_int64(a.type) and a.type == b.type:
        fast = _decimal_comparison(call_.func, a, b)
        if fast is not None:
            return fast
    return _ARROW[call_.func](a, b)


#: fewer rows than this go to Arrow: the compiled path's fixed cost (the constant's
#: conversion, the kernel call) outweighs its ~0.4 ns per row on the small batches that joins
#: emit (Q19's predicate runs on its joined rows)
COMPILED_COMPARISON_ROWS = 4096


def _decimal_comparison(func: str, a: Value, b: Value) -> pa.Array | None:
    """DECIMAL(p <= 18) operands of one type compared on their int64 values (compiled);
    None (Arrow decides) for NULLs, a NULL constant, chunked or constant-only operands, and
    short arrays."""
    if min(len(v) if not is_scalar(v) else 1 << 62 for v in (a, b)) < \
            COMPILED_COMPARISON_ROWS:
        return None
    operands = []
    length = None
    for value in (a, b):
        if is_scalar(value):
            if not value.is_valid:
                return None
            operands.append((np.array([int(value.as_py().scaleb(value.type.scale))],
                                       dtype=np.int64), 0))
        elif isinstance(value, pa.Array) and value.null_count == 0:
            operands.append((D.words(value), 1))
            length = len(value)
        else:
            return None
    if length is None:
        return None
    (x, x_step), (y, y_step) = operands
    bits = D.compare_scaled(x, x_step, y, y_step, length, D.COMPARISONS[func])
    return pa.Array.from_buffers(pa.bool_(), length, [None, pa.py_buffer(bits)], null_count=0)


def _float_comparison(func: str, a: Value, b: Value) -> Value:
    """DuckDB orders NaN above every other number and equal to itself (total order), where
    IEEE comparisons with NaN are all false."""
    nan_a, nan_b = pc.is_nan(a), pc.is_nan(b)
    if func in ("eq", "neq"):
        equal = pc.or_kleene(pc.equal(a, b), pc.and_kleene(nan_a, nan_b))
        return equal if func == "eq" else pc.invert(equal)
    if func in ("lt", "gte"):
        less = pc.or_kleene(pc.less(a, b), pc.and_kleene(pc.invert(nan_a), nan_b))
        return less if func == "lt" else pc.invert(less)
    greater = pc.or_kleene(pc.greater(a, b), pc.and_kleene(nan_a, pc.invert(nan_b)))
    return greater if func == "gt" else pc.invert(greater)


@kernel("is_distinct_from", "is_not_distinct_from")
def distinct_kernel(args: list[Value], call_: Call) -> Value:
    a, b = (_comparable(x) for x in args)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    equal = _float_comparison("eq", a, b) if T.is_float(a.type) else pc.equal(a, b)
    same = pc.or_(both_null, pc.fill_null(equal, False))
    return pc.invert(same) if call_.func == "is_distinct_from" else same


# ----------------------------------------------------------------------------- IS NULL

def _null_test_binder(func: str):
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        (a,) = args
        return call(func, [a], pa.bool_())
    return bind


operator("is_null")(_null_test_binder("is_null"))
operator("is_not_null")(_null_test_binder("is_not_null"))


@kernel("is_null")
def is_null_kernel(args: list[Value], call_: Call) -> Value:
    return pc.is_null(args[0])


@kernel("is_not_null")
def is_not_null_kernel(args: list[Value], call_: Call) -> Value:
    return pc.is_valid(args[0])


# ----------------------------------------------------------------------------- IN, BETWEEN

@operator("in_list")
def bind_in_list(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    if len(args) < 2:
        raise PlanError("IN needs at least one value")
    typed, _ = unify_operands(args, "IN")
    return call("in_list", typed, pa.bool_())


@kernel("in_list")
def in_list_kernel(args: list[Value], call_: Call) -> Value:
    needle, values = _comparable(args[0]), [_comparable(v) for v in args[1:]]
    constants = [v for v in values if is_scalar(v)]
    columns = [v for v in values if not is_scalar(v)]
    result = None
    if constants:
        present = [v for v in constants if v.is_valid]
        has_null = len(present) < len(constants)
        if present:
            value_set = pa.array([v.as_py() for v in present], needle.type)
            if T.is_float(needle.type):  # is_in hashes the bits
                needle, value_set = _canonical_float(needle), _canonical_float(value_set)
            found = pc.is_in(needle, value_set=value_set)
        else:
            found = pc.is_in(needle, value_set=pa.array([], needle.type))
        # SQL: NULL IN (...) is NULL; x IN (.., NULL) is TRUE or NULL (a column without
        # NULLs skips the pass)
        if is_scalar(needle) or needle.null_count:
            found = pc.if_else(pc.is_null(needle), pa.scalar(None, pa.bool_()), found)
        if has_null:
            found = pc.if_else(found, True, pa.scalar(None, pa.bool_()))
        result = found
    for column in columns:  # NaN = NaN and -0.0 = 0.0, like '='
        hit = _float_comparison("eq", needle, column) if T.is_float(needle.type) else \
            pc.equal(needle, column)
        result = hit if result is None else pc.or_kleene(result, hit)
    return result


def _canonical_float(values: Value) -> Value:
    """One bit pattern per value that '=' equates, for ``is_in``, which hashes the bits:
    -0.0 + 0.0 is 0.0, and every NaN (-NaN has its sign bit set) is the one NaN."""
    zeroed = pc.add(values, 0.0)
    return pc.if_else(pc.is_nan(zeroed), pa.scalar(float("nan"), zeroed.type), zeroed)


@operator("between")
def bind_between(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    """``x BETWEEN lo AND hi`` -> ``x >= lo AND x <= hi`` (conjuncts the optimizer can split
    and push into scans)."""
    typed, _ = unify_operands(args, "BETWEEN")
    x, low, high = typed
    return call("and", [call("gte", [x, low], pa.bool_()), call("lte", [x, high], pa.bool_())],
                pa.bool_())


# ----------------------------------------------------------------------------- LIKE and regexps

def _pattern_binder(func: str, max_args: int = 2):
    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        if not 2 <= len(args) <= max_args:
            raise PlanError(f"'{func}' takes 2 to {max_args} arguments, got {len(args)}")
        if T.is_null_type(args[0].type):
            args = [Literal(None, pa.string())] + args[1:]
        for a in args:
            if not (T.is_string(a.type) or T.is_null_type(a.type)):
                raise operator_error(func.upper().replace("_", " "), args)
        typed = [coerce(a, pa.string() if not T.is_string(a.type) else a.type, func, args)
                 for a in args]
        return call(func, typed, pa.bool_())
    return bind


operator("like")(_pattern_binder("like", 3))
operator("ilike")(_pattern_binder("ilike", 3))
operator("glob")(_pattern_binder("glob"))
operator("similar_to")(_pattern_binder("similar_to"))
binder("regexp_matches")(_pattern_binder("regexp_matches", 3))
binder("regexp_full_match")(_pattern_binder("regexp_full_match", 3))


def like_to_regex(pattern: str, escape: str | None) -> str:
    """Translate a SQL LIKE pattern to an anchored RE2 regex.

    Example:
        >>> like_to_regex("a%b_c", None)
        '(?s)^a.*b.c$'
    """
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return "(?s)^" + "".join(out) + "$"


def _glob_to_regex(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "[":
            end = pattern.find("]", i + 1)
            if end > 0:
                body = pattern[i + 1:end]
                body = "^" + body[1:] if body.startswith("!") else body
                out.append("[" + body + "]")
                i = end + 1
                continue
        out.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
        i += 1
    return "(?s)^" + "".join(out) + "$"


def _match_one(strings: Value, pattern: str, func: str, flags: str | None) -> Value:
    """Match ``strings`` against one constant pattern, using the cheapest Arrow kernel."""
    ignore_case = func == "ilike" or bool(flags and "i" in flags)
    if func in ("like", "ilike"):
        plain = not any(c in pattern for c in "_\\")
        body = pattern.strip("%")
        if plain and "%" not in body and not ignore_case:
            if pattern == body:
                return pc.equal(strings, pattern)
            if pattern == "%" * len(pattern):
                return pc.if_else(pc.is_null(strings), pa.scalar(None, pa.bool_()), True)
            if pattern == body + "%" and not pattern.startswith("%"):
                return pc.starts_with(strings, body)
            if pattern == "%" + body and not pattern.endswith("%" * 2):
                return pc.ends_with(strings, body)
            if pattern.startswith("%") and pattern.endswith("%"):
                return pc.match_substring(strings, body)
        return pc.match_substring_regex(strings, like_to_regex(pattern, None),
                                        ignore_case=ignore_case)
    if func == "glob":
        return pc.match_substring_regex(strings, _glob_to_regex(pattern))
    if func in ("similar_to", "regexp_full_match"):
        return pc.match_substring_regex(strings, f"^(?:{pattern})$", ignore_case=ignore_case)
    return pc.match_substring_regex(strings, pattern, ignore_case=ignore_case)


def _match_escaped(strings: Value, pattern: str, escape: str, func: str) -> Value:
    return pc.match_substring_regex(strings, like_to_regex(pattern, escape),
                                    ignore_case=func == "ilike")


@kernel("like", "ilike", "glob", "similar_to", "regexp_matches", "regexp_full_match")
def pattern_kernel(args: list[Value], call_: Call) -> Value:
    func = call_.func
    strings, patterns = args[0], args[1]
    extra = scalar_value(args[2]) if len(args) > 2 else None
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    if func in ("like", "ilike") and extra is not None and len(extra) > 1:
        raise PlanError("the ESCAPE clause takes a single character")

    def match(target: Value, pattern: str) -> Value:
        if func in ("like", "ilike") and extra:
            return _match_escaped(target, pattern, extra, func)
        return _match_one(target, pattern, func, extra)

    if is_scalar(patterns):
        if not patterns.is_valid:
            return pa.scalar(None, pa.bool_()) if is_scalar(strings) else pa.nulls(
                len(strings), pa.bool_())
        return match(strings, patterns.as_py())
    # a pattern per row: one vectorized match per distinct pattern
    (strings, patterns), all_scalar = broadcast([strings, patterns])
    result = np.zeros(len(strings), dtype=bool)
    valid = np.asarray(pc.and_(pc.is_valid(strings), pc.is_valid(patterns))
                       .to_numpy(zero_copy_only=False), dtype=bool)
    encoded = pc.dictionary_encode(patterns).combine_chunks() if isinstance(
        patterns, pa.ChunkedArray) else pc.dictionary_encode(patterns)
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    for code, pattern in enumerate(encoded.dictionary.to_pylist()):
        rows = np.flatnonzero((codes == code) & valid)
        if len(rows):
            hits = match(strings.take(pa.array(rows)), pattern)
            result[rows] = np.asarray(pc.fill_null(hits, False).to_numpy(zero_copy_only=False))
    return finish(from_numpy(result, valid, pa.bool_()), all_scalar)

