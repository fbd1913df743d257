"""Column statistics of table sources: what the planner knows about a column before it runs.

Every source reports, per column, a ``ColumnStatistics``: min, max, null count and a
distinct-count estimate, each ``None`` when unknown. Where they come from:

    Parquet   file metadata: min/max/nulls from the row-group statistics, the distinct
              count when the writer stored one, else bounded by the key range (max - min + 1
              for integers and dates) and the non-NULL rows -- and where the row groups'
              ranges do not overlap (a sorted or clustered key), one row group's exact
              distinct count per row, scaled to the table (``clustered_distinct``): 6M
              lineitem rows hold 1.5M order keys, which no bound says
    memory    computed once per registered table and column, on first use: one min_max pass,
              the null count Arrow already keeps, and the distinct count exact for tables up
              to ``EXACT_DISTINCT_ROWS`` rows, else estimated from an evenly spread sample
              (GEE, below) -- never a pass per query
    CSV, IPC  nothing (their row counts are size-based guesses too)

Memory and Parquet sources also keep, per column and on first use, a sample of its rows
(``row_sample``, ``PREDICATE_SAMPLE_ROWS``; for Parquet drawn from a few row groups spread
over the files): predicates no statistic judges (LIKE, a function of a column, a string
range) are evaluated on it.

The estimates in ``logical/estimate.py`` read these to interpolate range filters, take 1/NDV
for equalities and divide join and group-by sizes by key distinct counts.
"""

from __future__ import annotations

import datetime
import decimal
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: distinct counts are exact (one hash pass) up to this many rows, sampled beyond
EXACT_DISTINCT_ROWS = 1 << 18
#: rows sampled for the distinct-count estimate of a larger column
SAMPLE_ROWS = 1 << 16
#: rows a source keeps per column to evaluate predicates no statistic judges (LIKE, a
#: function of a column) on: the fraction of a sample of n is within ~1/(2 sqrt(n)) of the
#: true one (+-0.8% at 4096), far better than a constant guess, and evaluating a pattern on
#: 4096 strings costs well under a millisecond per query
PREDICATE_SAMPLE_ROWS = 1 << 12


@dataclass(frozen=True)
class ColumnStatistics:
    """What a source knows about one column; ``None`` fields are unknown.

    Example:
        >>> s = ColumnStatistics(min=0, max=99, null_count=0, distinct_count=100.0)
        >>> s.fraction_between(None, 25, high_inclusive=False)
        0.25
    """

    min: Any = None
    max: Any = None
    null_count: int | None = None
    distinct_count: float | None = None
    #: the distinct count is only an upper bound (the key range, or the rows), not counted:
    #: l_orderkey spans 6M values but holds the 1.5M of o_orderkey
    distinct_is_bound: bool = False

    def fraction_between(self, low: Any, high: Any, low_inclusive: bool = True,
                         high_inclusive: bool = True) -> float | None:
        """The fraction of the [min, max] range between ``low`` and ``high`` (either None:
        open), by linear interpolation -- over whole values for integers and dates (x < 25
        of 0..99 is 25 of 100 values), over the number line otherwise; None when the values
        have no number line (strings) or the range is unknown."""
        lo, hi = position(self.min), position(self.max)
        if lo is None or hi is None:
            return None
        a = lo if low is None else position(low)
        b = hi if high is None else position(high)
        if a is None or b is None:
            return None
        step = 1.0 if _discrete(self.min) and _discrete(self.max) else 0.0
        if step and low is not None and not low_inclusive:
            a = math.floor(a) + 1.0
        if step and high is not None and not high_inclusive:
            b = math.ceil(b) - 1.0
        a, b = max(a, lo), min(b, hi)
        if b < a:
            return 0.0
        if hi == lo:
            return 1.0
        return min(1.0, (b - a + step) / (hi - lo + step))


