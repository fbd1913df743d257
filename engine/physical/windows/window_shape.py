"""What every window executor needs to know about a window call and its sorted input.

Where partitions start in sorted rows, whether a frame spans the whole partition, the order
a window reads its rows in (forward, or backwards when the reversed ordering is cheaper), and
the one-line EXPLAIN text. The executors and the spill paths share these, so they live below
all of them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.functions.capabilities import capabilities
from plansight.engine.logical.expr import SortKey, WindowCall


def partition_starts(keys: list[pa.Array], num_rows: int) -> np.ndarray:
    """Start row of every run of equal ``keys`` (NULLs equal each other, NaNs too), plus
    ``num_rows``.

    Example:
        >>> partition_starts([pa.array(["a", "a", None, None, "b"])], 5).tolist()
        [0, 2, 4, 5]
    """
    if num_rows == 0:
        return np.array([0], dtype=np.int64)
    changed = np.zeros(num_rows, dtype=bool)
    changed[0] = True
    for key in keys:
        if num_rows < 2:
            break
        previous, current = key.slice(0, num_rows - 1), key.slice(1)
        differs = pc.not_equal(current, previous)
        if pa.types.is_floating(key.type):
            # NaN equals NaN, whatever its sign bit, as in DuckDB's partitions and peers
            # (IEEE's NaN != NaN made every NaN row a partition of its own)
            both_nan = pc.and_(pc.is_nan(current), pc.is_nan(previous))
            differs = pc.and_(differs, pc.invert(both_nan))
        if key.null_count:
            # NULL vs value differs; NULL vs NULL does not
            null_change = pc.xor(current.is_null(), previous.is_null())
            differs = pc.or_(pc.fill_null(differs, False), null_change)
        changed[1:] |= np.asarray(differs.to_numpy(zero_copy_only=False), dtype=bool)
    return np.append(np.flatnonzero(changed), num_rows).astype(np.int64)




def is_whole_partition(window: WindowCall) -> bool:
    """Whether every row's frame is its whole partition *and* the function ignores row order,
    so the window is one value per partition and needs no ORDER BY at all."""
    if not capabilities(window.func).order_free:
        return False
    frame = window.frame
    if frame is None:
        return not window.order_by
    if frame.exclude != "no_others":
        return False
    start, end = frame.start.kind, frame.end.kind
    if start == "unbounded_preceding" and end == "unbounded_following":
        return True
    if not window.order_by and frame.unit in ("range", "groups"):
        # without ORDER BY all rows of a partition are peers
        return start in ("unbounded_preceding", "current_row") and \
            end in ("current_row", "unbounded_following")
    return False


def sees_tie_order(window: WindowCall) -> bool:
    """Whether the window's values depend on the order of rows that its ORDER BY leaves
    tied (every row of a partition, without ORDER BY): row_number, ntile, lag/lead, the
    frame-value functions, order-dependent aggregates and ROWS frames. Such a window must
    see its input in the source's order, so a query gives one answer at every partition
    count; rank and aggregates over peer-group frames (RANGE, GROUPS, the default) do not.
    """
    if is_whole_partition(window):
        return False
    function = capabilities(window.func)
    if function.frameless:
        return not function.reads_order  # rank and friends read peer groups only
    frame = window.frame
    return not (function.order_free and (frame is None or frame.unit != "rows"))


def describe_window(window: WindowCall) -> str:
    """``func(args) frame`` for EXPLAIN (ranking and lag/lead have no frame)."""
    args = ", ".join(map(str, window.args))
    text = f"{window.func}({args}{' IGNORE NULLS' if window.ignore_nulls else ''})"
    if capabilities(window.func).frameless:
        return text
    frame = window.frame
    if frame is None:
        frame = "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW" if window.order_by else \
            "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
    return f"{text} {frame}"


def reversed_ordering(order_by) -> tuple[SortKey, ...]:
    """The ordering that lists rows backwards: every key flips direction and NULL placement.

    Example:
        >>> from plansight.engine.logical.expr import Column, WindowCall
        >>> x = Column(1, "x", pa.int64())
        >>> [str(k) for k in reversed_ordering((SortKey(x),))]
        ['x DESC NULLS FIRST']
    """
    return tuple(SortKey(k.expr, not k.descending, not k.nulls_first) for k in order_by)


def window_direction(window: WindowCall, order_keys) -> str | None:
    """How rows sorted by ``order_keys`` (within a partition) serve the window's ORDER BY.

    "forward": they are in its order. "backwards": in exactly the reverse order.
    "backwards-nulls": the reverse order except that the first key puts NULLs at the same
    end as ``order_keys`` do (``ORDER BY x DESC NULLS LAST`` over rows sorted by ``x ASC NULLS
    LAST``): reversing the non-NULL run and the NULL run of every partition separately gives
    it. None: a sort is needed.

    Example:
        >>> from plansight.engine.logical.expr import Column, WindowCall
        >>> x = Column(1, "x", pa.int64())
        >>> desc = WindowCall("lag", (x,), pa.int64(), (), (SortKey(x, True),))
        >>> window_direction(desc, (SortKey(x),))
        'backwards-nulls'
    """
    order = tuple(window.order_by)
    if tuple(order_keys[:len(order)]) == order:
        return "forward"
    flipped = reversed_ordering(order_keys)[:len(order)]
    if flipped == order:
        return "backwards"
    if order and len(flipped) == len(order) and flipped[1:] == order[1:] and \
            flipped[0] == SortKey(order[0].expr, order[0].descending, not order[0].nulls_first):
        return "backwards-nulls"
    return None
