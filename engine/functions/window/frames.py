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

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from plansight.engine.errors import PlanError
from plansight.engine.functions.window.frame_spec import FrameBound, FrameSpec, rows_offset
from plansight.engine.functions.window.peers import PartitionLayout, PeerGroups
from plansight.engine.functions.window.range_search import range_offset_bounds


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