def _discrete(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or \
        (isinstance(value, datetime.date) and not isinstance(value, datetime.datetime))


_EPOCH = datetime.datetime(1970, 1, 1)


def position(value: Any) -> float | None:
    """``value`` on a number line that keeps its order (dates as days, times as seconds,
    decimals as floats), or None for values without one (strings, bytes, booleans)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float, decimal.Decimal)):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            return value.timestamp()
        return (value - _EPOCH).total_seconds()
    if isinstance(value, datetime.date):
        return float(value.toordinal())
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return None


def range_distinct(low: Any, high: Any) -> float | None:
    """max - min + 1 of an integer or date range: the most distinct values it can hold."""
    if isinstance(low, bool) or isinstance(high, bool):
        return 2.0
    if isinstance(low, int) and isinstance(high, int):
        return float(high - low + 1)
    if isinstance(low, datetime.date) and not isinstance(low, datetime.datetime) and \
            isinstance(high, datetime.date) and not isinstance(high, datetime.datetime):
        return float((high - low).days + 1)
    return None


def _bounded(distinct: float | None, rows: int | None, nulls: int | None, low: Any,
             high: Any) -> tuple[float | None, bool]:
    """(distinct count, whether it is only a bound): ``distinct`` (or, unknown, the range's
    room) at most the non-NULL rows and the range's room."""
    room = range_distinct(low, high)
    if distinct is None and room is None:
        return None, False  # the row count alone says nothing about a string column
    candidates = [x for x in (distinct, room) if x is not None]
    if rows is not None:
        candidates.append(float(max(rows - (nulls or 0), 0)))
    return max(min(candidates), 0.0), distinct is None


def from_arrow(values: pa.ChunkedArray | pa.Array) -> ColumnStatistics:
    """Statistics of an in-memory column: min/max in one pass, distinct exact or sampled."""
    if isinstance(values, pa.Array):
        values = pa.chunked_array([values])
    rows, nulls = len(values), values.null_count
    low = high = None
    if rows > nulls and _orderable(values.type):
        bounds = pc.min_max(values)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
    distinct = _distinct(values) if _hashable(values.type) else None
    if distinct is None:
        return ColumnStatistics(low, high, nulls)
    return ColumnStatistics(low, high, nulls, _bounded(distinct, rows, nulls, low, high)[0])


def _orderable(type_: pa.DataType) -> bool:
    # INTERVAL is temporal but Arrow has no min_max for it (and its order is by length)
    return (pa.types.is_integer(type_) or pa.types.is_floating(type_) or
            pa.types.is_decimal(type_) or
            (pa.types.is_temporal(type_) and not pa.types.is_interval(type_)) or
            pa.types.is_string(type_) or pa.types.is_binary(type_) or
            pa.types.is_boolean(type_))


def _hashable(type_: pa.DataType) -> bool:
    return _orderable(type_) or pa.types.is_fixed_size_binary(type_)


def _distinct(values: pa.ChunkedArray) -> float:
    """Distinct non-NULL values: exact for small columns, else estimated from a sample of
    ``SAMPLE_ROWS`` rows spread evenly over the column (a sorted or clustered column fools
    a prefix)."""
    rows = len(values)
    if rows <= EXACT_DISTINCT_ROWS:
        return float(pc.count_distinct(values, mode="only_valid").as_py())
    rng = np.random.default_rng(0x5EED)  # the same estimate every registration
    indices = np.sort(rng.choice(rows, size=SAMPLE_ROWS, replace=False))
    return sampled_distinct(values.take(pa.array(indices)), rows)


def row_sample(values: pa.ChunkedArray | pa.Array, size: int = PREDICATE_SAMPLE_ROWS,
               ) -> pa.ChunkedArray:
    """At most ``size`` rows of ``values``, NULLs included (a predicate's fraction counts
    them as rejected), drawn at random without replacement and kept in order: spread over
    the whole column, so a sorted or clustered column is not judged by its start; the same
    rows every registration (a fixed seed), so plans do not change from run to run.

    Example:
        >>> len(row_sample(pa.array(range(10_000)), 100)), len(row_sample(pa.array([1]), 100))
        (100, 1)
    """
    if isinstance(values, pa.Array):
        values = pa.chunked_array([values])
    rows = len(values)
    if rows <= size:
        return values
    rng = np.random.default_rng(0x5EED)
    return values.take(pa.array(np.sort(rng.choice(rows, size=size, replace=False))))


def sampled_distinct(sample: pa.ChunkedArray | pa.Array, rows: int) -> float:
    """Distinct non-NULL values of a column of ``rows`` rows from a sample of them, with
    Haas et al.'s first-order jackknife, D = d / (1 - (1 - q) f1 / n) ("Sampling-based
    estimation of the number of distinct values of an attribute", VLDB 1995): d distinct
    values among the n non-NULL sampled, f1 of them seen once, q the sampled fraction. A
    key (every sampled value once) gives all rows, a low-cardinality column (none seen
    once) gives d. Only the sample's value counts are needed (vectorized).

    Example:
        >>> round(sampled_distinct(pa.array([1, 2, 3, 4]), 400))
        400
        >>> sampled_distinct(pa.array([1, 1, 2, 2]), 400)
        2.0
    """
    sampled_rows = len(sample)
    sample = pc.drop_null(sample)
    sampled = len(sample)
    if sampled == 0 or sampled_rows == 0:
        return 0.0
    counts = pc.value_counts(sample).field("counts").to_numpy()
    seen, singletons = float(len(counts)), float(np.count_nonzero(counts == 1))
    non_null = max(rows * sampled / sampled_rows, float(sampled))
    q = sampled / non_null
    return min(seen / (1.0 - (1.0 - q) * singletons / sampled), non_null)


def from_row_groups(groups: list[tuple[Any, Any, int | None, int | None]], rows: int,
                    ) -> ColumnStatistics | None:
    """Statistics of a file column from its row groups' (min, max, null count, distinct
    count) (Parquet metadata): None when a row group has no min/max. Distinct counts of row
    groups add up to at most the column's (a key is in one row group); summed, then bounded
    by the range and the rows."""
    if not groups:
        return ColumnStatistics(null_count=0, distinct_count=0.0) if rows == 0 else None
    low = high = None
    nulls: int | None = 0
    distinct: float | None = 0.0
    try:
        for group_low, group_high, group_nulls, group_distinct in groups:
            if group_low is None:
                return None
            low = group_low if low is None or group_low < low else low
            high = group_high if high is None or group_high > high else high
            nulls = None if nulls is None or group_nulls is None else nulls + group_nulls
            distinct = None if distinct is None or group_distinct is None else \
                distinct + group_distinct
    except TypeError:  # incomparable statistics (a type the writer ordered oddly)
        return None
    return ColumnStatistics(low, high, nulls, *_bounded(distinct, rows, nulls, low, high))


def disjoint_ranges(groups: list[tuple[Any, Any]]) -> bool:
    """Whether the (min, max) ranges of several row groups never overlap: the column is
    sorted or clustered, so a key's rows are all in one row group.

    Example:
        >>> disjoint_ranges([(1, 4), (5, 9), (10, 12)]), disjoint_ranges([(1, 6), (5, 9)])
        (True, False)
    """
    if len(groups) < 2:
        return False
    try:
        ordered = sorted(groups, key=lambda g: g[0])
        return all(a[1] < b[0] for a, b in zip(ordered, ordered[1:]))
    except TypeError:
        return False


def clustered_distinct(sample_distinct: int, sample_rows: int, rows: int) -> float:
    """Distinct values of a clustered column (``disjoint_ranges``) from one row group's
    exact count: no key spans two row groups, so distinct values add up over them, and each
    holds about as many per row as the sampled one.

    Example:
        >>> clustered_distinct(28_000, 112_000, 6_000_000)
        1500000.0
    """
    if sample_rows <= 0:
        return 0.0
    return float(sample_distinct) * rows / sample_rows


__all__ = ["ColumnStatistics", "clustered_distinct", "disjoint_ranges", "from_arrow",
           "from_row_groups", "position", "range_distinct", "row_sample", "sampled_distinct"]
