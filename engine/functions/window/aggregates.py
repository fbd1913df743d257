"""Aggregate functions over window frames, for all rows at once.

Each aggregate picks the structure that answers an arbitrary frame in O(1) (or O(log) for
DISTINCT), so a moving frame is never quadratic:

    count, count(*)          prefix sums of contributing flags
    sum, avg                 exact int64 / compensated float prefix sums (``summation``);
                             fixed-width ROWS frames: blocked running sums (``sliding``)
    bool_and, bool_or        prefix sums of true and non-NULL flags
    stddev*, var*            compensated prefix sums of (x - c) and (x - c)**2, c = partition
                             mean, combined in double-double (``prefix_sums``)
    min, max                 whole partitions: one reduceat per partition, broadcast;
                             fixed-width ROWS frames: van Herk / Gil-Werman (``sliding``)
                             otherwise a blocked sparse table (``sparse_table``)
    string_agg               whole partitions: one list per partition; otherwise the frames
                             are materialized (``materialize``)
    corr, covar_*, regr_*    centered compensated prefix sums and a sparse table of min/max
                             (``bivariate``)
    bit_and, bit_or, bit_xor sparse table / van Herk (idempotent); prefix xors (``bivariate``)
    any_value                the frame's first contributing value (``navigation``)
    count/sum/avg DISTINCT   first-occurrence prefix sums or a merge-sort tree (``distinct``)
    other DISTINCT / EXCLUDE GROUP|TIES with DISTINCT: materialized, deduplicated frames

A row contributes when its argument is not NULL and the FILTER mask is true. Frames after
EXCLUDE are up to three segments per row; every structure sums or combines over them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import NotSupportedError, PlanError
from plansight.engine.functions.comoments import BIVARIATE
from plansight.engine.functions.window.bivariate import BITWISE, bitwise, statistic
from plansight.engine.functions.window.distinct import distinct_elements, distinct_sums, value_codes
from plansight.engine.functions.window.frames import FrameBounds
from plansight.engine.functions.window.materialize import expand_frames
from plansight.engine.functions.window.navigation import frame_value
from plansight.engine.functions.window.peers import as_array, validity
from plansight.engine.functions.window.prefix_sums import (
    CompensatedPrefix,
    Segments,
    centered_sum_of_squares,
    prefix,
    sum_over,
    two_prod,
)
from plansight.engine.functions.window.sliding import sliding_applies, sliding_reduce
from plansight.engine.functions.window.sparse_table import RangeExtremum
from plansight.engine.functions.window.summation import (
    Summable,
    avg_result,
    channel_prefix,
    channel_sum,
    check_int_overflow,
    check_wrapped,
    sum_result,
    summable,
)

VARIANCE_FUNCTIONS = ("stddev", "stddev_samp", "stddev_pop", "var_samp", "variance", "var_pop")
AGGREGATE_FUNCTIONS = ("count_star", "count", "sum", "avg", "min", "max", "bool_and", "bool_or",
                       "string_agg", "any_value") + VARIANCE_FUNCTIONS + BITWISE + BIVARIATE
# DISTINCT changes nothing for these
_IDEMPOTENT = ("min", "max", "bool_and", "bool_or", "bit_and", "bit_or", "any_value")


def evaluate_aggregate(func: str, args: list[pa.Array], bounds: FrameBounds, *,
                       distinct: bool, filter_mask: pa.Array | None,
                       result_type: pa.DataType) -> pa.Array:
    """``func`` over every row's frame (see the module docstring for the structures used)."""
    layout = bounds.layout
    keep = _filter_rows(filter_mask, layout.num_rows)
    if func == "count_star":
        if keep is None:  # the frames' lengths (of a fixed ROWS frame: arithmetic, no bounds)
            return pa.array(bounds.lengths(), type=pa.int64())
        return pa.array(sum_over(prefix(keep), bounds.segments), type=pa.int64())
    values = args[0]
    if func in BIVARIATE:
        return statistic(func, values, args[1], keep, bounds.segments,
                         bounds.layout if bounds.is_whole_partition else None,
                         _fixed_width(bounds), layout.partition_starts, bounds.max_length)
    if pa.types.is_null(values.type) and func != "count":
        return pa.nulls(layout.num_rows, type=result_type)
    contributing = validity(values)
    if keep is not None:
        contributing &= keep
    whole = bounds.is_whole_partition
    runs = layout.partition_starts
    if func == "any_value":  # the frame's first contributing value, as in DuckDB
        masked = values if keep is None else \
            pc.if_else(pa.array(contributing), values, pa.nulls(len(values), values.type))
        return frame_value("first_value", [masked], bounds, ignore_nulls=True)
    if distinct and func not in _IDEMPOTENT:
        what = f"{func}(DISTINCT ...) over {bounds.spec.sql()}"
        codes = value_codes(values)
        if func in ("count", "sum", "avg") and bounds.spec.exclude in ("no_others",
                                                                        "current_row"):
            return _distinct_sum_family(func, values, contributing, codes, bounds, result_type)
        elements = distinct_elements(bounds.segments, codes, contributing, what)
        values = values.take(pa.array(elements.rows))
        contributing = np.ones(len(elements.rows), dtype=bool)
        segments: Segments = [(elements.offsets[:-1], elements.offsets[1:])]
        return _aggregate(func, values, args[1:], contributing, lambda: segments,
                          _max_length(segments), None, elements.offsets, result_type, what)
    return _aggregate(func, values, args[1:], contributing, lambda: bounds.segments,
                      bounds.max_length, layout if whole else None, runs, result_type,
                      f"{func}() over {bounds.spec.sql()}", _fixed_width(bounds))


