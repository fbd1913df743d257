"""Value navigation: lag, lead (partition-relative) and first/last/nth_value (frame-relative).

Every function computes one source row index per output row (or "none") and finishes with a
single ``take``; no value is touched before that::

    lag(x, k)      source = i - k if it stays inside the partition, else the default
    lead(x, k)     source = i + k
    first_value    first row of the first non-empty frame segment
    last_value     last row of the last non-empty frame segment
    nth_value(n)   n-th row of the frame, counted across the segments

IGNORE NULLS counts only non-NULL rows: with ``before[i]`` = number of non-NULL rows before
row i and ``valid_rows`` their positions, "the k-th non-NULL row before i" is
``valid_rows[before[i] - k]`` (checked against the partition start), and the n-th non-NULL
row of a segment [lo, hi) is ``valid_rows[before[lo] + n - 1]`` when ``n <= before[hi] -
before[lo]``. Offsets and n may differ per row; NULL offsets / n give NULL.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import PlanError
from plansight.engine.functions.window.frames import FrameBounds
from plansight.engine.functions.window.peers import PartitionLayout, validity
from plansight.engine.functions.window.prefix_sums import prefix
from plansight.engine.kernels.shift import shifted_sources

NAVIGATION_FUNCTIONS = ("lag", "lead", "first_value", "last_value", "nth_value")


def lag_lead(func: str, args: list[pa.Array], layout: PartitionLayout,
             ignore_nulls: bool) -> pa.Array:
    """lag / lead over the partition (the frame does not apply)."""
    values = args[0]
    n = layout.num_rows
    constant = _constant_offset(args[1] if len(args) > 1 else None)
    if constant is not None and not ignore_nulls:
        # one offset for every row: each row's source from the partition starts alone
        back = constant if func == "lag" else -constant
        if abs(back) >= n:  # no row finds a source (and i - back cannot overflow)
            source, found = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
        else:
            source, found = shifted_sources(layout.partition_starts, back)
        result = _take(values, source, found, zeroed=True)
        if len(args) > 2:
            default = args[2]
            if default.type != values.type:
                default = default.cast(values.type)
            result = pc.if_else(pa.array(~found), default, result)
        return result
    offset, offset_null = _integers(args[1], "offset") if len(args) > 1 else (
        np.ones(n, dtype=np.int64), np.zeros(n, dtype=bool))
    # positive = towards earlier rows
    back = offset if func == "lag" else -offset
    rows = layout.row_index
    pstart, pend = layout.row_partition_start, layout.row_partition_end
    if ignore_nulls:
        valid = validity(values)
        valid_rows = np.flatnonzero(valid)
        before = prefix(valid)
        # k-th non-NULL row before i (k > 0) / after i (k < 0); k == 0 is the row itself
        slot = np.where(back > 0, before[:-1] - back, before[1:] - back - 1)
        inside = (slot >= 0) & (slot < len(valid_rows))
        source = valid_rows[np.clip(slot, 0, max(len(valid_rows) - 1, 0))] if len(
            valid_rows) else np.zeros(n, dtype=np.int64)
        found = inside & (source >= pstart) & (source < pend)
        source = np.where(back == 0, rows, source)
        found = np.where(back == 0, True, found)
    else:
        source = rows - back
        found = (source >= pstart) & (source < pend)
    found &= ~offset_null
    result = _take(values, source, found)
    if len(args) > 2:
        default = args[2]
        if default.type != values.type:
            default = default.cast(values.type)
        use_default = pa.array(~found & ~offset_null)
        result = pc.if_else(use_default, default, result)
    return result


def frame_value(func: str, args: list[pa.Array], bounds: FrameBounds,
                ignore_nulls: bool) -> pa.Array:
    """first_value / last_value / nth_value over every row's frame."""
    values = args[0]
    segments = bounds.segments
    n = bounds.layout.num_rows
    if ignore_nulls:
        valid = validity(values)
        valid_rows = np.flatnonzero(valid)
        before = prefix(valid)
    else:
        before = None
    if func == "nth_value":
        wanted, wanted_null = _integers(args[1], "n")
        wanted_null = wanted_null | (wanted <= 0)
    elif func == "first_value":
        wanted, wanted_null = np.ones(n, dtype=np.int64), np.zeros(n, dtype=bool)
    else:
        wanted, wanted_null = None, np.zeros(n, dtype=bool)

    if func == "last_value":
        # the last non-empty segment wins: walk them from the back
        source = np.zeros(n, dtype=np.int64)
        found = np.zeros(n, dtype=bool)
        for lo, hi in reversed(segments):
            if before is None:
                has = hi > lo
                candidate = hi - 1
            else:
                has = before[hi] > before[lo]
                candidate = _valid_at(valid_rows, before[hi] - 1)
            take = has & ~found
            source = np.where(take, candidate, source)
            found |= has
        return _take(values, source, found)

    # first_value is nth_value(1): count n down through the segments in order
    remaining = np.where(wanted_null, 0, wanted)
    source = np.zeros(n, dtype=np.int64)
    found = np.zeros(n, dtype=bool)
    for lo, hi in segments:
        if before is None:
            size = hi - lo
            candidate = lo + remaining - 1
        else:
            size = before[hi] - before[lo]
            candidate = _valid_at(valid_rows, before[lo] + remaining - 1)
        here = ~found & ~wanted_null & (remaining <= size)
        source = np.where(here, candidate, source)
        found |= here
        remaining = np.where(found, remaining, remaining - size)
    return _take(values, source, found)


def _valid_at(valid_rows: np.ndarray, slot: np.ndarray) -> np.ndarray:
    if len(valid_rows) == 0:
        return np.zeros(len(slot), dtype=np.int64)
    return valid_rows[np.clip(slot, 0, len(valid_rows) - 1)]


def _integers(arg: pa.Array, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-row int64 values of an integer argument and its NULL mask."""
    if not (pa.types.is_integer(arg.type) or pa.types.is_null(arg.type)):
        raise PlanError(f"the {what} argument must be an integer, got {arg.type}")
    null = ~validity(arg)
    if pa.types.is_null(arg.type):
        return np.zeros(len(arg), dtype=np.int64), null
    return arg.cast(pa.int64()).fill_null(0).to_numpy(), null


def _constant_offset(arg: pa.Array | None) -> int | None:
    """The offset of every row when it is one non-NULL integer (1 without an offset
    argument), else None (per-row or NULL offsets take the general path)."""
    if arg is None:
        return 1
    if not pa.types.is_integer(arg.type) or arg.null_count or len(arg) == 0:
        return None
    bounds = pc.min_max(arg)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return int(low) if low == high else None


def _take(values: pa.Array, source: np.ndarray, found: np.ndarray,
          zeroed: bool = False) -> pa.Array:
    """``values[source]``, NULL where not ``found`` (``zeroed``: ``source`` already holds
    0 there, so it needs no masked copy)."""
    if pa.types.is_null(values.type):
        return pa.nulls(len(source))
    if found.all():
        return values.take(pa.array(source, type=pa.int64()))
    indices = source if zeroed else np.where(found, source, 0)
    return values.take(pa.array(indices, type=pa.int64(), mask=~found))
