"""RANGE frame bounds with ``<offset> PRECEDING/FOLLOWING``: one search for all rows.

For a row with order key ``k`` the bound is the first row of its partition whose key reaches
``k -/+ offset`` (``lower bound`` for a frame start, ``upper bound`` for a frame end), searched
only among the partition's non-NULL keys. Rows whose key is NULL are peers of each other:
their offset bounds are the bounds of the NULL peer group (as in DuckDB).

One vectorized search serves every partition::

    1. targets   t = k - offset (PRECEDING) or k + offset (FOLLOWING); DESC flips the sign.
                 Integers and decimals use exact arithmetic (a fractional offset is rounded
                 toward the side that keeps the comparison exact), floats use the key's own
                 float width, dates/timestamps add months (clamping the day), days, then nanos.
                 TIME keys count an interval as its total length (a month = 30 days, as
                 DuckDB) and do not wrap around midnight: 01:00 - 2 hours lies before 00:00.
    2. ranks     np.unique over keys and targets -> dense ranks in value order (NaN last),
                 reversed for DESC, so keys ascend inside every partition.
    3. composite partition_index * n_ranks + rank ascends over ALL rows at once,
                 so a single np.searchsorted answers every row's search in its own partition.

Overflowing targets (k - offset below the type's minimum) saturate to the partition's
non-NULL region end instead of raising as DuckDB does. Float keys take 'inf' offsets (every
key is within reach) in IEEE arithmetic, NaN sorting above every number.
"""

from __future__ import annotations

import datetime
import math
from fractions import Fraction

import numpy as np
import pyarrow as pa

from plansight.engine.errors import NotSupportedError, PlanError
from plansight.engine.functions.window.frame_spec import FrameBound, FrameSpec, exact_number
from plansight.engine.functions.window.peers import PartitionLayout, PeerGroups, as_array, validity

_NANOS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_DAY_NANOS = 86_400 * 1_000_000_000


def range_offset_bounds(frame: FrameSpec, layout: PartitionLayout, peers: PeerGroups | None,
                        key: pa.Array, descending: bool,
                        nulls_first: bool) -> tuple[np.ndarray, np.ndarray]:
    """Unclipped frame start and end of every row for a RANGE frame with an offset bound."""
    assert peers is not None
    key = as_array(key)
    if pa.types.is_dictionary(key.type):
        key = key.dictionary_decode()
    n = layout.num_rows
    valid = validity(key)
    valid_before = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(valid, out=valid_before[1:])
    pstart, pend = layout.row_partition_start, layout.row_partition_end
    num_valid = valid_before[pend] - valid_before[pstart]
    region_start = pend - num_valid if nulls_first else pstart
    region_end = region_start + num_valid

    hay_rows = np.flatnonzero(valid)
    results = []
    searches = []
    for bound, is_start in ((frame.start, True), (frame.end, False)):
        if bound.kind == "unbounded_preceding":
            results.append(pstart)
        elif bound.kind == "unbounded_following":
            results.append(pend)
        elif bound.kind == "current_row":
            results.append(peers.peer_start if is_start else peers.peer_end)
        else:
            # NULL keys: the NULL peer group; non-NULL keys are filled in by the search below
            results.append((peers.peer_start if is_start else peers.peer_end).copy())
            searches.append((len(results) - 1, bound, is_start))
    if not searches or len(hay_rows) == 0:
        return results[0], results[1]

    domain = _KeyDomain(key, hay_rows, [bound.offset for _, bound, _ in searches])
    targets = []
    for _, bound, is_start in searches:
        sign = -1 if (bound.kind == "preceding") != descending else 1
        # which integer target keeps "key >= t" / "key > t" exact for a fractional offset
        round_up = is_start != descending
        targets.append(domain.targets(bound, sign, round_up))

    values = np.concatenate([domain.values] + [t[0] for t in targets])
    uniq, ranks = np.unique(values, return_inverse=True)
    n_ranks = np.int64(len(uniq))
    if descending:
        ranks = n_ranks - 1 - ranks
    h = len(hay_rows)
    part = layout.partition_index[hay_rows]
    offset_part = part * n_ranks
    hay = offset_part + ranks[:h]
    row_start = region_start[hay_rows]
    row_end = region_end[hay_rows]
    for k, ((slot, _, is_start), (_, below, above)) in enumerate(zip(searches, targets)):
        needle = offset_part + ranks[h * (k + 1):h * (k + 2)]
        pos = np.searchsorted(hay, needle, side="left" if is_start else "right")
        found = row_start + (pos - valid_before[row_start])
        # saturated targets lie outside every key: before the region or after it
        low, high = (row_end, row_start) if descending else (row_start, row_end)
        found = np.where(below, low, np.where(above, high, found))
        results[slot][hay_rows] = found
    return results[0], results[1]


