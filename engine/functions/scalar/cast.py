"""CAST / TRY_CAST: which conversions SQL allows, and how values convert (DuckDB semantics).

DuckDB differs from a plain Arrow cast in several places, all handled here:

- string -> number trims whitespace and accepts ``'1.5'`` / ``'1e3'`` for integers (rounded);
- DOUBLE -> integer rounds half to even, DECIMAL -> integer and DECIMAL -> smaller scale round
  half away from zero; out-of-range values are errors, never wrap-around;
- string -> DATE accepts ``1995-1-1`` and a trailing time part;
- numbers, timestamps and booleans print the way DuckDB prints them.

A failing CAST raises ExecutionError naming the value; TRY_CAST (``safe=True``) gives NULL for
exactly the rows that fail.
"""

from __future__ import annotations

import re
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import ExecutionError, PlanError
from plansight.engine.functions.scalar import types as T
from plansight.engine.functions.scalar.calendar import make_intervals
from plansight.engine.functions.scalar.temporal_values import (
    interval_to_string,
    make_date_values,
    parse_interval_text,
)
from plansight.engine.functions.scalar.vector import Value, is_scalar, null_where
from plansight.engine.logical.expr import Cast, Expr, Literal

_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"
_FLOAT = r"^[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)$"
_DATE = r"^(?P<y>-?\d{1,6})-(?P<m>\d{1,2})-(?P<d>\d{1,2})(?P<rest>(?:[ T].*)?)$"
_TRUE = ["true", "t", "yes", "y", "1", "on"]
_FALSE = ["false", "f", "no", "n", "0", "off"]


# ----------------------------------------------------------------------------- validity