def _fixed_width(bounds: FrameBounds) -> tuple[int, int, np.ndarray] | None:
    """(rows before, rows after, partition starts) when every frame is ``[i - before,
    i + after]`` clipped to its partition, and padding the partitions stays cheap."""
    extent = bounds.fixed_extent
    layout = bounds.layout
    if extent is None or not sliding_applies(layout.num_rows, len(layout.partition_starts) - 1,
                                             *extent):
        return None
    return extent[0], extent[1], layout.partition_starts


def _aggregate(func: str, values: pa.Array, extra: list[pa.Array], contributing: np.ndarray,
               segments: Callable[[], Segments], max_length: int, whole, runs: np.ndarray,
               result_type: pa.DataType, what: str,
               fixed_width: tuple[int, int, np.ndarray] | None = None) -> pa.Array:
    """``func`` over frames given as segments of ``values`` rows.

    ``segments`` returns the frames' segments (built on first call: a sliding kernel never
    needs them); ``max_length`` is the longest frame's row count; ``whole`` is the
    PartitionLayout when every frame is its whole partition (else None); ``runs`` are starts
    of row runs that never share a frame with another run (partitions); ``fixed_width``
    (before, after, partition starts) marks frames ``[i - before, i + after]``.
    """
    sliding = fixed_width is not None and whole is None
    # a sliding frame holds its own row: when every row contributes, none is empty, and
    # SUM / MIN / MAX need no count at all (NULL only for empty frames)
    never_empty = sliding and bool(contributing.all())

    def frame_count() -> np.ndarray:
        if sliding:
            before, after, starts = fixed_width
            return sliding_reduce(contributing.view(np.int8), np.add, 0, starts, before,
                                  after)
        return sum_over(prefix(contributing), segments())

    def empty() -> np.ndarray | None:
        return None if never_empty else frame_count() == 0

    if func == "count":
        return pa.array(frame_count(), type=pa.int64())
    if func in ("sum", "avg"):
        column = summable(values, contributing, func, max_length)
        if sliding:
            before, after, starts = fixed_width
            sums = [sliding_reduce(c, np.add, 0, starts, before, after)
                    for c in column.channels]
        else:
            sums = [channel_sum(channel_prefix(c), segments()) for c in column.channels]
        if func == "sum":
            check_int_overflow(column, max_length, sums[0], segments, func)
            return sum_result(column, sums, empty(), result_type)
        return avg_result(column, sums, frame_count())
    if func in ("min", "max"):
        return _extremum(func, values, contributing, segments, max_length, whole, empty(),
                         fixed_width)
    count = frame_count()
    if func in ("bool_and", "bool_or"):
        truth = contributing & values.fill_null(False).to_numpy(zero_copy_only=False)
        true_count = sum_over(prefix(truth), segments())
        result = true_count == count if func == "bool_and" else true_count > 0
        return pa.array(result, type=pa.bool_(), mask=count == 0)
    if func in VARIANCE_FUNCTIONS:
        return _variance(func, values, contributing, segments(), runs, count)
    if func == "string_agg":
        return _string_agg(values, extra, contributing, segments(), whole, count, result_type,
                           what)
    if func in BITWISE:
        return bitwise(func, values, contributing, count, segments(), whole, fixed_width,
                       max_length, result_type)
    raise PlanError(f"unknown window aggregate {func!r}")


