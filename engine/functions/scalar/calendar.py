"""Vectorized calendar arithmetic on numpy integer arrays (days since 1970-01-01, microseconds).

Arrow has no kernel for "date + 1 month" with month-end clamping (1995-01-31 + 1 month =
1995-02-28), and none for building dates from parts, so these use the proleptic-Gregorian
civil-day formulas (H. Hinnant, "chrono-compatible low-level date algorithms"), valid for
every year.

Intervals are Arrow ``month_day_nano`` values: three independent fields, stored as 16-byte
records (int32 months, int32 days, int64 nanoseconds), read and written here without a Python
loop through a numpy structured view of the buffer.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

MICROS_PER_DAY = 86_400_000_000
NANOS_PER_DAY = 86_400_000_000_000

_INTERVAL_DTYPE = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")])
INTERVAL = pa.month_day_nano_interval()


def days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of year/month/day arrays (int64)."""
    y = np.asarray(y, dtype=np.int64) - (np.asarray(m) <= 2)
    m = np.asarray(m, dtype=np.int64)
    d = np.asarray(d, dtype=np.int64)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + np.where(m > 2, -3, 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Year, month, day arrays of days since 1970-01-01."""
    z = np.asarray(z, dtype=np.int64) + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = np.where(mp < 10, mp + 3, mp - 9)
    return y + (m <= 2), m, d


def is_leap(y: np.ndarray) -> np.ndarray:
    return (y % 4 == 0) & ((y % 100 != 0) | (y % 400 == 0))


_MONTH_DAYS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])


def days_in_month(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    m = np.clip(np.asarray(m, dtype=np.int64), 1, 12)
    return _MONTH_DAYS[m - 1] + ((m == 2) & is_leap(np.asarray(y, dtype=np.int64)))


def add_months(days: np.ndarray, months: np.ndarray) -> np.ndarray:
    """``days`` moved by ``months`` calendar months, clamping to the month end."""
    y, m, d = civil_from_days(days)
    total = y * 12 + (m - 1) + np.asarray(months, dtype=np.int64)
    ny, nm = total // 12, total % 12 + 1
    return days_from_civil(ny, nm, np.minimum(d, days_in_month(ny, nm)))


def interval_parts(array: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(months, days, nanoseconds, valid) arrays of a month_day_nano array; nulls read 0."""
    n = len(array)
    data = array.buffers()[1]
    records = np.frombuffer(data, dtype=_INTERVAL_DTYPE, count=n + array.offset)[array.offset:]
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    months = np.where(valid, records["months"], 0).astype(np.int64)
    days = np.where(valid, records["days"], 0).astype(np.int64)
    nanos = np.where(valid, records["nanos"], 0).astype(np.int64)
    return months, days, nanos, valid


def interval_order_parts(array: pa.Array) -> list[pa.Array]:
    """Two int64 columns, (whole days, nanoseconds into the day), that order an INTERVAL as
    DuckDB does: by its length with a month = 30 days and a day = 24 hours.

    DuckDB compares the normalized total exactly (1 month, 30 days and 720 hours are equal;
    so are 29 days 30 hours and 1 month 6 hours); the total in nanoseconds overflows int64
    after 292 years, these two parts cannot.

    Example:
        >>> import pyarrow as pa
        >>> parts = interval_order_parts(pa.array(
        ...     [pa.MonthDayNano([0, 29, 30 * 3600 * 10**9]), pa.MonthDayNano([0, 0, -1]), None],
        ...     pa.month_day_nano_interval()))
        >>> [p.to_pylist() for p in parts]
        [[30, -1, None], [21600000000000, 86399999999999, None]]
    """
    months, days, nanos, valid = interval_parts(array)
    whole_days = months * 30 + days + nanos // NANOS_PER_DAY  # floor: -1 ns is day -1
    mask = None if valid.all() else ~valid
    return [pa.array(whole_days, pa.int64(), mask=mask),
            pa.array(nanos % NANOS_PER_DAY, pa.int64(), mask=mask)]


def make_intervals(months: np.ndarray, days: np.ndarray, nanos: np.ndarray,
                   valid: np.ndarray | None = None) -> pa.Array:
    """A month_day_nano array from field arrays; rows where ``valid`` is False are null."""
    n = len(months)
    records = np.zeros(n, dtype=_INTERVAL_DTYPE)
    records["months"], records["days"], records["nanos"] = months, days, nanos
    validity = None
    null_count = 0
    if valid is not None and not np.all(valid):
        validity = pa.py_buffer(np.packbits(valid.astype(np.uint8), bitorder="little"))
        null_count = int(n - np.count_nonzero(valid))
    return pa.Array.from_buffers(INTERVAL, n, [validity, pa.py_buffer(records.tobytes())],
                                 null_count=null_count)
