"""The window frame clause, validated: ``FrameSpec`` (unit, start and end bounds, EXCLUDE).

What a frame *is*, apart from what it selects: ``frames`` turns a spec into row bounds,
``range_search`` searches the order key for RANGE offsets; both read the spec from here.
"""

from __future__ import annotations

import datetime
import decimal
import math
import numbers
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyarrow as pa

from plansight.engine.errors import PlanError

BOUND_KINDS = ("unbounded_preceding", "preceding", "current_row", "following",
               "unbounded_following")
UNITS = ("rows", "range", "groups")
EXCLUDE_MODES = ("no_others", "current_row", "group", "ties")


@dataclass(frozen=True)
class FrameBound:
    """One end of a frame: ``kind`` in BOUND_KINDS; ``offset`` for preceding/following.

    Example:
        >>> FrameBound("preceding", 3)
        FrameBound(kind='preceding', offset=3)
    """

    kind: str
    offset: object = None

    def __post_init__(self) -> None:
        if self.kind not in BOUND_KINDS:
            raise PlanError(f"unknown frame bound {self.kind!r}; expected one of "
                            f"{', '.join(BOUND_KINDS)}")
        has_offset = self.kind in ("preceding", "following")
        if has_offset and self.offset is None:
            raise PlanError(f"frame bound {self.kind.upper()} needs an offset, and the offset "
                            "cannot be NULL")
        if not has_offset and self.offset is not None:
            raise PlanError(f"frame bound {self.sql()} takes no offset")

    def sql(self) -> str:
        """The bound as SQL text, e.g. ``3 PRECEDING``."""
        words = self.kind.replace("_", " ").upper()
        return f"{_offset_sql(self.offset)} {words}" if self.offset is not None else words


@dataclass(frozen=True)
class FrameSpec:
    """A validated frame clause: ``unit BETWEEN start AND end EXCLUDE exclude``.

    Raises PlanError for frames SQL rejects (start UNBOUNDED FOLLOWING, end UNBOUNDED
    PRECEDING, a start after the end by kind, negative or non-finite offsets, ...).

    Example:
        >>> FrameSpec("rows", FrameBound("preceding", 2), FrameBound("current_row")).sql()
        'ROWS BETWEEN 2 PRECEDING AND CURRENT ROW'
    """

    unit: str
    start: FrameBound
    end: FrameBound
    exclude: str = "no_others"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise PlanError(f"unknown frame unit {self.unit!r}; expected rows, range or groups")
        if self.exclude not in EXCLUDE_MODES:
            raise PlanError(f"unknown frame exclusion {self.exclude!r}; expected one of "
                            f"{', '.join(EXCLUDE_MODES)}")
        if not isinstance(self.start, FrameBound) or not isinstance(self.end, FrameBound):
            raise PlanError("frame start and end must be FrameBound objects")
        start, end = self.start.kind, self.end.kind
        if start == "unbounded_following":
            raise PlanError("Frame start cannot be UNBOUNDED FOLLOWING")
        if end == "unbounded_preceding":
            raise PlanError("Frame end cannot be UNBOUNDED PRECEDING")
        if start == "current_row" and end == "preceding":
            raise PlanError("Frame starting from current row cannot have preceding rows")
        if start == "following" and end in ("preceding", "current_row"):
            raise PlanError("Frame starting from following row cannot have preceding rows")
        for bound in (self.start, self.end):
            if bound.offset is not None:
                _validate_offset(self.unit, bound)

    def sql(self) -> str:
        """The frame clause as SQL text."""
        text = f"{self.unit.upper()} BETWEEN {self.start.sql()} AND {self.end.sql()}"
        if self.exclude != "no_others":
            text += " EXCLUDE " + self.exclude.replace("_", " ").upper()
        return text

    def __str__(self) -> str:
        return self.sql()

    @property
    def has_offset(self) -> bool:
        """True when a bound is ``<offset> PRECEDING/FOLLOWING``."""
        return self.start.offset is not None or self.end.offset is not None


DEFAULT_FRAME_WITH_ORDER = FrameSpec("range", FrameBound("unbounded_preceding"),
                                     FrameBound("current_row"))
WHOLE_PARTITION = FrameSpec("rows", FrameBound("unbounded_preceding"),
                            FrameBound("unbounded_following"))



def rows_offset(offset: object) -> int:
    """A ROWS/GROUPS offset as a non-negative int (DuckDB rounds a fractional one)."""
    if isinstance(offset, pa.Scalar):
        offset = offset.as_py()
    if isinstance(offset, (bool, np.bool_)) or not isinstance(offset, (numbers.Real,
                                                                       decimal.Decimal)):
        raise PlanError(f"ROWS/GROUPS frame offset must be an integer, got {offset!r}")
    if isinstance(offset, numbers.Integral):
        return int(offset)
    value = exact_number(offset)
    if value is None:
        raise PlanError(f"ROWS/GROUPS frame offset must be finite, got {offset!r}")
    # a cast to BIGINT rounds half away from zero
    half = Fraction(1, 2)
    return math.floor(value + half) if value >= 0 else -math.floor(-value + half)


def exact_number(value: object) -> Fraction | None:
    """``value`` as an exact Fraction; floats by their shortest repr (as the SQL literal was
    written); None for NaN / infinity."""
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            return None
        return Fraction(decimal.Decimal(repr(float(value))))
    if isinstance(value, decimal.Decimal):
        return Fraction(value) if value.is_finite() else None
    return Fraction(value)


def _validate_offset(unit: str, bound: FrameBound) -> None:
    offset = bound.offset
    if isinstance(offset, pa.Scalar):
        if not offset.is_valid:
            raise PlanError(f"Window {unit.upper()} {bound.kind.upper()} offset cannot be NULL")
        offset = offset.as_py()
    where = f"Window {unit.upper()} {bound.kind.upper()} offset"
    if unit in ("rows", "groups"):
        if rows_offset(offset) < 0:
            raise PlanError(f"{where} cannot be negative, got {_offset_sql(offset)}")
        return
    if isinstance(offset, datetime.timedelta):
        if offset < datetime.timedelta(0):
            raise PlanError(f"{where} cannot be negative, got {offset}")
        return
    if isinstance(offset, pa.MonthDayNano):
        if offset.months < 0 or offset.days < 0 or offset.nanoseconds < 0:
            raise PlanError(f"{where} cannot be a negative interval, got {offset}")
        return
    if isinstance(offset, (bool, np.bool_)) or not isinstance(offset, (numbers.Real,
                                                                       decimal.Decimal)):
        raise PlanError(f"{where} must be a number or an interval, got {offset!r}")
    if isinstance(offset, (float, np.floating, decimal.Decimal)) and math.isnan(offset):
        raise PlanError(f"{where} cannot be NaN")
    if offset < 0:
        raise PlanError(f"{where} cannot be negative, got {offset!r}")


def _offset_sql(offset: object) -> str:
    if isinstance(offset, datetime.timedelta):
        return f"INTERVAL '{offset}'"
    if isinstance(offset, pa.MonthDayNano):
        return (f"INTERVAL '{offset.months} months {offset.days} days "
                f"{offset.nanoseconds} nanoseconds'")
    return str(offset)
