"""BoundedWindowAggExec: streaming windows whose frames end a bounded distance ahead.

Over input sorted by (partition keys, order keys), a row's window value is final as soon as
its frame end has arrived — for ``ROWS BETWEEN 100 PRECEDING AND CURRENT ROW`` at once, for
``... AND 3 FOLLOWING`` three rows later, for the ORDER BY default frame (RANGE ... CURRENT
ROW) when its peer group is complete — even inside one huge partition. And a row no future
frame can reach can be dropped. Per input batch, vectorized (one evaluate_window call per
window on the whole buffer, never a loop per row)::

    buffer = [ kept context | new batch ]
                 │   e            r           L
    rows         ├───┼────────────┼───────────┤
                 │ emitted │ ready: emit now  │ frame end not arrived yet
                 └─ keep from min(need(r)): rows [.., keep) are dropped

    need(r)  ROWS n PRECEDING: r - n      lag(k): r - k      rank/dense_rank and RANGE
             CURRENT ROW starts: start of r's peer group     GROUPS / RANGE offsets: the
             frame start of r, searched in the buffer     UNBOUNDED PRECEDING (carried):
             min(r, frame end of r)     anything else: r
    ready    ROWS .. n FOLLOWING: i + n < L     lead(k): i + k < L
             RANGE .. CURRENT ROW: i's peer group is not the buffer's last one
             GROUPS / RANGE offsets: i's frame ends before the buffer does

The buffer's first partition may be cut: rows of it were dropped. Carried state makes that
invisible: row_number / rank add the dropped row count, dense_rank the dropped peer groups,
and aggregates over frames starting at UNBOUNDED PRECEDING (running count / sum / avg /
min / max) combine the buffer's running value with the aggregate of the dropped rows. So a
row may be carried only once it lies inside the frame of every row still to come: a frame
ending ``3 PRECEDING`` keeps the last three rows even though their own values are final.
The last row is always kept, so the next batch can tell whether it continues the partition
and its peer group.

Whether a frame is complete and where it starts are the same monotone frame bounds the
partition-at-a-time executor computes (``frame_bounds``): for GROUPS frames and RANGE offsets
they are searched in the buffer, once per round — a frame end inside the buffer is final,
because every row still to come sorts after it.

Supported (``bounded_supported``): row_number, rank, dense_rank; lag / lead with constant
offsets; count(*), count, sum, avg, min, max (FILTER allowed, no DISTINCT) and first_value /
last_value / nth_value (also IGNORE NULLS: it only looks inside the frame; these need a
bounded start) over ROWS, GROUPS and RANGE frames with a bounded end and no EXCLUDE.
Everything else (frames to UNBOUNDED FOLLOWING, EXCLUDE, lag/lead IGNORE NULLS, DISTINCT)
uses the partition-at-a-time WindowAggExec.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import PlanError
from plansight.engine.functions.capabilities import capabilities
from plansight.engine.functions.window import (
    DEFAULT_FRAME_WITH_ORDER,
    FrameBounds,
    FrameSpec,
    evaluate_window,
    frame_bounds,
    partition_layout,
    peer_groups,
)
from plansight.engine.functions.window.frame_spec import rows_offset
from plansight.engine.logical.expr import Column, Literal, SortKey, WindowCall
from plansight.engine.physical.expressions import evaluate, evaluate_predicate
from plansight.engine.physical.plan import SINGLE_PARTITION, ExecutionPlan, hash_distribution
from plansight.engine.physical.windows.window_shape import describe_window, partition_starts


def _streams(func: str) -> str | None:
    """How this executor streams ``func`` (see functions/capabilities.py), or None."""
    return capabilities(func).streams


def _frame(window: WindowCall) -> FrameSpec:
    return window.frame if window.frame is not None else DEFAULT_FRAME_WITH_ORDER


def _searched(frame: FrameSpec) -> bool:
    """GROUPS frames and RANGE offsets: where a frame starts and ends depends on the keys,
    so the buffer's frame bounds are computed rather than read off the row number."""
    return frame.unit == "groups" or (frame.unit == "range" and frame.has_offset)