class _KeyDomain:
    """The non-NULL order keys as numbers, and offset arithmetic in that domain."""

    def __init__(self, key: pa.Array, hay_rows: np.ndarray, offsets: list[object]):
        typ = key.type
        self.type = typ
        self.unit_nanos: int | None = None  # set for temporal keys
        self.date_days = False
        self.date_as_micros = False  # a date key compared as timestamps (interval offsets)
        self.time_of_day = False  # months and days are lengths, not calendar steps
        dense = _numeric_view(key)
        if pa.types.is_integer(typ) or pa.types.is_decimal(typ):
            self.kind = "integer"
            self.scale = typ.scale if pa.types.is_decimal(typ) else 0
        elif pa.types.is_floating(typ):
            self.kind = "float"
        elif pa.types.is_date32(typ):
            self.kind = "temporal"
            self.date_days = True
        elif pa.types.is_date64(typ):
            self.kind, self.unit_nanos = "temporal", _NANOS_PER_UNIT["ms"]
        elif pa.types.is_timestamp(typ):
            self.kind, self.unit_nanos = "temporal", _NANOS_PER_UNIT[typ.unit]
        elif pa.types.is_time(typ):
            self.kind, self.unit_nanos = "temporal", _NANOS_PER_UNIT[typ.unit]
            self.time_of_day = True
        elif pa.types.is_duration(typ) or pa.types.is_interval(typ):
            raise NotSupportedError(f"RANGE frames with an offset over an ORDER BY key of type "
                                    f"{typ} are not supported")
        else:
            raise PlanError(f"RANGE frames with an offset need a numeric, date, time or "
                            f"timestamp ORDER BY key, got {typ}")
        self.values = dense[hay_rows]
        offsets = [o.as_py() if isinstance(o, pa.Scalar) else o for o in offsets]
        if self.date_days and any(_is_interval(o) for o in offsets):
            # date +/- interval is a timestamp: compare in microseconds
            self.values = self.values * np.int64(_DAY_NANOS // 1000)
            self.date_days, self.unit_nanos = False, 1000
            self.date_as_micros = True

    def targets(self, bound: FrameBound, sign: int,
                round_up: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(targets, below, above): key + sign * offset, and where it left the key's range."""
        offset = bound.offset
        if isinstance(offset, pa.Scalar):
            offset = offset.as_py()
        if self.kind == "float":
            return self._float_targets(offset, sign)
        months, amount = self._split_offset(offset)
        values = self.values
        if months:
            values = _add_months(values, sign * months, _DAY_NANOS // self.unit_nanos)
        step = sign * amount
        step = math.ceil(step) if round_up else math.floor(step)
        return _saturating_add(values, step)

    def _float_targets(self, offset: object,
                       sign: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if _is_interval(offset):
            raise PlanError(f"RANGE offset {offset!r} is an interval but the ORDER BY key is "
                            f"{self.type}")
        dtype = self.values.dtype.type
        step = dtype(float(offset))
        with np.errstate(over="ignore", invalid="ignore"):
            if sign > 0:
                result = self.values + step
            else:
                result = self.values - step
                # inf - inf: +inf lies infinitely far after +inf too (PostgreSQL's rule; DuckDB
                # raises): the bound reaches -inf. -inf + inf stays NaN, which sorts above
                # every key (DuckDB's answer)
                result = np.where(np.isnan(result) & ~np.isnan(self.values), -np.inf,
                                  result).astype(self.values.dtype)
        none = np.zeros(len(result), dtype=bool)
        return result, none, none

    def _split_offset(self, offset: object) -> tuple[int, Fraction]:
        """(months, amount in key units) of an offset; PlanError if the types do not fit."""
        interval = _is_interval(offset)
        if self.kind == "integer":
            if interval:
                raise PlanError(f"RANGE offset {offset!r} is an interval but the ORDER BY key is "
                                f"{self.type}")
            return 0, exact_number(offset) * 10 ** self.scale
        if not interval:
            if self.date_as_micros:  # date +/- integer = days, here in microseconds
                return 0, exact_number(offset) * (_DAY_NANOS // 1000)
            if not self.date_days:
                raise PlanError(f"RANGE offset over a {self.type} ORDER BY key must be an "
                                f"interval, got {offset!r}")
            return 0, exact_number(offset)  # date +/- integer = days
        if isinstance(offset, datetime.timedelta):
            months, nanos = 0, Fraction((offset.days * 86_400 + offset.seconds) * 10**6
                                        + offset.microseconds) * 1000
        else:
            months = offset.months
            nanos = Fraction(offset.days * _DAY_NANOS + offset.nanoseconds)
        if self.time_of_day:
            months, nanos = 0, nanos + months * 30 * _DAY_NANOS
        assert self.unit_nanos is not None
        return months, nanos / self.unit_nanos


def _is_interval(offset: object) -> bool:
    return isinstance(offset, (datetime.timedelta, pa.MonthDayNano))


def _numeric_view(key: pa.Array) -> np.ndarray:
    """Keys as int64 / uint64 / float numpy values (decimals scaled); NULL slots arbitrary."""
    typ = key.type
    if pa.types.is_decimal(typ):
        if typ.bit_width != 128 or typ.precision > 18:
            raise NotSupportedError(f"RANGE frames with an offset over {typ} keys with "
                                    "precision above 18 are not supported")
        words = np.frombuffer(key.buffers()[1], dtype=np.int64)
        return words[2 * key.offset:2 * (key.offset + len(key)):2].copy()
    if pa.types.is_date32(typ):
        return key.cast(pa.int32()).fill_null(0).to_numpy().astype(np.int64)
    if pa.types.is_date64(typ) or pa.types.is_timestamp(typ) or pa.types.is_time64(typ):
        return key.cast(pa.int64()).fill_null(0).to_numpy()
    if pa.types.is_time32(typ):
        return key.cast(pa.int32()).fill_null(0).to_numpy().astype(np.int64)
    if pa.types.is_unsigned_integer(typ):
        return key.fill_null(0).to_numpy().astype(np.uint64)
    if pa.types.is_integer(typ):
        return key.fill_null(0).to_numpy().astype(np.int64)
    if pa.types.is_floating(typ):
        if pa.types.is_float16(typ):
            return key.cast(pa.float32()).fill_null(0).to_numpy()
        return key.fill_null(0).to_numpy()
    return np.zeros(len(key))


def _saturating_add(values: np.ndarray,
                    step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    info = np.iinfo(values.dtype)
    none = np.zeros(len(values), dtype=bool)
    if step == 0:
        return values, none, none
    if step > 0:
        if step > info.max - info.min:
            return values, none, ~none
        above = values > info.max - step
        shifted = values + _as_dtype(step, values.dtype)
        return shifted, none, above
    if -step > info.max - info.min:
        return values, ~none, none
    below = values < info.min - step
    if values.dtype == np.uint64:
        shifted = values - np.uint64(-step)
    else:
        shifted = values + _as_dtype(step, values.dtype)
    return shifted, below, none


def _as_dtype(step: int, dtype: np.dtype) -> np.generic:
    """``step`` as a numpy scalar; wraps modulo 2**64 like the int64 arithmetic it feeds."""
    return np.array(step % 2**64, dtype=np.uint64).astype(dtype)


def _add_months(values: np.ndarray, months: int, units_per_day: int) -> np.ndarray:
    """Calendar month arithmetic on int64 timestamps (units since epoch), clamping the day
    of month like DuckDB (Jan 31 + 1 month = Feb 28/29)."""
    per_day = np.int64(units_per_day)
    days = np.floor_divide(values, per_day)
    time_of_day = values - days * per_day
    date = days.astype("datetime64[D]")
    month = date.astype("datetime64[M]")
    day_of_month = (date - month.astype("datetime64[D]")).astype(np.int64)
    shifted = month + np.timedelta64(months, "M")
    month_days = ((shifted + np.timedelta64(1, "M")).astype("datetime64[D]")
                  - shifted.astype("datetime64[D]")).astype(np.int64)
    new_days = (shifted.astype("datetime64[D]").astype(np.int64)
                + np.minimum(day_of_month, month_days - 1))
    return new_days * per_day + time_of_day

