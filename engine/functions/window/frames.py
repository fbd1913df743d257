"""Window frames: the validated frame clause and the frame bounds of every row at once.

A frame clause (``FrameSpec``) becomes, for all rows together, a half-open row interval
``[start, end)`` clipped to the row's partition (``end >= start`` always; ``start == end`` is an
empty frame). EXCLUDE then cuts a hole into that interval, so the rows of a frame are up to
three disjoint, ordered *segments*::

    frame        [start .................................. end)
    peer group              [peer_start .. i .. peer_end)
    NO OTHERS    [start .................................. end)
    CURRENT ROW  [start ........... i) (i+1 .............. end)
    GROUP        [start ..) ......................... [.. end)
    TIES         [start ..) ........ [i] ............ [.. end)

Bounds per unit, all vectorized over rows:
  ROWS    integer arithmetic on the row position, clipped to the partition.
  GROUPS  arithmetic on peer-group indices, mapped back to rows with ``group_starts``.
  RANGE   CURRENT ROW = the peer group; offsets search the order key (``range_search``).
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

from plansight.errors import PlanError

from .peers import PartitionLayout, PeerGroups

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


@dataclass(frozen=True, eq=False)
class FrameBounds:
    """Frame rows of every row: ``[start, end)`` and the EXCLUDE-aware ``segments``.

    ``segments`` is a tuple of ``(lo, hi)`` int64 array pairs, ordered and disjoint per row,
    possibly empty (``lo == hi``); their union is the frame after EXCLUDE.
    """

    start: np.ndarray
    end: np.ndarray
    segments: tuple[tuple[np.ndarray, np.ndarray], ...]
    layout: PartitionLayout
    spec: FrameSpec

    @property
    def is_whole_partition(self) -> bool:
        """Every row's frame is its whole partition (nothing excluded)."""
        return (len(self.segments) == 1
                and np.array_equal(self.start, self.layout.row_partition_start)
                and np.array_equal(self.end, self.layout.row_partition_end))

    @property
    def starts_at_partition(self) -> bool:
        """Every frame is one segment starting at its partition start (a growing frame)."""
        return (len(self.segments) == 1
                and np.array_equal(self.start, self.layout.row_partition_start))

    def lengths(self) -> np.ndarray:
        """Number of frame rows of every row (after EXCLUDE)."""
        total = np.zeros(self.layout.num_rows, dtype=np.int64)
        for lo, hi in self.segments:
            total += hi - lo
        return total


def frame_needs_peers(frame: FrameSpec) -> bool:
    """True when the bounds or the exclusion depend on peer groups."""
    if frame.exclude in ("group", "ties"):
        return True
    if frame.unit == "rows":
        return False
    return any(b.kind not in ("unbounded_preceding", "unbounded_following")
               for b in (frame.start, frame.end))


def frame_bounds(frame: FrameSpec, layout: PartitionLayout, peers: PeerGroups | None,
                 order_keys: list[pa.Array], descending: list[bool],
                 nulls_first: list[bool]) -> FrameBounds:
    """Frame start/end and EXCLUDE segments of every row.

    ``peers`` may be None when ``frame_needs_peers(frame)`` is False.

    Example:
        >>> from .peers import partition_layout
        >>> layout = partition_layout(np.array([0, 4]))
        >>> spec = FrameSpec("rows", FrameBound("preceding", 1), FrameBound("following", 1))
        >>> bounds = frame_bounds(spec, layout, None, [], [], [])
        >>> bounds.start.tolist(), bounds.end.tolist()
        ([0, 0, 1, 2], [2, 3, 4, 4])
    """
    if frame.unit == "range" and frame.has_offset and len(order_keys) != 1:
        raise PlanError("RANGE frames with an offset PRECEDING/FOLLOWING must have exactly one "
                        f"ORDER BY expression, got {len(order_keys)} ({frame.sql()})")
    pstart, pend = layout.row_partition_start, layout.row_partition_end
    if frame.unit == "range" and frame.has_offset:
        from .range_search import range_offset_bounds

        start, end = range_offset_bounds(frame, layout, peers, order_keys[0], descending[0],
                                         nulls_first[0])
    else:
        bound = _rows_bound if frame.unit == "rows" else _groups_bound
        start = bound(frame.start, True, layout, peers)
        end = bound(frame.end, False, layout, peers)
    start = np.clip(start, pstart, pend)
    end = np.maximum(np.clip(end, pstart, pend), start)
    return FrameBounds(start, end, _segments(frame.exclude, start, end, layout, peers),
                       layout, frame)


def _rows_bound(bound: FrameBound, is_start: bool, layout: PartitionLayout,
                peers: PeerGroups | None) -> np.ndarray:
    rows = layout.row_index
    if bound.kind == "unbounded_preceding":
        return layout.row_partition_start
    if bound.kind == "unbounded_following":
        return layout.row_partition_end
    step = 0 if bound.kind == "current_row" else _clipped_offset(bound, layout.num_rows)
    if bound.kind == "preceding":
        step = -step
    return rows + step + (0 if is_start else 1)


def _groups_bound(bound: FrameBound, is_start: bool, layout: PartitionLayout,
                  peers: PeerGroups | None) -> np.ndarray:
    if bound.kind == "unbounded_preceding":
        return layout.row_partition_start
    if bound.kind == "unbounded_following":
        return layout.row_partition_end
    assert peers is not None
    if bound.kind == "current_row":
        return peers.peer_start if is_start else peers.peer_end
    step = _clipped_offset(bound, layout.num_rows)
    if bound.kind == "preceding":
        step = -step
    group = peers.group_index + step + (0 if is_start else 1)
    group = np.clip(group, peers.first_group, peers.end_group)
    return peers.group_starts[group]


def _segments(exclude: str, start: np.ndarray, end: np.ndarray, layout: PartitionLayout,
              peers: PeerGroups | None) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    if exclude == "no_others":
        return ((start, end),)
    rows = layout.row_index
    if exclude == "current_row":
        hole_lo, hole_hi = rows, rows + 1
    else:
        assert peers is not None
        hole_lo, hole_hi = peers.peer_start, peers.peer_end
    before_hi = np.maximum(np.minimum(end, hole_lo), start)
    after_lo = np.minimum(np.maximum(start, hole_hi), end)
    if exclude != "ties":
        return ((start, before_hi), (after_lo, end))
    inside = (rows >= start) & (rows < end)
    current_lo = np.where(inside, rows, before_hi)
    current_hi = np.where(inside, rows + 1, before_hi)
    return ((start, before_hi), (current_lo, current_hi), (after_lo, end))


def _clipped_offset(bound: FrameBound, num_rows: int) -> int:
    """A ROWS/GROUPS offset as int, capped so that row arithmetic cannot overflow int64."""
    return min(rows_offset(bound.offset), num_rows + 1)


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
    return math.floor(value + Fraction(1, 2)) if value >= 0 else -math.floor(-value + Fraction(1, 2))


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
    if isinstance(offset, (float, np.floating, decimal.Decimal)) and not math.isfinite(offset):
        raise PlanError(f"{where} must be finite, got {offset!r}")
    if offset < 0:
        raise PlanError(f"{where} cannot be negative, got {offset!r}")


def _offset_sql(offset: object) -> str:
    if isinstance(offset, datetime.timedelta):
        return f"INTERVAL '{offset}'"
    if isinstance(offset, pa.MonthDayNano):
        return (f"INTERVAL '{offset.months} months {offset.days} days "
                f"{offset.nanoseconds} nanoseconds'")
    return str(offset)