def _constant_offset(window: WindowCall) -> int | None:
    """lag/lead offset as a non-negative int, or None when it is not a constant."""
    if len(window.args) < 2:
        return 1
    arg = window.args[1]
    if not isinstance(arg, Literal) or not isinstance(arg.value, int) or arg.value < 0:
        return None
    return int(arg.value)


def bounded_supported(window: WindowCall) -> bool:
    """Whether BoundedWindowAggExec can stream ``window`` (see the module docstring)."""
    func = window.func
    if window.distinct or not window.order_by:
        return False
    # IGNORE NULLS looks only inside the frame for these; lag/lead would look back unboundedly
    if window.ignore_nulls and _streams(func) != "frame_value":
        return False
    if _streams(func) == "rank":
        return True
    if _streams(func) == "offset":
        return _constant_offset(window) is not None and \
            all(isinstance(a, Literal) for a in window.args[2:])
    if _streams(func) not in ("running", "frame_value"):
        return False
    frame = _frame(window)
    if frame.exclude != "no_others":
        return False
    start, end = frame.start.kind, frame.end.kind
    if end == "unbounded_following":
        return False
    if start == "unbounded_preceding" and not _carries(window):
        return False
    if frame.unit == "rows" or _searched(frame):
        return True
    return end == "current_row" and start in ("unbounded_preceding", "current_row")


def _carries(window: WindowCall) -> bool:
    """Whether the aggregate of dropped rows can be carried as a few numbers."""
    if window.func in ("count_star", "count"):
        return True
    if _streams(window.func) != "running":
        return False
    typ = window.args[0].type
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    numeric = pa.types.is_integer(typ) or pa.types.is_floating(typ)
    if window.func in ("sum", "avg"):
        return (numeric or pa.types.is_boolean(typ)) and not (
            pa.types.is_uint64(typ) or pa.types.is_float16(typ))
    return (numeric or pa.types.is_date(typ) or pa.types.is_timestamp(typ)) and \
        not pa.types.is_float16(typ)


@dataclass
class _Carry:
    """Aggregate of the dropped rows of the open partition, for an UNBOUNDED PRECEDING frame."""

    count: int = 0
    total: float | int = 0
    extreme: object = None  # min/max so far (python number), None if nothing contributed


@dataclass
class _OpenPartition:
    """What the buffer's first partition lost to dropping (zero when nothing was dropped)."""

    rows: int = 0  # dropped rows of the partition
    dense: int = 0  # dense rank of the buffer's first row, minus one
    carries: dict[int, _Carry] = field(default_factory=dict)


