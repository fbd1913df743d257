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

from collections.abc import Callable
from functools import cached_property

import numpy as np
import pyarrow as pa

from plansight.engine.errors import PlanError
from plansight.engine.functions.window.frame_spec import FrameBound, FrameSpec, rows_offset
from plansight.engine.functions.window.peers import PartitionLayout, PeerGroups
from plansight.engine.functions.window.range_search import range_offset_bounds

_Segments = tuple[tuple[np.ndarray, np.ndarray], ...]


class FrameBounds:
    """Frame rows of every row: ``[start, end)`` and the EXCLUDE-aware ``segments``.

    ``segments`` is a tuple of ``(lo, hi)`` int64 array pairs, ordered and disjoint per row,
    possibly empty (``lo == hi``); their union is the frame after EXCLUDE.

    The per-row arrays are computed on first use: a fixed-width ROWS frame evaluated by a
    sliding kernel (``sliding``) needs only the spec and the partition starts, and building
    ``start``/``end``/``segments`` for it cost more than the kernel itself.
    """

    def __init__(self, layout: PartitionLayout, spec: FrameSpec,
                 compute: Callable[[], tuple[np.ndarray, np.ndarray, _Segments]]):
        self.layout, self.spec = layout, spec
        self._compute = compute

    @cached_property
    def _arrays(self) -> tuple[np.ndarray, np.ndarray, _Segments]:
        return self._compute()

    @property
    def start(self) -> np.ndarray:
        return self._arrays[0]

    @property
    def end(self) -> np.ndarray:
        return self._arrays[1]

    @property
    def segments(self) -> _Segments:
        return self._arrays[2]

    @cached_property
    def fixed_extent(self) -> tuple[int, int] | None:
        """``(before, after)`` when every frame is rows ``[i - before, i + after]`` clipped
        to its partition, without EXCLUDE (read off the spec: no per-row array)."""
        return rows_extent(self.spec, self.layout.num_rows)

    @cached_property
    def is_whole_partition(self) -> bool:
        """Every row's frame is its whole partition (nothing excluded)."""
        extent = self.fixed_extent
        if extent is not None:
            # row p of an s-row partition sees [p - before, p + after]: all of it for every
            # p exactly when both reach s - 1 rows
            return self.layout.longest_partition - 1 <= min(extent)
        return (len(self.segments) == 1
                and np.array_equal(self.start, self.layout.row_partition_start)
                and np.array_equal(self.end, self.layout.row_partition_end))

    @property
    def starts_at_partition(self) -> bool:
        """Every frame is one segment starting at its partition start (a growing frame)."""
        return (len(self.segments) == 1
                and np.array_equal(self.start, self.layout.row_partition_start))

    @cached_property
    def max_length(self) -> int:
        """Rows of the longest frame (after EXCLUDE)."""
        extent = self.fixed_extent
        if extent is not None:  # a frame is the partition, capped at the frame's width
            return min(self.layout.longest_partition, extent[0] + extent[1] + 1)
        longest = 0
        for lo, hi in self.segments:
            if len(lo):
                longest = max(longest, int((hi - lo).max()))
        return longest

    def lengths(self) -> np.ndarray:
        """Number of frame rows of every row (after EXCLUDE)."""
        extent = self.fixed_extent
        if extent is not None:  # the rows before and after the current one, clipped
            layout = self.layout
            rows = layout.row_index
            before = np.minimum(rows - layout.row_partition_start, extent[0])
            after = np.minimum(layout.row_partition_end - 1 - rows, extent[1])
            return before + after + 1
        total = np.zeros(self.layout.num_rows, dtype=np.int64)
        for lo, hi in self.segments:
            total += hi - lo
        return total


_UNBOUNDED = 2**62  # an unbounded side of a ROWS frame reaches past every partition


def rows_extent(spec: FrameSpec, num_rows: int) -> tuple[int, int] | None:
    """``(before, after)`` rows around the current one when ``spec`` is a ROWS frame from
    PRECEDING/CURRENT ROW to CURRENT ROW/FOLLOWING (either side may be unbounded: a huge
    count) without EXCLUDE; None for any other frame.

    Example:
        >>> rows_extent(FrameSpec("rows", FrameBound("preceding", 100),
        ...                       FrameBound("current_row")), 1000)
        (100, 0)
    """
    if spec.unit != "rows" or spec.exclude != "no_others" or \
            spec.start.kind not in ("unbounded_preceding", "preceding", "current_row") or \
            spec.end.kind not in ("current_row", "following", "unbounded_following"):
        return None

    def rows(bound: FrameBound) -> int:
        if bound.kind.startswith("unbounded"):
            return _UNBOUNDED
        return 0 if bound.kind == "current_row" else _clipped_offset(bound, num_rows)
    return rows(spec.start), rows(spec.end)


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

    def compute() -> tuple[np.ndarray, np.ndarray, _Segments]:
        pstart, pend = layout.row_partition_start, layout.row_partition_end
        if frame.unit == "range" and frame.has_offset:
            start, end = range_offset_bounds(frame, layout, peers, order_keys[0],
                                             descending[0], nulls_first[0])
        else:
            bound = _rows_bound if frame.unit == "rows" else _groups_bound
            start = bound(frame.start, True, layout, peers)
            end = bound(frame.end, False, layout, peers)
        start = np.clip(start, pstart, pend)
        end = np.maximum(np.clip(end, pstart, pend), start)
        return start, end, _segments(frame.exclude, start, end, layout, peers)

    return FrameBounds(layout, frame, compute)


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
