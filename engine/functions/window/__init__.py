"""Vectorized window-function kernels over rows sorted by (partition keys, order keys).

``evaluate_window`` computes one window column for every row of every partition in one pass:
no Python loop per row or per partition. The caller (WindowAggExec) sorts the rows and passes
the partition boundaries; this package derives peer groups (``peers``), frame bounds
(``frames``, ``range_search``) and evaluates the function (``ranking``, ``navigation``,
``aggregates``). Semantics follow DuckDB, including NULL order keys as one peer group,
RANGE offsets over numbers, decimals, dates and timestamps (with intervals), GROUPS, EXCLUDE,
FILTER, DISTINCT and IGNORE NULLS.

    sorted rows ─┬─ partition_layout ─ peer_groups ─┬─ ranking ───────────────┐
                 │                                  ├─ lag / lead ────────────┤
                 └─ frame_bounds (ROWS|RANGE|GROUPS, EXCLUDE) ─┬─ first/last/nth ─┤─> pa.Array
                                                               └─ aggregates ─────┘

For unsorted input the caller does not sort the rows themselves: ``permutation`` turns
partition keys into integer codes and order keys into integer ranks and radix-sorts them
into one permutation (only the key and argument arrays are permuted), and ``broadcast``
evaluates whole-partition aggregates straight on the codes, without any permutation.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plansight.engine.errors import PlanError
from plansight.engine.functions.window.aggregates import AGGREGATE_FUNCTIONS, evaluate_aggregate
from plansight.engine.functions.window.frame_spec import (
    DEFAULT_FRAME_WITH_ORDER,
    WHOLE_PARTITION,
    FrameBound,
    FrameSpec,
)
from plansight.engine.functions.window.frames import FrameBounds, frame_bounds, frame_needs_peers
from plansight.engine.functions.window.navigation import NAVIGATION_FUNCTIONS, frame_value, lag_lead
from plansight.engine.functions.window.peers import (
    PartitionLayout,
    PeerGroups,
    as_array,
    partition_layout,
    peer_groups,
)
from plansight.engine.functions.window.ranking import RANKING_FUNCTIONS, ranking
from plansight.engine.functions.window.types import WINDOW_FUNCTIONS, window_return_type

__all__ = [
    "DEFAULT_FRAME_WITH_ORDER",
    "WHOLE_PARTITION",
    "WINDOW_FUNCTIONS",
    "FrameBound",
    "FrameBounds",
    "FrameSpec",
    "PartitionLayout",
    "PeerGroups",
    "evaluate_window",
    "frame_bounds",
    "partition_layout",
    "peer_groups",
    "window_return_type",
]

_IGNORE_NULLS_FUNCTIONS = ("lag", "lead", "first_value", "last_value", "nth_value")
_DISTINCT_FUNCTIONS = tuple(f for f in AGGREGATE_FUNCTIONS if f != "count_star")


def evaluate_window(func: str, args: list[pa.Array], *, partition_starts: np.ndarray,
                    order_keys: list[pa.Array], descending: list[bool], nulls_first: list[bool],
                    frame: FrameSpec | None, distinct: bool = False, ignore_nulls: bool = False,
                    filter_mask: pa.Array | None = None) -> pa.Array:
    """One window column aligned with rows sorted by (partition keys, order keys).

    Args:
        func: lower-case function name (``count_star`` for ``count(*)``).
        args: argument arrays, one value per row (constants too).
        partition_starts: int64 start row of every partition plus the row count as last element.
        order_keys: ORDER BY columns, already sorted within partitions, DuckDB-style: NaN
            above every number (``pc.sort_indices`` puts NaN next to the NULLs instead).
        descending, nulls_first: sort direction and NULL placement of every order key.
        frame: the frame clause; None means the SQL default (RANGE UNBOUNDED PRECEDING ..
            CURRENT ROW with order keys, the whole partition without).
        distinct: ``f(DISTINCT x)`` (aggregates).
        ignore_nulls: ``IGNORE NULLS`` (lag, lead, first_value, last_value, nth_value).
        filter_mask: ``FILTER (WHERE ...)``: rows where it is not true do not contribute.

    Example:
        >>> starts = np.array([0, 3, 5])
        >>> spec = FrameSpec("rows", FrameBound("preceding", 1), FrameBound("current_row"))
        >>> evaluate_window("sum", [pa.array([1.0, 2, 3, 10, 20])], partition_starts=starts,
        ...                 order_keys=[], descending=[], nulls_first=[], frame=spec).to_pylist()
        [1.0, 3.0, 5.0, 10.0, 30.0]
    """
    name = func.lower()
    layout = partition_layout(partition_starts)
    # a constant may arrive as a scalar: broadcast it
    args = [pa.repeat(a, layout.num_rows) if isinstance(a, pa.Scalar) else as_array(a)
            for a in args]
    args = [a.dictionary_decode() if pa.types.is_dictionary(a.type) else a for a in args]
    order_keys = [as_array(k) for k in order_keys]
    result_type = window_return_type(name, [a.type for a in args])
    _check_inputs(name, args, layout, order_keys, descending, nulls_first, distinct,
                  ignore_nulls, filter_mask)
    if frame is not None and not isinstance(frame, FrameSpec):
        raise PlanError(f"frame must be a FrameSpec or None, got {type(frame).__name__}")
    if frame is None:
        frame = DEFAULT_FRAME_WITH_ORDER if order_keys else WHOLE_PARTITION
    if layout.num_rows == 0:
        if frame.unit == "range" and frame.has_offset and len(order_keys) != 1:
            frame_bounds(frame, layout, None, order_keys, descending, nulls_first)
        return pa.array([], type=result_type)

    if name in RANKING_FUNCTIONS:
        needs_peers = name not in ("row_number", "ntile")
        peers = peer_groups(layout, order_keys) if needs_peers else None
        return ranking(name, args, layout, peers).cast(result_type)
    if name in ("lag", "lead"):
        return lag_lead(name, args, layout, ignore_nulls).cast(result_type)

    peers = peer_groups(layout, order_keys) if frame_needs_peers(frame) else None
    bounds = frame_bounds(frame, layout, peers, order_keys, descending, nulls_first)
    if name in NAVIGATION_FUNCTIONS:
        return frame_value(name, args, bounds, ignore_nulls).cast(result_type)
    return evaluate_aggregate(name, args, bounds, distinct=distinct, filter_mask=filter_mask,
                              result_type=result_type)


def _check_inputs(name: str, args: list[pa.Array], layout: PartitionLayout,
                  order_keys: list[pa.Array], descending: list[bool], nulls_first: list[bool],
                  distinct: bool, ignore_nulls: bool, filter_mask: pa.Array | None) -> None:
    n = layout.num_rows
    for i, arg in enumerate(args):
        if len(arg) != n:
            raise PlanError(f"argument {i + 1} of {name}() has {len(arg)} rows, expected {n}")
    for i, key in enumerate(order_keys):
        if len(key) != n:
            raise PlanError(f"ORDER BY key {i + 1} has {len(key)} rows, expected {n}")
    if len(descending) != len(order_keys) or len(nulls_first) != len(order_keys):
        raise PlanError("descending and nulls_first need one entry per ORDER BY key")
    if filter_mask is not None and name not in AGGREGATE_FUNCTIONS:
        raise PlanError(f'FILTER is not implemented for the window function "{name}"')
    if ignore_nulls and name not in _IGNORE_NULLS_FUNCTIONS:
        raise PlanError(f"IGNORE NULLS is not supported for {name}(); only for "
                        f"{', '.join(_IGNORE_NULLS_FUNCTIONS)}")
    if distinct and name not in _DISTINCT_FUNCTIONS:
        raise PlanError(f"DISTINCT is not supported for {name}()")