class BoundedWindowAggExec(ExecutionPlan):
    """Streaming windows over sorted input; emits rows as soon as their frames are complete."""

    name = "BoundedWindowAggExec"

    def __init__(self, windows: list[WindowCall], outputs: list[Column], input: ExecutionPlan,
                 partition_ordering=None, tiebreak=()):
        fields = list(input.schema) + [pa.field(o.field_name, o.type) for o in outputs]
        super().__init__(pa.schema(fields))
        self.windows, self.outputs, self.input = list(windows), list(outputs), input
        self.partition_by = list(windows[0].partition_by)
        self.order_by = list(windows[0].order_by)
        #: sort keys required after the ORDER BY that only order tied rows (a source position)
        self.tiebreak = tuple(tiebreak)
        # any permutation of the partition keys, in any direction, groups the partitions
        self.partition_ordering = [SortKey(e) for e in self.partition_by] \
            if partition_ordering is None else list(partition_ordering)
        if {k.expr for k in self.partition_ordering} != set(self.partition_by) or \
                len(self.partition_ordering) != len(self.partition_by):
            raise PlanError("BoundedWindowAggExec: partition ordering must sort by the "
                            "partition keys")
        for window in self.windows:
            if not bounded_supported(window):
                raise PlanError(f"BoundedWindowAggExec cannot stream {window}")
            if tuple(window.partition_by) != tuple(self.partition_by) or \
                    tuple(window.order_by) != tuple(self.order_by):
                raise PlanError("BoundedWindowAggExec: all windows need the same PARTITION BY "
                                "and ORDER BY")

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return BoundedWindowAggExec(self.windows, self.outputs, children[0],
                                    self.partition_ordering, self.tiebreak)

    def required_input_distribution(self):
        if not self.partition_by:
            return [SINGLE_PARTITION]
        return [hash_distribution(self.partition_by)]

    def required_input_ordering(self):
        return [tuple(self.partition_ordering + self.order_by) + self.tiebreak]

    def maintains_input_order(self):
        return [True]

    def display(self) -> str:
        windows = ", ".join(describe_window(w) for w in self.windows)
        return f"BoundedWindowAggExec: mode=bounded-streaming, wdw=[{windows}]"

    # -- execution ------------------------------------------------------------
    def _execute(self, partition, ctx):
        metrics = ctx.metrics.for_partition(self.operator_id, self.name, partition)
        reservation = ctx.memory_pool.register(f"{self.name}[{partition}]", metrics=metrics)
        floor = reservation.reserve_floor(self.input.output_partitioning().count)
        buffer: pa.Table | None = None
        emitted = 0  # rows at the buffer's front already emitted
        state = _OpenPartition()
        stream = self.input.execute(partition, ctx)
        try:
            finished = False
            while not finished:
                batch = next(stream, None)
                finished = batch is None
                if batch is not None:
                    if batch.num_rows == 0:
                        continue
                    new = pa.Table.from_batches([batch])
                    buffer = new if buffer is None else pa.concat_tables([buffer, new])
                    buffer = buffer.combine_chunks()
                    reservation.resize(max(floor, buffer.nbytes))
                if buffer is None or buffer.num_rows == 0:
                    continue
                out, ready, keep, state = self._round(buffer, emitted, state, finished)
                if out is not None:
                    yield out
                emitted = ready - keep
                buffer = buffer.slice(keep)
                reservation.resize(max(floor, buffer.nbytes))
        finally:
            stream.close()
            reservation.free()

    def _round(self, buffer: pa.Table, emitted: int, state: _OpenPartition, finished: bool):
        """Evaluate the buffer; returns (batch to emit or None, ready end, keep, new state)."""
        n = buffer.num_rows
        keys = [evaluate(e, buffer) for e in self.partition_by]
        starts = partition_starts(keys, n)
        open_start = int(starts[-2])
        layout = partition_layout(starts)
        order_keys = [evaluate(k.expr, buffer) for k in self.order_by]
        peers = peer_groups(layout, order_keys)
        continuing = emitted > 0 or state.rows > 0  # the first partition lost rows before
        first_end = int(starts[1])
        # frame bounds in the buffer, for the frames whose bounds are searched
        bounds = {} if finished else {
            i: frame_bounds(_frame(w), layout, peers, order_keys,
                            [k.descending for k in self.order_by],
                            [k.nulls_first for k in self.order_by])
            for i, w in enumerate(self.windows) if _searched(_frame(w))}

        ready = n if finished else min(self._ready(w, n, open_start, peers, bounds.get(i))
                                       for i, w in enumerate(self.windows))
        ready = max(ready, open_start) if not finished else n
        columns = []
        for i, window in enumerate(self.windows):
            values = self._evaluate(i, window, buffer, starts, order_keys)
            if continuing:
                values = self._correct(i, window, values, buffer, starts, order_keys,
                                       state, first_end)
            if values.type != self.outputs[i].type:
                values = values.cast(self.outputs[i].type)
            columns.append(values)

        out = None
        if ready > emitted:
            length = ready - emitted
            arrays = [c.slice(emitted, length) for c in buffer.columns] + \
                [c.slice(emitted, length) for c in columns]
            out = pa.RecordBatch.from_arrays([a.combine_chunks() if isinstance(
                a, pa.ChunkedArray) else a for a in arrays], schema=self.schema)

        # rows before `keep` are never needed again; the last row always stays
        if finished:
            return out, ready, n, _OpenPartition()
        need = min(self._need(w, ready, n, peers, bounds.get(i))
                   for i, w in enumerate(self.windows))
        keep = min(max(need, open_start), n - 1)
        return out, ready, keep, self._advance(state, continuing and open_start == 0, keep,
                                               open_start, buffer, columns, starts,
                                               order_keys)

    def _ready(self, window: WindowCall, n: int, open_start: int, peers,
               bounds: FrameBounds | None) -> int:
        """Rows [0, ready) have complete frames (all rows before the open partition do)."""
        func = window.func
        if _streams(func) == "rank" or func == "lag":
            return n
        if func == "lead":
            return max(n - _constant_offset(window), open_start)
        frame = _frame(window)
        if bounds is not None:  # frame ends ascend: the first that reaches the buffer's end
            ends = bounds.end[open_start:]
            return open_start + int(np.searchsorted(ends, n, side="left"))
        if frame.unit == "range":  # ends at CURRENT ROW: the last peer group may grow
            return max(int(peers.peer_start[n - 1]), open_start)
        end = frame.end
        if end.kind == "following":
            return max(n - rows_offset(end.offset), open_start)
        return n

    def _need(self, window: WindowCall, ready: int, n: int, peers,
              bounds: FrameBounds | None) -> int:
        """First buffer row that frames of rows >= ready may still read."""
        func = window.func
        row = min(ready, n - 1)
        if func in ("rank", "dense_rank"):
            return int(peers.peer_start[row])
        if func == "lag":
            return ready - _constant_offset(window)
        if func in ("row_number", "lead"):
            return ready
        frame = _frame(window)
        start = frame.start
        if start.kind == "unbounded_preceding":
            # carried, but only rows inside every later frame: frame ends ascend, and a row
            # still to come (index n) ends no earlier than row n - 1
            return min(ready, self._frame_end(frame, row, ready, bounds))
        if bounds is not None:  # rows from ready on are still to be emitted
            return min(ready, int(bounds.start[row]))
        if frame.unit == "range":
            return int(peers.peer_start[row])
        if start.kind == "preceding":
            return ready - rows_offset(start.offset)
        return ready

    @staticmethod
    def _frame_end(frame: FrameSpec, row: int, ready: int, bounds: FrameBounds | None) -> int:
        """A lower bound on the frame end (exclusive) of every row from ``ready`` on."""
        if bounds is not None:
            return int(bounds.end[row])
        end = frame.end
        if frame.unit == "rows" and end.kind == "preceding":
            return ready + 1 - rows_offset(end.offset)
        return ready  # CURRENT ROW or FOLLOWING: the frame reaches past the row itself

    def _evaluate(self, index: int, window: WindowCall, table: pa.Table, starts: np.ndarray,
                  order_keys: list[pa.Array], func: str | None = None) -> pa.Array:
        args = [evaluate(a, table) for a in window.args]
        mask = evaluate_predicate(window.filter, table) if window.filter is not None else None
        return evaluate_window(func or window.func, args, partition_starts=starts,
                               order_keys=order_keys,
                               descending=[k.descending for k in self.order_by],
                               nulls_first=[k.nulls_first for k in self.order_by],
                               frame=window.frame, ignore_nulls=window.ignore_nulls,
                               filter_mask=mask)

    def _correct(self, index: int, window: WindowCall, values: pa.Array, table: pa.Table,
                 starts: np.ndarray, order_keys: list[pa.Array], state: _OpenPartition,
                 first_end: int) -> pa.Array:
        """Add what the dropped rows of the first partition contribute to its rows."""
        func = window.func
        if func in ("row_number", "rank", "dense_rank"):
            shift = state.dense if func == "dense_rank" else state.rows
            if shift == 0:
                return values
            numbers = values.to_numpy().copy()
            numbers[:first_end] += shift
            return pa.array(numbers, type=values.type)
        frame = _frame(window)
        if _streams(func) != "running" or frame.start.kind != "unbounded_preceding":
            return values
        carry = state.carries.get(index)
        if carry is None or carry.count == 0:
            return values
        head = slice(0, first_end)
        if func in ("count", "count_star"):
            numbers = values.to_numpy().copy()
            numbers[head] += carry.count
            return pa.array(numbers, type=values.type)
        if func in ("sum", "avg"):
            sums = values if func == "sum" else self._evaluate(index, window, table, starts,
                                                                order_keys, "sum")
            if pa.types.is_decimal(sums.type):
                # an integer SUM is a HUGEINT (DECIMAL(38, 0)): the carry is added on 256-bit
                # words, exact and vectorized, then narrowed (an overflow is an error)
                wide = pa.decimal256(40, 0)
                total = pc.add(sums.slice(0, first_end).fill_null(0).cast(wide),
                               pa.scalar(decimal.Decimal(carry.total), wide))
                total = total.cast(values.type if func == "sum" else pa.float64())
                total = total.to_numpy(zero_copy_only=False) if func == "avg" else total
            else:
                total = sums.fill_null(0).to_numpy(zero_copy_only=False)[head] + carry.total
            if func == "avg":
                counts = self._evaluate(index, window, table, starts, order_keys, "count")
                total = total / (counts.to_numpy()[head] + carry.count)
            merged = pa.array(total).cast(values.type)
        else:
            extreme = pa.scalar(carry.extreme, type=values.type)
            head_values = values.slice(0, first_end)
            merged = pc.if_else(head_values.is_valid(), _combine(head_values, extreme, func),
                                extreme)
        return pa.concat_arrays([merged.cast(values.type), values.slice(first_end)])

    def _advance(self, state: _OpenPartition, continuing: bool, keep: int, open_start: int,
                 table: pa.Table, columns: list[pa.Array], starts: np.ndarray,
                 order_keys: list[pa.Array]) -> _OpenPartition:
        """The state of the open partition once rows [0, keep) are dropped."""
        first = 0 if continuing else open_start
        new = _OpenPartition(rows=(state.rows if continuing else 0) + keep - first)
        for i, window in enumerate(self.windows):
            if window.func == "dense_rank" and keep < table.num_rows:
                new.dense = int(columns[i][keep].as_py()) - 1
            frame = _frame(window)
            if _streams(window.func) == "running" and frame.start.kind == "unbounded_preceding":
                carry = state.carries.get(i, _Carry()) if continuing else _Carry()
                new.carries[i] = _fold(carry, window, table.slice(first, keep - first))
        return new