def _distinct_sum_family(func: str, values: pa.Array, contributing: np.ndarray,
                         codes: np.ndarray, bounds: FrameBounds,
                         result_type: pa.DataType) -> pa.Array:
    if func == "count":
        count, _ = distinct_sums(bounds, codes, contributing, ())
        return pa.array(count, type=pa.int64())
    max_frame = bounds.max_length
    column = summable(values, contributing, func, max_frame)
    channels = column.channels
    risky = column.kind == "int" and func == "sum" and not column.split and \
        column.max_abs * max(max_frame, 1) >= 2**63
    if risky:  # a double shadow of the distinct sums tells whether int64 wrapped
        if column.max_abs > 2**63:
            raise NotSupportedError(f"{func}() of UBIGINT values beyond the BIGINT range is "
                                    "not supported")
        channels = channels + (channels[0].astype(np.float64),)
    count, sums = distinct_sums(bounds, codes, contributing, channels)
    if risky:
        check_wrapped(sums[0], sums[-1], func)
        sums = sums[:-1]
    if func == "sum":
        return sum_result(column, sums, count == 0, result_type)
    return avg_result(column, sums, count)


def _extremum(func: str, values: pa.Array, contributing: np.ndarray,
              segments: Callable[[], Segments], max_length: int, whole,
              empty: np.ndarray | None,
              fixed_width: tuple[int, int, np.ndarray] | None = None) -> pa.Array:
    """MIN / MAX of every frame; NULL where ``empty`` (None: no frame is empty)."""
    numbers, op, identity, restore = _orderable(values, func == "min", contributing)
    filled = numbers if contributing.all() else np.where(contributing, numbers, identity)
    if fixed_width is not None and whole is None:
        before, after, starts = fixed_width
        per_row = sliding_reduce(filled, op, identity, starts, before, after)
    elif whole is not None:
        sizes = np.diff(whole.partition_starts)
        starts = whole.partition_starts[:-1][sizes > 0]
        per_row = np.repeat(op.reduceat(filled, starts), sizes[sizes > 0])
    else:
        table = RangeExtremum(filled, op, identity, max_length)
        lo, hi = segments()[0]
        per_row = table.query(lo, hi)
        for lo, hi in segments()[1:]:
            per_row = op(per_row, table.query(lo, hi))
    return restore(per_row, empty)


def _orderable(values: pa.Array, is_min: bool, contributing: np.ndarray
               ) -> tuple[np.ndarray, np.ufunc, object,
                          Callable[[np.ndarray, np.ndarray], pa.Array]]:
    """Numbers ordered like ``values``, the combining ufunc, its identity, and a function
    turning per-row combined numbers (plus a NULL mask) back into the value type."""
    typ = values.type
    if pa.types.is_dictionary(typ):
        values = values.dictionary_decode()
        typ = values.type
    if pa.types.is_floating(typ):
        as_float = values.cast(pa.float32()) if pa.types.is_float16(typ) else values
        numbers = (as_float.fill_null(0) if as_float.null_count else as_float).to_numpy()
        # NaN sorts above every number: MIN ignores it (fmin), MAX returns it (maximum)
        op, identity = (np.fmin, np.nan) if is_min else (np.maximum, -np.inf)
        return numbers, op, identity, lambda r, null: pa.array(r, mask=null).cast(typ)
    if pa.types.is_integer(typ) or pa.types.is_boolean(typ) or _is_int_temporal(typ):
        if pa.types.is_boolean(typ):
            storage = pa.uint8()
        elif pa.types.is_integer(typ):
            storage = typ
        else:
            storage = pa.int32() if typ.bit_width == 32 else pa.int64()
        numbers = values.cast(storage).fill_null(0).to_numpy()
        info = np.iinfo(numbers.dtype)
        op, identity = (np.minimum, info.max) if is_min else (np.maximum, info.min)

        def restore_int(r: np.ndarray, null: np.ndarray | None) -> pa.Array:
            result = pa.array(r, type=storage, mask=null)
            if pa.types.is_boolean(typ):
                return result.cast(pa.bool_())
            return result if storage == typ else result.view(typ)

        return numbers, op, identity, restore_int
    if pa.types.is_null(typ):
        return (np.zeros(len(values)), np.minimum, 0.0,
                lambda r, null: pa.nulls(len(r), type=typ))
    # strings, decimals, binary, ...: dense ranks, mapped back to a row holding the value
    codes = value_codes(values)
    op, identity = (np.minimum, np.iinfo(np.int64).max) if is_min else (np.maximum, -1)
    holder = np.zeros(int(codes.max()) + 1 if len(codes) else 1, dtype=np.int64)
    rows = np.flatnonzero(contributing)
    holder[codes[rows]] = rows

    def restore_ranked(r: np.ndarray, null: np.ndarray | None) -> pa.Array:
        picked = holder[r if null is None else np.where(null, 0, r)]
        return values.take(pa.array(picked, mask=null))

    return codes, op, identity, restore_ranked


