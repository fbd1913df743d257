"""Dynamic filters: a range on one column that tightens while the query runs.

    SortExec TopK(k) ──threshold after each cut──┐
    HashJoinExec build ──min/max of build keys───┤
                                                 ▼
    DataSourceExec: skip row groups whose min/max statistics fall outside, drop the rows of
    each batch that fall outside, before anything above sees them.

Only rows that could never reach the output are dropped: a top-k keeps ties (the bound is
inclusive) and NULLs are never filtered by a top-k bound (they may sort first); a join
filter is attached only to joins that drop unmatched probe rows.
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


class DynamicFilter:
    """``low <= column <= high`` with bounds that only ever tighten (either may be None)."""

    def __init__(self, origin: str, keep_nulls: bool):
        self.origin, self.keep_nulls = origin, keep_nulls
        self.low: Any = None
        self.high: Any = None
        self.empty = False  # e.g. an empty join build side: nothing can match
        self.run: Any = None  # the TaskContext whose bounds these are
        self._lock = threading.Lock()

    def start(self, ctx: Any) -> None:
        """Forget bounds from an earlier run of the same plan."""
        with self._lock:
            if self.run is not ctx:
                self.run, self.low, self.high, self.empty = ctx, None, None, False

    def applies_to(self, ctx: Any) -> bool:
        return self.run is ctx and self.active

    @property
    def active(self) -> bool:
        return self.empty or self.low is not None or self.high is not None

    def tighten(self, low: Any = None, high: Any = None) -> None:
        with self._lock:
            if low is not None and (self.low is None or low > self.low):
                self.low = low
            if high is not None and (self.high is None or high < self.high):
                self.high = high

    def unit_may_match(self, stats: tuple[Any, Any, int] | None) -> bool:
        """False only when row-group statistics prove no row can pass."""
        if self.empty:
            return False
        if stats is None:
            return True
        low, high, nulls = stats
        if nulls and self.keep_nulls:
            return True
        if isinstance(low, float) or isinstance(high, float):
            return True  # float statistics leave NaN out, and NaN equals NaN in SQL joins
        try:
            if self.high is not None and low > self.high:
                return False
            if self.low is not None and high < self.low:
                return False
        except TypeError:
            return True
        return True

    def mask(self, column: pa.Array) -> pa.Array | None:
        """Rows of ``column`` that may pass (None: all of them)."""
        if not self.active:
            return None
        if self.empty:
            return pa.repeat(pa.scalar(False), len(column))
        low, high = self.low, self.high
        keep = None
        try:
            if column.null_count == 0 and not pa.types.is_floating(column.type):
                present = pc.min_max(column)
                lo, hi = present["min"].as_py(), present["max"].as_py()
                if lo is not None and (low is None or lo >= low) and \
                        (high is None or hi <= high):
                    return None  # the whole batch is inside: nothing to drop
            if low is not None:
                keep = pc.greater_equal(column, pa.scalar(low, column.type))
            if high is not None:
                upper = pc.less_equal(column, pa.scalar(high, column.type))
                keep = upper if keep is None else pc.and_(keep, upper)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        if keep is None:
            return None
        if pa.types.is_floating(column.type):
            keep = pc.or_(keep, pc.is_nan(column))  # NaN compares false but joins NaN
        return pc.fill_null(keep, self.keep_nulls)

    def describe(self) -> str:
        bounds = [f">= {self.low!r}" if self.low is not None else "",
                  f"<= {self.high!r}" if self.high is not None else ""]
        text = " AND ".join(b for b in bounds if b) or "pending"
        return f"{self.origin}: {'empty' if self.empty else text}"