def _combine(values: pa.Array, extreme: pa.Scalar, func: str) -> pa.Array:
    """Elementwise min/max of ``values`` and a scalar, with DuckDB's NaN order."""
    if pa.types.is_floating(values.type):
        numbers = values.fill_null(0).to_numpy(zero_copy_only=False)
        other = extreme.as_py()
        if func == "min":
            result = np.fmin(numbers, other)
        else:
            result = np.maximum(numbers, other)
        return pa.array(result, type=values.type)
    if func == "min":
        return pc.min_element_wise(values, extreme)
    return pc.max_element_wise(values, extreme)


def _fold(carry: _Carry, window: WindowCall, dropped: pa.Table) -> _Carry:
    """``carry`` plus the contributing rows of ``dropped``."""
    if dropped.num_rows == 0:
        return carry
    keep = None
    if window.filter is not None:
        keep = evaluate_predicate(window.filter, dropped)
    if window.func == "count_star":
        count = dropped.num_rows if keep is None else int(pc.sum(keep.cast(pa.int64())).as_py()
                                                         or 0)
        return _Carry(carry.count + count, carry.total, carry.extreme)
    values = evaluate(window.args[0], dropped)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if keep is not None:
        values = values.filter(keep)
    values = values.drop_null()
    count = carry.count + len(values)
    if window.func == "count" or len(values) == 0:
        return _Carry(count, carry.total, carry.extreme)
    if window.func in ("sum", "avg"):
        if pa.types.is_boolean(values.type):
            values = values.cast(pa.int64())
        if pa.types.is_floating(values.type):
            total = carry.total + float(np.sum(values.cast(pa.float64()).to_numpy()))
        else:
            # exact on 128 bits: the running total is a HUGEINT (DECIMAL(38, 0))
            total = carry.total + int(pc.sum(values.cast(pa.decimal128(38, 0))).as_py() or 0)
        return _Carry(count, total, carry.extreme)
    if pa.types.is_floating(values.type):
        numbers = values.to_numpy()
        value = float(np.fmin.reduce(numbers) if window.func == "min"
                      else np.maximum.reduce(numbers))
    else:
        value = (pc.min if window.func == "min" else pc.max)(values).as_py()
    if carry.extreme is None:
        extreme = value
    elif window.func == "min":
        extreme = float(np.fmin(carry.extreme, value)) if isinstance(value, float) else \
            min(carry.extreme, value)
    else:
        extreme = float(np.maximum(carry.extreme, value)) if isinstance(value, float) else \
            max(carry.extreme, value)
    return _Carry(count, carry.total, extreme)


__all__ = ["BoundedWindowAggExec", "bounded_supported"]
