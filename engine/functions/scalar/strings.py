"""String functions: concatenation, case, trimming, padding, slicing, searching, splitting,
replacing and regular expressions, on Arrow's UTF-8 kernels.

Positions and lengths count characters (code points), 1-based, like DuckDB.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import ExecutionError, PlanError
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.cast import cast_expr
from plansight.engine.functions.scalar.registry import binder, call, coerce, kernel, operator
from plansight.engine.functions.scalar.utf8 import (
    byte_to_char_index,
    first_codepoint,
    from_codepoints,
    slice_chars,
)
from plansight.engine.functions.scalar.vector import (
    Value,
    broadcast,
    finish,
    from_numpy,
    is_scalar,
    length_of,
    scalar_value,
    to_array,
    to_numpy,
)
from plansight.engine.logical.expr import Call, Expr, Literal


def _as_text(expr: Expr) -> Expr:
    if T.is_string(expr.type):
        return expr
    if T.is_null_type(expr.type):
        return Literal(None, pa.string())
    return cast_expr(expr, pa.string())


@operator("concat_operator")
def bind_concat_operator(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    """``a || b``: any types, printed as text; NULL if either side is NULL."""
    return call("concat_strict", [_as_text(a) for a in args], pa.string())


@binder("concat")
def bind_concat(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    """``concat(a, b, ...)``: like ``||`` but NULL arguments count as empty strings."""
    if not args:
        return Literal("", pa.string())
    return call("concat", [_as_text(a) for a in args], pa.string())


@kernel("concat_strict", "concat")
def concat_kernel(args: list[Value], call_: Call) -> Value:
    handling = "emit_null" if call_.func == "concat_strict" else "replace"
    if len(args) == 1:
        return pc.fill_null(args[0], "") if handling == "replace" else args[0]
    return pc.binary_join_element_wise(*args, "", null_handling=handling)


# ----------------------------------------------------------------------------- helpers

def _text_args(name: str, args: list[Expr], params: str) -> list[Expr]:
    """Coerce ``args`` per ``params`` ('s' string, 'i' BIGINT), checking the arity."""
    optional = params.count("?")
    required = params.replace("?", "")
    if not len(required) - optional <= len(args) <= len(required):
        raise PlanError(f"function '{name}' takes {len(required) - optional}"
                        + (f" to {len(required)}" if optional else "")
                        + f" arguments, got {len(args)}")
    out = []
    for arg, kind in zip(args, required):
        target = pa.string() if kind == "s" else pa.int64()
        if kind == "s" and T.is_string(arg.type):
            out.append(arg)
        else:
            out.append(coerce(arg, target, name, args,
                              "VARCHAR" if kind == "s" else "an integer"))
    return out


def _register(name: str, params: str, result: pa.DataType, *aliases: str, func: str = "") -> None:
    func = func or name

    def bind(args: list[Expr], options: Mapping[str, Any]) -> Expr:
        return call(func, _text_args(name, args, params), result)
    binder(name, *aliases)(bind)


def _ints(value: Value, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values with nulls as 0, validity) of a numeric argument broadcast to ``length``."""
    array = to_array(value, length)
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return to_numpy(array.cast(pa.int64())).astype(np.int64), valid


def _with_nulls(result: pa.Array, valid: np.ndarray) -> pa.Array:
    if valid.all():
        return result
    return pc.if_else(pa.array(valid), result, pa.scalar(None, result.type))


