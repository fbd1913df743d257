"""SUM / AVG inputs and results shared by plain and DISTINCT frame aggregates.

A summable column becomes numpy *channels* that are summed over frames independently:

    int, bool, uint     one int64 channel (prefix sums exact modulo 2**64 per frame)
    decimal             one int64 channel of unscaled values (any precision whose values
                        fit int64)
                        both: two channels, the high and low 32 bits, when a frame's sum
                        could pass int64: joined exactly into the DECIMAL(38, s) result
    float               one float64 channel (NaN/inf replaced by 0, compensated prefix sums)
                        + three int64 counters: NaN, +inf, -inf

and the per-frame channel sums plus the frame's non-NULL count become the SQL result
(NULL for an empty frame; NaN/inf follow IEEE: inf + -inf = NaN).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from plansight.engine.errors import NotSupportedError, PlanError, bigint_sum_overflow
from plansight.engine.functions.window.prefix_sums import (
    CompensatedPrefix,
    Segments,
    prefix,
    sum_over,
)
from plansight.engine.kernels import decimal as D

_INT64_LIMIT = 2**63


@dataclass(frozen=True, eq=False)
class Summable:
    """A column prepared for summation; rows that do not contribute hold 0."""

    kind: str  # "int" | "decimal" | "float"
    channels: tuple[np.ndarray, ...]
    scale: int = 0
    max_abs: int = 0  # int/decimal: largest |value|, to rule out int64 overflow cheaply
    split: bool = False  # channels (value >> 32, value & 0xFFFFFFFF): see _split

    def take(self, rows: np.ndarray) -> Summable:
        """The same column restricted to ``rows`` (for materialized frames)."""
        return Summable(self.kind, tuple(c[rows] for c in self.channels), self.scale,
                        self.max_abs, self.split)


def _split(column: Summable, func: str, max_frame: int) -> Summable:
    """AVG and SUM of integers and decimals that a frame's int64 sum could overflow (DuckDB
    sums them exactly, as HUGEINT / DECIMAL(38, s)): each value as its high and low 32 bits,
    two channels whose frame sums stay in int64 (frames under 2**31 rows), joined once
    (avg_result, sum_result)."""
    if column.max_abs < 2**31 or column.max_abs > _INT64_LIMIT or \
            column.max_abs * max(max_frame, 1) < _INT64_LIMIT:
        return column
    if func not in ("sum", "avg"):
        return column
    (ints,) = column.channels
    return Summable(column.kind, (ints >> 32, ints & 0xFFFFFFFF), column.scale, column.max_abs,
                    split=True)


def summable(values: pa.Array, contributing: np.ndarray, func: str,
             max_frame: int = 2**31) -> Summable:
    """Channels of ``values`` for SUM/AVG over frames of at most ``max_frame`` rows;
    PlanError for non-numeric types."""
    typ = values.type
    if pa.types.is_decimal(typ):
        if typ.bit_width != 128 or (typ.precision > 18 and not D.values_fit_int64(values)):
            raise NotSupportedError(f"{func}() over {typ} values beyond 18 digits is not "
                                    "supported")
        words = np.frombuffer(values.buffers()[1], dtype=np.int64)
        unscaled = words[2 * values.offset:2 * (values.offset + len(values)):2]
        unscaled = np.where(contributing, unscaled, 0)
        return _split(Summable("decimal", (unscaled,), typ.scale, _max_abs(unscaled)), func,
                      max_frame)
    if pa.types.is_integer(typ) or pa.types.is_boolean(typ):
        if pa.types.is_boolean(typ):
            values = values.cast(pa.int8())
        raw = values.fill_null(0).to_numpy(zero_copy_only=False)
        if raw.dtype == np.uint64:
            big = int(raw.max()) if len(raw) else 0
            raw = raw.view(np.int64)
            # UBIGINT values from 2**63 wrap in the int64 view: marked beyond the limit
            # (BIGINT's -2**63 is exactly at it, and exact)
            max_abs = big + 1 if big >= _INT64_LIMIT else big
        else:
            raw = raw.astype(np.int64)
            max_abs = 0
        ints = np.where(contributing, raw, 0)
        return _split(Summable("int", (ints,), 0, max(max_abs, _max_abs(ints))), func,
                      max_frame)
    if pa.types.is_floating(typ):
        floats = values.cast(pa.float64())
        floats = (floats.fill_null(0.0) if floats.null_count else floats).to_numpy()
        if not contributing.all():
            floats = np.where(contributing, floats, 0.0)
        finite = np.isfinite(floats)
        if finite.all():
            return Summable("float", (floats,))
        nan = np.isnan(floats)
        return Summable("float", (np.where(finite, floats, 0.0), nan.astype(np.int64),
                                  (floats == np.inf).astype(np.int64),
                                  (floats == -np.inf).astype(np.int64)))
    raise PlanError(f"{func}() needs a numeric argument, got {typ}")


def channel_prefix(channel: np.ndarray) -> np.ndarray | CompensatedPrefix:
    """Prefix sums of one channel: exact int64 or compensated float64."""
    if channel.dtype == np.float64:
        return CompensatedPrefix(channel)
    return prefix(channel)


def channel_sum(prefix_sums: np.ndarray | CompensatedPrefix, segments: Segments) -> np.ndarray:
    """Per-row sum of one channel over the segments."""
    if isinstance(prefix_sums, CompensatedPrefix):
        hi, lo = prefix_sums.range_sum(segments)
        return hi + lo
    return sum_over(prefix_sums, segments)


def check_int_overflow(column: Summable, max_frame: int, sums: np.ndarray,
                       segments: Callable[[], Segments], func: str) -> None:
    """Raise if a frame's integer SUM (a BIGINT) is beyond int64: its wrapped int64 sum,
    exact modulo 2**64, is 2**64 or more away from the true one, which a double shadow sum
    (within far less than 2**62 of it) tells. Totals that fit are exact, whatever their
    running sums did. Split (decimal) channels are exact and never checked here.
    ``segments`` gives the frames only when a check is needed (they may cost more than the
    sums)."""
    if column.kind == "float" or column.split or \
            column.max_abs * max(max_frame, 1) < _INT64_LIMIT:
        return
    if column.max_abs > _INT64_LIMIT:  # UBIGINT values beyond BIGINT: the channel wrapped
        raise NotSupportedError(f"{func}() of UBIGINT values beyond the BIGINT range is not "
                                "supported")
    approx = channel_sum(CompensatedPrefix(column.channels[0].astype(np.float64)), segments())
    check_wrapped(sums, approx, func)


def check_wrapped(sums: np.ndarray, approx: np.ndarray, func: str) -> None:
    """Raise the BIGINT overflow error where an int64 ``sums`` (wrapped modulo 2**64) is off
    its double shadow ``approx`` by a wrap."""
    with np.errstate(invalid="ignore"):
        if np.any(np.abs(approx - sums.astype(np.float64)) > 2.0**62):
            raise bigint_sum_overflow(f"{func}() OVER (...)")


def sum_result(column: Summable, sums: list[np.ndarray], empty: np.ndarray | None,
               result_type: pa.DataType) -> pa.Array:
    """SUM from channel sums: NULL where nothing contributed (``empty``; None when no frame
    is empty)."""
    if empty is None:
        empty = np.zeros(len(sums[0]), dtype=bool) if column.split or \
            column.kind == "decimal" else None
    if column.split:
        return _joined_decimal(sums[0], sums[1], empty, result_type)
    if column.kind == "decimal":
        return decimal_array(np.where(empty, 0, sums[0]), empty, result_type)
    if column.kind == "int":
        return pa.array(sums[0], type=pa.int64(), mask=empty).cast(result_type)
    return pa.array(_with_nonfinite(sums), type=pa.float64(), mask=empty).cast(result_type)


def avg_result(column: Summable, sums: list[np.ndarray], count: np.ndarray) -> pa.Array:
    """AVG = SUM / COUNT as float64: NULL where nothing contributed."""
    empty = count == 0
    denominator = np.where(empty, 1, count).astype(np.float64)
    if column.kind == "float":
        total = _with_nonfinite(sums)
    elif column.split:
        total = sums[0].astype(np.float64) * 2.0**32 + sums[1].astype(np.float64)
    else:
        total = sums[0].astype(np.float64)
    with np.errstate(invalid="ignore"):
        mean = total / denominator
    if column.kind == "decimal":
        mean = mean / float(10 ** column.scale)
    return pa.array(mean, type=pa.float64(), mask=empty)


def _with_nonfinite(sums: list[np.ndarray]) -> np.ndarray:
    total = sums[0]
    if len(sums) == 1:
        return total
    nan, pos_inf, neg_inf = sums[1] > 0, sums[2] > 0, sums[3] > 0
    total = np.where(pos_inf, np.inf, total)
    total = np.where(neg_inf, -np.inf, total)
    return np.where(nan | (pos_inf & neg_inf), np.nan, total)


def decimal_array(unscaled: np.ndarray, null: np.ndarray, typ: pa.DataType) -> pa.Array:
    """A decimal128 array from int64 unscaled values (sign-extended to 128 bits)."""
    unscaled = unscaled.astype(np.int64)
    words = np.empty(2 * len(unscaled), dtype=np.int64)
    words[0::2] = unscaled
    words[1::2] = unscaled >> 63
    bitmap = pa.array(~null).buffers()[1] if null.any() else None
    return pa.Array.from_buffers(typ, len(unscaled), [bitmap, pa.py_buffer(words)])


def _joined_decimal(high: np.ndarray, low: np.ndarray, null: np.ndarray,
                    typ: pa.DataType) -> pa.Array:
    """A decimal128 array of ``high * 2**32 + low`` (``low`` >= 0) on exact 128-bit words:
    ``high * 2**32`` is (high << 32, high >> 32), plus ``low`` with its carry."""
    high, low = np.where(null, 0, high), np.where(null, 0, low)
    low_word = (high << 32).view(np.uint64)
    added = low_word + low.view(np.uint64)
    carry = (added < low_word).astype(np.int64)
    words = np.empty(2 * len(high), dtype=np.int64)
    words[0::2] = added.view(np.int64)
    words[1::2] = (high >> 32) + carry
    bitmap = pa.array(~null).buffers()[1] if null.any() else None
    return pa.Array.from_buffers(typ, len(high), [bitmap, pa.py_buffer(words)])


def _max_abs(values: np.ndarray) -> int:
    if len(values) == 0:
        return 0
    return max(abs(int(values.max())), abs(int(values.min())))