def can_cast(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether SQL allows an explicit CAST from ``source`` to ``target``."""
    if source == target or T.is_null_type(source) or T.is_string(target):
        return True
    if pa.types.is_dictionary(source):
        return can_cast(source.value_type, target)
    if T.is_string(source):
        return not (pa.types.is_nested(target))
    numeric_like = (T.is_numeric, T.is_boolean)
    if any(f(source) for f in numeric_like) and any(f(target) for f in numeric_like):
        return True
    if (T.is_date(source) or T.is_timestamp(source)) and (
            T.is_date(target) or T.is_timestamp(target) or pa.types.is_time(target)):
        return not (T.is_date(source) and pa.types.is_time(target))
    if pa.types.is_time(source) and pa.types.is_time(target):
        return True
    if (T.is_interval(source) or T.is_duration(source)) and (
            T.is_interval(target) or T.is_duration(target)):
        return True
    if pa.types.is_binary(target) or pa.types.is_large_binary(target):
        return pa.types.is_binary(source) or pa.types.is_large_binary(source)
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        # field by field, by name in order ({'a': 0} into STRUCT(a BIGINT))
        return [f.name for f in source] == [f.name for f in target] and all(
            can_cast(a.type, b.type) for a, b in zip(source, target))
    if pa.types.is_list(source) and pa.types.is_list(target):
        return can_cast(source.value_type, target.value_type)
    return False


def cast_expr(expr: Expr, to: pa.DataType, *, safe: bool = False,
              explicit: bool = False) -> Expr:
    """A validated ``Cast`` of ``expr`` to ``to``; a literal is converted right away.

    Raises PlanError when SQL forbids the conversion, or when a literal does not convert
    (DuckDB reports ``'abc'::INT`` while binding, too).

    Example:
        >>> cast_expr(Literal("1995-03-15", pa.string()), pa.date32())
        Literal(value=datetime.date(1995, 3, 15), type=DataType(date32[day]))
    """
    if expr.type == to:
        return expr
    if not can_cast(expr.type, to):
        raise PlanError(f"cannot cast {T.type_name(expr.type)} to {T.type_name(to)}")
    if isinstance(expr, Literal):
        try:
            value = evaluate_cast(pa.scalar(expr.value, expr.type), to, safe)
        except ExecutionError as e:
            if explicit:  # a written CAST fails when a row evaluates it (CASE may skip it)
                return Cast(expr, to, safe)
            raise PlanError(str(e)) from e
        return Literal(value.as_py(), to)
    return Cast(expr, to, safe)


# ----------------------------------------------------------------------------- evaluation

def evaluate_cast(value: Value, to: pa.DataType, safe: bool) -> Value:
    """Convert ``value`` to ``to`` with DuckDB's semantics; ``safe`` is TRY_CAST.

    Example:
        >>> evaluate_cast(pa.array([" 12 ", "2.5"]), pa.int32(), False).to_pylist()
        [12, 3]
    """
    source = value.type
    if source == to:
        return value
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if pa.types.is_dictionary(source):
        return evaluate_cast(pc.cast(value, source.value_type), to, safe)
    if T.is_null_type(source):
        return pa.scalar(None, to) if is_scalar(value) else pa.nulls(len(value), to)
    try:
        return _convert(value, source, to, safe)
    except (pa.ArrowInvalid, OverflowError) as e:
        raise ExecutionError(_conversion_message(str(e), source, to)) from e
    except pa.ArrowNotImplementedError as e:
        raise ExecutionError(
            f"cannot cast {T.type_name(source)} to {T.type_name(to)}: {e}") from e


def _conversion_message(arrow_message: str, source: pa.DataType, to: pa.DataType) -> str:
    match = re.search(r"(?:string|String):? '(.*?)'", arrow_message)
    if match:
        return f"Could not convert string '{match.group(1)}' to {T.type_name(to)}"
    return (f"Conversion Error: casting {T.type_name(source)} to {T.type_name(to)} failed: "
            f"{arrow_message}")


def _convert(value: Value, source: pa.DataType, to: pa.DataType, safe: bool) -> Value:
    if (pa.types.is_list(source) or pa.types.is_large_list(source)) and (
            pa.types.is_list(to) or pa.types.is_large_list(to)):
        return _nested(value, lambda array: _cast_list(array, to, safe))
    if pa.types.is_struct(source) and pa.types.is_struct(to):
        return _nested(value, lambda array: _cast_struct(array, to, safe))
    if T.is_string(to) and (pa.types.is_list(source) or pa.types.is_struct(source)):
        return _nested(value, lambda array: pc.cast(_nested_text(array), to))
    if T.is_string(to):
        return _to_string(value, source, to)
    if T.is_string(source):
        return _from_string(value, to, safe)
    if T.is_integer(to) and (T.is_float(source) or T.is_decimal(source)):
        mode = "half_to_even" if T.is_float(source) else "half_towards_infinity"
        if T.is_float(source):
            value = null_where(value, pc.invert(pc.is_finite(value))) if safe else value
            if not safe:
                _check_finite(value, to)
        if T.is_decimal(source):  # CAST(0.5 AS INTEGER) = 1 needs an integer digit
            value = pc.cast(value, T.rounding_room(source, 0))
        rounded = pc.round(value, 0, round_mode=mode)
        return _range_checked(rounded, to, safe)
    if T.is_integer(to) and T.is_integer(source):
        return _range_checked(value, to, safe)
    if T.is_decimal(to) and (T.is_decimal(source) or T.is_float(source)):
        return _to_decimal(value, source, to, safe)
    if T.is_decimal(to) and T.is_integer(source):
        exact = T.as_decimal(source)
        return _to_decimal(pc.cast(value, exact), exact, to, safe)
    if T.is_boolean(to) and (T.is_numeric(source)):
        return pc.not_equal(value, T.zero_of(source))
    if T.is_date(to) and T.is_timestamp(source):
        return pc.cast(pc.floor_temporal(value, unit="day"), to, safe=False)
    if pa.types.is_time(to) and T.is_timestamp(source):
        midnight = pc.floor_temporal(value, unit="day")
        micros = pc.cast(pc.subtract(value, midnight), pa.int64())
        return pc.cast(pc.cast(micros, pa.time64("us")), to)
    if T.is_duration(to) and T.is_interval(source):
        return _interval_to_duration(value, to)
    if T.is_interval(to) and T.is_duration(source):
        return _duration_to_interval(value)
    if T.is_float(to) and (T.is_integer(source) or T.is_decimal(source)):
        # the nearest double, as DuckDB: Arrow's safe cast rejects BIGINT beyond 2**53
        return pc.cast(value, to, safe=False)
    return pc.cast(value, to)


def _nested(value: Value, convert) -> Value:
    """``convert`` (of an array) applied to ``value``, an array or a scalar."""
    if not is_scalar(value):
        return convert(value)
    return convert(pa.array([value.as_py()], value.type))[0]


def _cast_list(array: pa.Array, to: pa.DataType, safe: bool) -> pa.Array:
    """``CAST(l AS INTEGER[])``: each element converted as a value of its own (an element
    that does not convert fails the cast, or is NULL under TRY_CAST, as in DuckDB); NULL
    lists stay NULL, the lengths stay."""
    elements = evaluate_cast(array.flatten(), to.value_type, safe)
    lengths = pc.fill_null(pc.list_value_length(array), 0)
    offset_type = np.int64 if pa.types.is_large_list(to) else np.int32
    offsets = np.zeros(len(array) + 1, dtype=offset_type)
    np.cumsum(lengths.to_numpy(zero_copy_only=False), out=offsets[1:])
    list_type = pa.LargeListArray if pa.types.is_large_list(to) else pa.ListArray
    mask = array.is_null() if array.null_count else None
    return list_type.from_arrays(pa.array(offsets), elements, type=to, mask=mask)


def _cast_struct(array: pa.StructArray, to: pa.DataType, safe: bool) -> pa.Array:
    """``CAST(s AS STRUCT(a VARCHAR))``: field by field (the names match: ``can_cast``)."""
    fields = [evaluate_cast(child, field.type, safe)
              for child, field in zip(array.flatten(), to)]
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(fields, fields=list(to), mask=mask)


def _check_finite(value: Value, to: pa.DataType) -> None:
    bad = pc.invert(pc.is_finite(value))
    if pc.any(bad).as_py() if not is_scalar(value) else bool(bad.as_py()):
        raise ExecutionError(f"Conversion Error: DOUBLE value {_first(value, bad)} can't be cast "
                             f"to {T.type_name(to)}")


def _first(value: Value, mask: Value):
    if is_scalar(value):
        return value.as_py()
    return pc.filter(value, mask)[0].as_py()


def _range_checked(value: Value, to: pa.DataType, safe: bool) -> Value:
    """Cast to integer type ``to``, out-of-range values an error (or NULL under TRY_CAST)."""
    source = value.type
    info = np.iinfo(to.to_pandas_dtype())
    low, high = int(info.min), int(info.max)
    if T.is_integer(source):
        own = np.iinfo(source.to_pandas_dtype())
        if own.min >= low and own.max <= high:
            return pc.cast(value, to)
        out_of_range = pc.or_(pc.less(value, pa.scalar(max(low, int(own.min)), source)),
                              pc.greater(value, pa.scalar(min(high, int(own.max)), source)))
    elif T.is_decimal(source):
        largest = 10 ** (source.precision - source.scale) - 1
        if -largest >= low and largest <= high:
            return pc.cast(value, to, safe=False)
        out_of_range = pc.or_(
            pc.less(value, pa.scalar(Decimal(max(low, -largest)), source)),
            pc.greater(value, pa.scalar(Decimal(min(high, largest)), source)))
    else:  # float, already rounded and finite
        out_of_range = pc.or_(pc.less(value, float(low)), pc.greater_equal(value, high + 1.0))
    if safe:
        return pc.cast(null_where(value, out_of_range), to, safe=False)
    bad = out_of_range.as_py() if is_scalar(out_of_range) else pc.any(out_of_range).as_py()
    if bad:
        raise ExecutionError(f"Conversion Error: {T.type_name(source)} value "
                             f"{_first(value, out_of_range)} is out of range for "
                             f"{T.type_name(to)}")
    return pc.cast(value, to, safe=False)


def decimal_from_unscaled(unscaled: np.ndarray, valid: np.ndarray | None,
                          to: pa.DataType) -> pa.Array:
    """A decimal128 array whose values are ``unscaled / 10**scale`` (int64 inputs)."""
    unscaled = np.asarray(unscaled, dtype=np.int64)
    words = np.empty((len(unscaled), 2), dtype=np.int64)
    words[:, 0], words[:, 1] = unscaled, unscaled >> 63  # two's complement sign extension
    validity, null_count = None, 0
    if valid is not None and not valid.all():
        validity = pa.py_buffer(np.packbits(valid.astype(np.uint8), bitorder="little"))
        null_count = int(len(valid) - np.count_nonzero(valid))
    return pa.Array.from_buffers(to, len(unscaled), [validity, pa.py_buffer(words.tobytes())],
                                 null_count=null_count)


def _to_decimal(value: Value, source: pa.DataType, to: pa.DataType, safe: bool) -> Value:
    if T.is_float(source):
        # DuckDB scales then rounds half away from zero: 1.235::DOUBLE -> 1.24 at scale 2
        scaled = pc.round(pc.multiply(pc.cast(value, pa.float64()), 10.0**to.scale), 0,
                          round_mode="half_towards_infinity")
        bad = pc.or_kleene(pc.invert(pc.is_finite(scaled)),
                           pc.greater_equal(pc.abs(scaled), 10.0**to.precision))
        if safe:
            scaled = null_where(scaled, bad)
        elif (pc.any(bad).as_py() if not is_scalar(bad) else bool(bad.as_py())):
            raise ExecutionError(f"Conversion Error: could not cast value "
                                 f"{_first(value, bad)} to {T.type_name(to)}")
        if to.precision > 18:
            return pc.cast(pc.divide(scaled, 10.0**to.scale), to, safe=False)
        scalar = is_scalar(scaled)
        array = pa.array([scaled.as_py()], pa.float64()) if scalar else scaled
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        ints = np.nan_to_num(array.to_numpy(zero_copy_only=False)).astype(np.int64)
        out = decimal_from_unscaled(ints, valid, to)
        return out[0] if scalar else out
    if source.scale > to.scale:  # the rounding's carry may need one more integer digit
        value = pc.cast(value, T.rounding_room(source, to.scale))
        value = pc.round(value, to.scale, round_mode="half_towards_infinity")
    digits = to.precision - to.scale
    if digits >= value.type.precision - value.type.scale:
        return pc.cast(value, to, safe=False)  # every value fits
    width = digits + 1 + value.type.scale  # past 38 when a decimal256 narrows (NULLIF's)
    limit = pa.scalar(Decimal(10**digits), (pa.decimal128 if width <= 38 else pa.decimal256)(
        width, value.type.scale))
    bad = pc.greater_equal(pc.abs(value), limit)
    if safe:
        value = null_where(value, bad)
    elif pc.any(bad).as_py() if not is_scalar(bad) else bool(bad.as_py()):
        raise ExecutionError(f'Conversion Error: Casting value "{_first(value, bad)}" to type '
                             f"{T.type_name(to)} failed: value is out of range!")
    return pc.cast(value, to, safe=False)


# ----------------------------------------------------------------------------- strings

def _from_string(value: Value, to: pa.DataType, safe: bool) -> Value:
    text = pc.utf8_trim_whitespace(value)
    if T.is_integer(to) or T.is_decimal(to) or T.is_float(to):
        pattern = _FLOAT if T.is_float(to) else _NUMBER
        ok = pc.match_substring_regex(text, pattern, ignore_case=True)
        if safe:
            text = null_where(text, pc.invert(ok))
        else:
            _raise_first_bad(value, ok, to)
        if T.is_float(to):
            return pc.cast(text, to)
        if T.is_integer(to):
            try:
                return _range_checked(pc.cast(text, pa.int64()), to, safe)
            except pa.ArrowInvalid:
                pass  # '1.5', '1e3', '+5' or beyond BIGINT: go through DECIMAL/DOUBLE
            try:  # DECIMAL keeps DuckDB's half-away-from-zero rounding of '2.5' -> 3
                exact = pc.cast(text, pa.decimal128(38, 9))
                return _convert(exact, exact.type, to, safe)
            except pa.ArrowInvalid:
                return _convert(pc.cast(text, pa.float64()), pa.float64(), to, safe)
        try:
            return _to_decimal(pc.cast(text, pa.decimal128(38, to.scale)),
                               pa.decimal128(38, to.scale), to, safe)
        except pa.ArrowInvalid:
            return _to_decimal(pc.cast(text, pa.float64()), pa.float64(), to, safe)
    if T.is_boolean(to):
        lowered = pc.utf8_lower(text)
        is_true = pc.is_in(lowered, value_set=pa.array(_TRUE))
        is_false = pc.is_in(lowered, value_set=pa.array(_FALSE))
        ok = pc.or_(is_true, is_false)
        if not safe:
            _raise_first_bad(value, ok, to)
        return null_where(is_true, pc.invert(ok))
    if T.is_date(to):
        return _string_to_date(value, text, to, safe)
    if T.is_timestamp(to):
        text = pc.replace_substring_regex(text, r"^(\d{4}-\d{2}-\d{2})T", r"\1 ")
        text = pc.replace_substring_regex(text, r"^(\d{4}-\d{2}-\d{2})$", r"\1 00:00:00")
        if safe:
            ok = pc.match_substring_regex(
                text, r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?$")
            text = null_where(text, pc.invert(ok))
            try:
                return pc.cast(text, to)
            except pa.ArrowInvalid:
                return _string_to_timestamp_slow(text, to)
        return pc.cast(text, to)
    if T.is_interval(to):
        return _string_to_interval(value, safe)
    return pc.cast(text, to)


def _string_to_timestamp_slow(text: Value, to: pa.DataType) -> Value:
    # valid syntax but impossible values (month 13) under TRY_CAST: via strptime with nulls
    return pc.strptime(text, format="%Y-%m-%d %H:%M:%S", unit=to.unit, error_is_null=True)


def _raise_first_bad(value: Value, ok: Value, to: pa.DataType) -> None:
    bad = pc.invert(pc.fill_null(ok, True))
    if is_scalar(bad):
        if bad.as_py():
            raise ExecutionError(f"Could not convert string '{value.as_py()}' to "
                                 f"{T.type_name(to)}")
        return
    if pc.any(bad).as_py():
        raise ExecutionError(f"Could not convert string '{_first(value, bad)}' to "
                             f"{T.type_name(to)}")


def _string_to_date(value: Value, text: Value, to: pa.DataType, safe: bool) -> Value:
    scalar = is_scalar(value)
    if scalar:
        value, text = pa.array([value.as_py()], value.type), pa.array([text.as_py()], text.type)
    parts = pc.extract_regex(text, _DATE)
    matched = pc.is_valid(parts)
    y, m, d = (pc.cast(pc.struct_field(parts, k), pa.int32()) for k in "ymd")
    result, valid = make_date_values(y, m, d)
    ok = pc.and_(matched, valid) if len(text) else matched
    ok = pc.or_kleene(ok, pc.is_null(text))
    if not safe:
        _raise_first_bad(value, ok, to)
    result = null_where(result, pc.invert(ok))
    result = pc.cast(result, to)
    return result[0] if scalar else result


def _to_string(value: Value, source: pa.DataType, to: pa.DataType) -> Value:
    if T.is_boolean(source):
        out = pc.if_else(value, "true", "false")
    elif T.is_float(source):
        out = format_float(value)
    elif T.is_timestamp(source):
        out = pc.cast(value, to)
        out = pc.replace_substring_regex(out, r"(\.\d*?)0+$", r"\1")
        out = pc.replace_substring_regex(out, r"\.$", "")
        if source.tz is not None:
            out = pc.replace_substring_regex(out, r"Z$", "+00")
    elif T.is_interval(source) or T.is_duration(source):
        out = interval_to_string(value)
    else:
        out = pc.cast(value, to)
    return pc.cast(out, to) if out.type != to else out


# a string element of a list or struct is quoted when it could be misread: empty, blank at an
# end, spelled NULL, or holding a character of the list / struct / map syntax
_QUOTED = r"^$|^\s|\s$|^(?i:null)$|[,:\[\]{}()'\"\\=]"


def _nested_text(array: pa.Array) -> pa.Array:
    """A list or struct as DuckDB's CAST(... AS VARCHAR) prints it: ``[1, 2, NULL]``,
    ``{'a': 1, 'b': x}``: elements by their own VARCHAR cast, NULL as NULL, strings quoted
    (``'y,z'``, ``'\\'q\\''``) only where ``_QUOTED`` says, field names always quoted."""
    if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
        offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        child = array.values.slice(offsets[0], offsets[-1] - offsets[0])
        lists = pa.ListArray.from_arrays(pa.array(offsets - offsets[0], pa.int32()),
                                         _element_text(child))
        body = pc.binary_join(lists, ", ")
        text = pc.binary_join_element_wise("[", body, "]", "")
    else:
        parts = [pc.binary_join_element_wise(
                     "'" + field.name.replace("\\", "\\\\").replace("'", "\\'") + "': ",
                     _element_text(array.field(i)), "")
                 for i, field in enumerate(array.type)]
        text = pc.binary_join_element_wise("{", pc.binary_join_element_wise(*parts, ", "),
                                           "}", "")
    return null_where(text, array.is_null()) if array.null_count else text


def _element_text(values: pa.Array) -> pa.Array:
    """The text of each element of a list or struct (see ``_nested_text``)."""
    text = evaluate_cast(values, pa.string(), False)
    if T.is_string(values.type):
        quote = pc.match_substring_regex(text, _QUOTED)
        escaped = pc.replace_substring_regex(text, r"(['\\])", r"\\\1")
        quoted = pc.binary_join_element_wise("'", escaped, "'", "")
        text = pc.if_else(quote, quoted, text)
    return pc.fill_null(text, "NULL")


def format_float(value: Value) -> Value:
    """Doubles printed like DuckDB (and Python's repr): shortest round-trip digits, positional
    for exponents -4..15 (``10000000000.0``, ``0.0001``), scientific otherwise (``1e+16``,
    ``1e-05``).

    Arrow prints the same shortest digits with other thresholds, so its output is rewritten:
    integral values go through int64, small positional ones become scientific by regex, and
    large non-integral ones are rebuilt from integer and fraction digits, one vectorized pass
    per fraction length.
    """
    scalar = is_scalar(value)
    array = pa.array([value.as_py()], value.type) if scalar else value
    array = pc.cast(array, pa.float64())
    text = pc.cast(array, pa.string())
    magnitude = pc.abs(array)
    finite = pc.is_finite(array)
    integral = pc.and_(pc.and_(finite, pc.equal(pc.floor(array), array)),
                       pc.less(magnitude, 1e16))
    as_int = pc.cast(pc.if_else(integral, array, 0.0), pa.int64(), safe=False)
    int_text = pc.binary_join_element_wise(pc.cast(as_int, pa.string()), ".0", "")
    int_text = pc.if_else(pc.and_(integral, pc.less(array, 0.0)),
                          pc.replace_substring_regex(int_text, r"^0", "-0"), int_text)
    negative_zero = pc.and_(pc.equal(array, 0.0), pc.less(pc.divide(1.0, array), 0.0))
    int_text = pc.if_else(negative_zero, "-0.0", int_text)
    out = pc.if_else(integral, int_text, text)
    # 1e-06 <= |x| < 1e-04: Arrow positional, DuckDB scientific
    for zeros, exponent in ((4, "05"), (5, "06")):
        out = pc.replace_substring_regex(
            out, rf"^(-?)0\.0{{{zeros}}}([1-9])(\d+)$", rf"\1\2.\3e-{exponent}")
        out = pc.replace_substring_regex(
            out, rf"^(-?)0\.0{{{zeros}}}([1-9])$", rf"\1\2e-{exponent}")
    out = pc.replace_substring_regex(out, r"e([+-])(\d)$", r"e\10\2")  # RE2: \1 then 0
    out = _expand_large(array, out, integral)
    out = pc.replace_substring_regex(out, r"^inf$", "inf")
    out = pc.replace_substring_regex(out, r"^-inf$", "-inf")
    return out[0] if scalar else out


def _expand_large(array: pa.Array, out: pa.Array, integral: pa.Array) -> pa.Array:
    """Non-integral values in [1e10, 1e16) that Arrow printed in scientific notation."""
    parts = pc.extract_regex(out, r"^-?(?P<lead>\d)\.(?P<rest>\d+)e\+(?P<exp>\d+)$")
    exponent = pc.cast(pc.struct_field(parts, "exp"), pa.int32())
    candidates = pc.and_(pc.is_valid(parts), pc.less(exponent, 16))
    candidates = pc.fill_null(pc.and_(candidates, pc.invert(integral)), False)
    if not pc.any(candidates).as_py():
        return out
    rest_length = pc.utf8_length(pc.struct_field(parts, "rest"))
    fraction_digits = pc.subtract(rest_length, exponent)  # digits after the point
    rows = pc.indices_nonzero(candidates)
    values = array.take(rows)
    digits = fraction_digits.take(rows).to_numpy(zero_copy_only=False)
    whole = pc.trunc(values)
    rebuilt = pa.nulls(len(rows), pa.string())
    for k in np.unique(digits):
        mask = pa.array(digits == k)
        frac = pc.round(pc.multiply(pc.abs(pc.subtract(values, whole)), 10.0 ** int(k)))
        frac_text = pc.utf8_lpad(pc.cast(pc.cast(frac, pa.int64()), pa.string()), int(k), "0")
        whole_text = pc.cast(pc.cast(whole, pa.int64()), pa.string())
        joined = pc.binary_join_element_wise(whole_text, frac_text, ".")
        rebuilt = pc.if_else(mask, joined, rebuilt)
    fixed = pc.replace_with_mask(out, candidates, rebuilt)
    return fixed


def _string_to_interval(value: Value, safe: bool) -> Value:
    scalar = is_scalar(value)
    values = [value.as_py()] if scalar else value.to_pylist()
    # an interval string column is rare: parse per distinct value
    distinct = {v: None for v in values if v is not None}
    for text in distinct:
        try:
            distinct[text] = parse_interval_text(text)
        except ValueError as e:
            if not safe:
                raise ExecutionError(f"Could not convert string '{text}' to INTERVAL") from e
    out = pa.array([None if v is None else distinct[v] for v in values], T.INTERVAL)
    return out[0] if scalar else out


def _interval_to_duration(value: Value, to: pa.DataType) -> Value:
    scalar = is_scalar(value)
    values = [value.as_py()] if scalar else value.to_pylist()
    micros = []
    for v in values:
        if v is None:
            micros.append(None)
            continue
        if v.months:
            raise ExecutionError("cannot convert an INTERVAL with months to a fixed duration")
        micros.append(v.days * 86_400_000_000 + v.nanoseconds // 1000)
    out = pc.cast(pa.array(micros, pa.int64()), pa.duration("us"))
    out = pc.cast(out, to)
    return out[0] if scalar else out


def _duration_to_interval(value: Value) -> Value:
    scalar = is_scalar(value)
    arr = pa.array([value.as_py()], value.type) if scalar else value
    nanos = pc.cast(pc.cast(arr, pa.duration("ns")), pa.int64()).to_numpy(zero_copy_only=False)
    mask = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False))
    nanos = np.where(mask, nanos, 0)
    days = np.sign(nanos) * (np.abs(nanos) // 86_400_000_000_000)  # DuckDB truncates
    out = make_intervals(np.zeros_like(days), days, nanos - days * 86_400_000_000_000, mask)
    return out[0] if scalar else out