def _is_int_temporal(typ: pa.DataType) -> bool:
    return (pa.types.is_date(typ) or pa.types.is_timestamp(typ) or pa.types.is_time(typ)
            or pa.types.is_duration(typ))


def _variance(func: str, values: pa.Array, contributing: np.ndarray, segments: Segments,
              runs: np.ndarray, count: np.ndarray) -> pa.Array:
    column = summable(values, contributing, func)
    if column.kind == "float":
        numbers = column.channels[0]
    else:
        numbers = column.channels[0].astype(np.float64) / float(10 ** column.scale)
    # center on the run (partition) mean so the squares stay small
    sizes = np.diff(runs)
    starts = runs[:-1][sizes > 0]
    run_counts = np.add.reduceat(contributing.astype(np.float64), starts) if len(starts) else []
    run_sums = np.add.reduceat(numbers, starts) if len(starts) else []
    with np.errstate(invalid="ignore", divide="ignore"):
        centers = np.where(np.asarray(run_counts) > 0,
                           np.asarray(run_sums) / np.asarray(run_counts), 0.0)
    center = np.repeat(centers, sizes[sizes > 0]) if len(starts) else np.zeros(0)
    shifted = np.where(contributing, numbers - center, 0.0)
    squares, squares_err = two_prod(shifted, shifted)
    total_hi, total_lo = CompensatedPrefix(shifted).range_sum(segments)
    square_hi, square_lo = CompensatedPrefix(squares, squares_err).range_sum(segments)
    m2 = centered_sum_of_squares(total_hi, total_lo, square_hi, square_lo, count)
    population = func in ("stddev_pop", "var_pop")
    divisor = count if population else count - 1
    null = divisor <= 0
    with np.errstate(invalid="ignore", divide="ignore"):
        result = m2 / np.where(null, 1, divisor)
    if len(column.channels) > 1:
        # NaN / inf poison frames of two or more values (a single value has variance 0, as
        # in DuckDB's Welford update)
        poisoned = sum(channel_sum(prefix(c), segments) for c in column.channels[1:]) > 0
        result = np.where(poisoned & (count > 1), np.nan, result)
    if func.startswith("stddev"):
        result = np.sqrt(result)
    return pa.array(result, type=pa.float64(), mask=null)


def _string_agg(values: pa.Array, extra: list[pa.Array], contributing: np.ndarray,
                segments: Segments, whole, count: np.ndarray, result_type: pa.DataType,
                what: str) -> pa.Array:
    separator = ","
    if extra:
        sep = extra[0]
        if len(sep) == 0 or not sep[0].is_valid:
            return pa.nulls(len(count), type=result_type)
        separator = sep[0].as_py()
        if isinstance(separator, bytes):
            separator = separator.decode()
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        values = values.cast(pa.string())
    compact = values.filter(pa.array(contributing))
    empty = count == 0
    if whole is not None:
        before = prefix(contributing)
        lists = pa.LargeListArray.from_arrays(pa.array(before[whole.partition_starts]), compact)
        joined = pc.binary_join(lists, separator)
        result = joined.take(pa.array(whole.partition_index))
    else:

        expansion = expand_frames(segments, contributing, what)
        before = prefix(contributing)
        items = compact.take(pa.array(before[expansion.rows]))
        lists = pa.LargeListArray.from_arrays(pa.array(expansion.offsets), items)
        result = pc.binary_join(lists, separator)
    result = pc.if_else(pa.array(empty), pa.scalar(None, type=result.type), result)
    return result.cast(result_type)


def _filter_rows(filter_mask: pa.Array | None, num_rows: int) -> np.ndarray | None:
    if filter_mask is None:
        return None

    mask = as_array(filter_mask)
    if len(mask) != num_rows:
        raise PlanError(f"filter_mask has {len(mask)} rows, expected {num_rows}")
    if not pa.types.is_boolean(mask.type):
        raise PlanError(f"FILTER (WHERE ...) must be boolean, got {mask.type}")
    return mask.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


def _max_length(segments: Segments) -> int:
    longest = 0
    for lo, hi in segments:
        if len(lo):
            longest = max(longest, int((hi - lo).max()))
    return longest


__all__ = ["AGGREGATE_FUNCTIONS", "VARIANCE_FUNCTIONS", "Summable", "evaluate_aggregate"]