def by_distinct(strings: Value, keys: list[Value], fn, result_type: pa.DataType) -> Value:
    """Apply ``fn(strings_subset, *key_values)`` once per distinct combination of ``keys``
    (pattern arguments that vary per row); rows with a NULL key give NULL."""
    if all(is_scalar(k) for k in keys):
        if any(not k.is_valid for k in keys):
            return pa.scalar(None, result_type) if is_scalar(strings) else pa.nulls(
                len(strings), result_type)
        return fn(strings, *[k.as_py() for k in keys])
    arrays, all_scalar = broadcast([strings, *keys])
    strings, keys = arrays[0], arrays[1:]
    n = len(strings)
    valid = np.ones(n, dtype=bool)
    for k in keys:
        valid &= np.asarray(k.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    combined = keys[0].cast(pa.string()) if len(keys) == 1 else pc.binary_join_element_wise(
        *[k.cast(pa.string()) for k in keys], "\x00")
    encoded = pc.dictionary_encode(combined)
    codes = to_numpy(encoded.indices, -1)
    pieces, order = [], []
    for code in range(len(encoded.dictionary)):
        rows = np.flatnonzero((codes == code) & valid)
        if not len(rows):
            continue
        first = int(rows[0])
        values = [k[first].as_py() for k in keys]
        pieces.append(to_array(fn(strings.take(pa.array(rows)), *values), len(rows))
                      .cast(result_type))
        order.append(rows)
    missing = np.flatnonzero(~valid)
    pieces.append(pa.nulls(len(missing), result_type))
    order.append(missing)
    positions = np.concatenate(order) if order else np.zeros(0, dtype=np.int64)
    merged = pa.concat_arrays(pieces)
    inverse = np.empty(n, dtype=np.int64)
    inverse[positions] = np.arange(n)
    return finish(merged.take(pa.array(inverse)), all_scalar)


# ----------------------------------------------------------------------------- catalogue

_register("length", "s", pa.int64(), "char_length", "character_length", "len")
_register("strlen", "s", pa.int64(), "octet_length")
_register("lower", "s", pa.string(), "lcase")
_register("upper", "s", pa.string(), "ucase")
_register("reverse", "s", pa.string())
_register("trim", "ss?", pa.string())
_register("ltrim", "ss?", pa.string())
_register("rtrim", "ss?", pa.string())
_register("substring", "sii?", pa.string(), "substr")
_register("left", "si", pa.string())
_register("right", "si", pa.string())
_register("lpad", "sis", pa.string())
_register("rpad", "sis", pa.string())
_register("repeat", "si", pa.string())
_register("replace", "sss", pa.string())
_register("starts_with", "ss", pa.bool_(), "prefix")
_register("ends_with", "ss", pa.bool_(), "suffix")
_register("contains", "ss", pa.bool_())
_register("strpos", "ss", pa.int64(), "instr", "position")
_register("split_part", "ssi", pa.string())
_register("regexp_replace", "ssss?", pa.string())
_register("regexp_extract", "ssi?", pa.string())
_register("ascii", "s", pa.int32())
_register("chr", "i", pa.string())
_register("translate", "sss", pa.string())


@binder("concat_ws")
def bind_concat_ws(args: list[Expr], options: Mapping[str, Any]) -> Expr:
    if len(args) < 2:
        raise PlanError("function 'concat_ws' takes at least 2 arguments")
    separator = coerce(args[0], pa.string(), "concat_ws", args, "VARCHAR")
    return call("concat_ws", [separator] + [_as_text(a) for a in args[1:]], pa.string())


@kernel("concat_ws")
def concat_ws_kernel(args: list[Value], call_: Call) -> Value:
    """NULL values are skipped, the row is kept: a row whose values are all NULL is ''.

    Arrow's ``binary_join_element_wise(null_handling="skip")`` drops such rows from its output
    (the result comes back shorter than the input), so those rows get '' as their first value
    before the join; a lone '' joins to ''.
    """
    separator, values = args[0], args[1:]
    if is_scalar(separator) and not separator.is_valid:
        return _null_like(args, pa.string())
    (separator, *arrays), all_scalar = broadcast([separator, *values])
    all_null = pc.is_null(arrays[0])
    for a in arrays[1:]:
        all_null = pc.and_(all_null, pc.is_null(a))
    arrays[0] = pc.if_else(all_null, pa.scalar("", pa.string()), arrays[0])
    return finish(pc.binary_join_element_wise(*arrays, separator, null_handling="skip"),
                  all_scalar)


def _null_like(args: list[Value], t: pa.DataType) -> Value:
    n = length_of(args)
    return pa.scalar(None, t) if n is None else pa.nulls(n, t)


@kernel("length")
def length_kernel(args: list[Value], call_: Call) -> Value:
    return pc.utf8_length(args[0])


@kernel("strlen")
def strlen_kernel(args: list[Value], call_: Call) -> Value:
    return pc.binary_length(args[0])


@kernel("lower")
def lower_kernel(args: list[Value], call_: Call) -> Value:
    return pc.utf8_lower(args[0])


@kernel("upper")
def upper_kernel(args: list[Value], call_: Call) -> Value:
    return pc.utf8_upper(args[0])


@kernel("reverse")
def reverse_kernel(args: list[Value], call_: Call) -> Value:
    return pc.utf8_reverse(args[0])


@kernel("trim", "ltrim", "rtrim")
def trim_kernel(args: list[Value], call_: Call) -> Value:
    func = call_.func
    if len(args) == 1:
        fn = {"trim": pc.utf8_trim, "ltrim": pc.utf8_ltrim, "rtrim": pc.utf8_rtrim}[func]
        return fn(args[0], " ")
    fn = {"trim": pc.utf8_trim, "ltrim": pc.utf8_ltrim, "rtrim": pc.utf8_rtrim}[func]
    return by_distinct(args[0], [args[1]], lambda s, chars: fn(s, chars), pa.string())


def _slice_rows(strings: Value, start: np.ndarray, stop: np.ndarray, valid: np.ndarray,
                all_scalar: bool) -> Value:
    array = to_array(strings, len(start))
    return finish(_with_nulls(slice_chars(array, start, stop), valid), all_scalar)


@kernel("substring")
def substring_kernel(args: list[Value], call_: Call) -> Value:
    """DuckDB: a negative start counts from the end; a negative length takes the characters
    before ``start``; the result is the 1-based range intersected with the string."""
    strings = args[0]
    if all(is_scalar(a) for a in args[1:]):
        if not all(a.is_valid for a in args[1:]):
            return _null_like(args, pa.string())
        bounds = _constant_slice(args[1].as_py(), args[2].as_py() if len(args) == 3 else None)
        return pc.utf8_slice_codeunits(strings, *bounds)
    (array, *_), all_scalar = broadcast(args)
    n = len(array)
    lengths = to_numpy(pc.utf8_length(array)).astype(np.int64)
    start, valid_start = _ints(args[1], n)
    if len(args) == 3:
        count, valid_count = _ints(args[2], n)
    else:
        count, valid_count = np.full(n, 1 << 40, dtype=np.int64), np.ones(n, dtype=bool)
    first = np.where(start < 0, lengths + start + 1, start)
    low = np.where(count >= 0, first, first + count)
    high = np.where(count >= 0, first + count, first)
    low = np.maximum(low, 1)
    return _slice_rows(array, low - 1, np.maximum(high - 1, low - 1), valid_start & valid_count,
                       all_scalar)


def _constant_slice(start: int, count: int | None) -> tuple[int, int | None]:
    """DuckDB's substring(s, start, count) with constant start/count as Python-style slice
    bounds for Arrow's utf8_slice_codeunits (negative bounds count from the end, clamped)."""
    if count is None:
        return (start - 1 if start > 0 else min(0, start)), None
    first = start - 1 if start > 0 else start if start < 0 else -1  # 0-based, maybe negative
    low, high = (first, first + count) if count >= 0 else (first + count, first)
    if start > 0 or start == 0:
        return max(low, 0), max(high, 0)
    return low, (high if high < 0 else None)  # negative window: None runs to the end


@kernel("left", "right")
def left_right_kernel(args: list[Value], call_: Call) -> Value:
    if is_scalar(args[1]):
        if not args[1].is_valid:
            return _null_like(args, pa.string())
        n = args[1].as_py()  # negative n: all but the last (left) / first (right) |n|
        if call_.func == "left":
            return pc.utf8_slice_codeunits(args[0], 0, n)
        return pc.utf8_slice_codeunits(args[0], -n, None) if n else \
            pc.utf8_slice_codeunits(args[0], 0, 0)
    (array, _), all_scalar = broadcast(args)
    n = len(array)
    lengths = to_numpy(pc.utf8_length(array)).astype(np.int64)
    count, valid = _ints(args[1], n)
    take = np.where(count >= 0, count, np.maximum(lengths + count, 0))
    if call_.func == "left":
        return _slice_rows(array, np.zeros(n, dtype=np.int64), take, valid, all_scalar)
    return _slice_rows(array, lengths - np.minimum(take, lengths), lengths, valid, all_scalar)


@kernel("lpad", "rpad")
def pad_kernel(args: list[Value], call_: Call) -> Value:
    """Pad to ``width`` characters with ``fill`` repeated, or truncate to ``width``."""
    if (is_scalar(args[1]) and is_scalar(args[2]) and args[1].is_valid and args[2].is_valid
            and len(args[2].as_py()) == 1):
        width = max(args[1].as_py(), 0)
        pad = pc.utf8_lpad if call_.func == "lpad" else pc.utf8_rpad
        return pad(pc.utf8_slice_codeunits(args[0], 0, width), width, args[2].as_py())
    (array, _, fill), all_scalar = broadcast(args)
    n = len(array)
    lengths = to_numpy(pc.utf8_length(array)).astype(np.int64)
    width, valid = _ints(args[1], n)
    width = np.maximum(width, 0)
    fill_length = to_numpy(pc.utf8_length(fill)).astype(np.int64)
    valid &= np.asarray(fill.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    needed = np.maximum(width - lengths, 0)
    if np.any((needed > 0) & (fill_length == 0) & valid):
        raise ExecutionError(f"{call_.func}: the fill string must not be empty")
    copies = np.where(fill_length > 0, -(-needed // np.maximum(fill_length, 1)), 0)
    repeated = pc.binary_repeat(fill, pa.array(copies))
    padding = slice_chars(repeated, np.zeros(n, dtype=np.int64), needed)
    body = slice_chars(array, np.zeros(n, dtype=np.int64), np.minimum(lengths, width))
    parts = (padding, body) if call_.func == "lpad" else (body, padding)
    result = pc.binary_join_element_wise(*parts, "")
    return finish(_with_nulls(result, valid & np.asarray(
        array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)), all_scalar)


@kernel("repeat")
def repeat_kernel(args: list[Value], call_: Call) -> Value:
    strings, count = args
    count = pc.if_else(pc.less(count, pa.scalar(0, count.type)), pa.scalar(0, count.type),
                       count)
    return pc.binary_repeat(strings, count)


@kernel("replace")
def replace_kernel(args: list[Value], call_: Call) -> Value:
    def apply(strings: Value, old: str, new: str) -> Value:
        if old == "":
            return strings
        return pc.replace_substring(strings, old, new)
    return by_distinct(args[0], [args[1], args[2]], apply, pa.string())


@kernel("starts_with", "ends_with", "contains")
def affix_kernel(args: list[Value], call_: Call) -> Value:
    fn = {"starts_with": pc.starts_with, "ends_with": pc.ends_with,
          "contains": pc.match_substring}[call_.func]
    return by_distinct(args[0], [args[1]], lambda s, pattern: fn(s, pattern), pa.bool_())


@kernel("strpos")
def strpos_kernel(args: list[Value], call_: Call) -> Value:
    def find(strings: Value, needle: str) -> Value:
        (array,), all_scalar = broadcast([strings])
        found = to_numpy(pc.find_substring(array, needle), -1).astype(np.int64)
        chars = byte_to_char_index(array, np.maximum(found, 0))
        position = np.where(found >= 0, chars + 1, 0)
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        return finish(from_numpy(position, valid, pa.int64()), all_scalar)
    return by_distinct(args[0], [args[1]], find, pa.int64())


@kernel("split_part")
def split_part_kernel(args: list[Value], call_: Call) -> Value:
    """``split_part(s, sep, i)``: 1-based, negative from the end, '' when out of range."""
    def split(strings: Value, separator: str) -> Value:
        return pc.split_pattern(strings, separator)
    (strings, _, index), all_scalar = broadcast(args)
    n = len(strings)
    index_values, index_valid = _ints(index, n)
    separators = args[1]
    if is_scalar(separators) and separators.is_valid and separators.as_py() == "":
        # DuckDB splits into characters when the separator is empty
        start = np.where(index_values < 0, to_numpy(pc.utf8_length(strings)) + index_values,
                         index_values - 1)
        ok = (index_values != 0) & (start >= 0)
        start = np.where(ok, start, 0)
        return _slice_rows(strings, start, np.where(ok, start + 1, 0), index_valid, all_scalar)
    lists = by_distinct(strings, [separators], split, pa.list_(pa.string()))
    lists = to_array(lists, n)
    counts = to_numpy(pc.list_value_length(lists)).astype(np.int64)
    offsets = np.asarray(lists.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)[:n]
    position = np.where(index_values < 0, counts + index_values, index_values - 1)
    ok = (index_values != 0) & (position >= 0) & (position < counts)
    values = lists.flatten() if lists.offset == 0 else pc.list_flatten(lists)
    base = offsets - offsets[0] if len(offsets) else offsets
    picked = values.take(pa.array(np.where(ok, base + position, 0))) if len(values) else \
        pa.array([""] * n)
    result = pc.if_else(pa.array(ok), picked, "")
    valid = index_valid & np.asarray(lists.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return finish(_with_nulls(result, valid), all_scalar)


@kernel("regexp_replace")
def regexp_replace_kernel(args: list[Value], call_: Call) -> Value:
    options = scalar_value(args[3]) if len(args) > 3 else ""
    options = options or ""
    unknown = set(options) - set("gicmsn")
    if unknown:
        raise ExecutionError(f"regexp_replace: unknown option(s) {''.join(sorted(unknown))!r}")

    def apply(strings: Value, pattern: str, replacement: str) -> Value:
        flags = "".join(f for f in options if f in "ims")
        full = (f"(?{flags})" if flags else "") + pattern
        limit = None if "g" in options else 1
        return pc.replace_substring_regex(strings, full, replacement, max_replacements=limit)
    return by_distinct(args[0], [args[1], args[2]], apply, pa.string())


@kernel("regexp_extract")
def regexp_extract_kernel(args: list[Value], call_: Call) -> Value:
    group = scalar_value(args[2]) if len(args) > 2 else 0
    if group is None or not 0 <= group <= 9:
        raise ExecutionError("regexp_extract: the group must be a constant between 0 and 9")

    def apply(strings: Value, pattern: str) -> Value:
        found = pc.match_substring_regex(strings, pattern)
        # the whole match is group 1 of the wrapper; the pattern's own groups shift by one
        extracted = pc.replace_substring_regex(
            strings, f"(?s)^.*?({pattern}).*$", "\\" + str(group + 1), max_replacements=1)
        return pc.if_else(found, extracted, "")
    return by_distinct(args[0], [args[1]], apply, pa.string())


@kernel("ascii")
def ascii_kernel(args: list[Value], call_: Call) -> Value:
    (array,), all_scalar = broadcast(args)
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return finish(from_numpy(first_codepoint(array).astype(np.int32), valid, pa.int32()),
                  all_scalar)


@kernel("chr")
def chr_kernel(args: list[Value], call_: Call) -> Value:
    (array,), all_scalar = broadcast(args)
    codes, valid = _ints(array, len(array))
    if np.any(valid & ((codes < 0) | (codes > 0x10FFFF))):
        raise ExecutionError("chr: code point out of range")
    return finish(from_codepoints(codes, valid), all_scalar)


@kernel("translate")
def translate_kernel(args: list[Value], call_: Call) -> Value:
    def apply(strings: Value, source: str, target: str) -> Value:
        for i, ch in enumerate(source):
            strings = pc.replace_substring(strings, ch, target[i] if i < len(target) else "")
        return strings
    return by_distinct(args[0], [args[1], args[2]], apply, pa.string())
