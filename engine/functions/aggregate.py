"""SQL aggregate functions: result types (DuckDB's) and their Arrow hash-aggregate kernels.

``aggregate_table`` computes every aggregate of a GROUP BY in one pass of Arrow's
``Table.group_by`` (C++ hash aggregation); aggregates without a direct kernel (DISTINCT sum,
exact median/quantile, string_agg) are assembled from list kernels, still vectorized.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import ExecutionError, PlanError, bigint_sum_overflow, did_you_mean
from plansight.engine.functions import comoments
from plansight.engine.functions.capabilities import capabilities
from plansight.engine.functions.grouped_kernels import aggregate_by_ids
from plansight.engine.functions.scalar import calendar as C
from plansight.engine.kernels import decimal as D
from plansight.engine.kernels.order_keys import order_bytes

NUMERIC_RESULT = {"avg", "mean", "stddev", "stddev_samp", "stddev_pop", "variance", "var_samp",
                  "var_pop", "median", "quantile_cont"}

AGGREGATES = ("count", "count_star", "sum", "avg", "mean", "min", "max", "stddev", "stddev_samp",
              "stddev_pop", "variance", "var_samp", "var_pop", "bool_and", "bool_or", "every",
              "string_agg", "group_concat", "listagg", "median", "quantile_cont", "quantile_disc",
              "quantile", "first", "any_value", "arbitrary", "product", "list", "array_agg",
              "bit_and", "bit_or", "bit_xor") + comoments.BIVARIATE

BITWISE = ("bit_and", "bit_or", "bit_xor")
#: the exact sum of integers, DuckDB's HUGEINT: what SUM of integers returns (and AVG's sum)
EXACT_SUM = pa.decimal128(38, 0)
# the co-moment state of the two-variable statistics: from rows (partial), from states (final)
_COMOMENTS, _COMOMENTS_MERGE = "__comoments", "__comoments_merge"


def is_aggregate(name: str) -> bool:
    return name.lower() in AGGREGATES


def aggregate_return_type(func: str, arg_types: list[pa.DataType]) -> pa.DataType:
    func = func.lower()
    if func not in AGGREGATES:
        raise PlanError(f"unknown aggregate function {func!r}." + did_you_mean(func, AGGREGATES))
    if func in ("count", "count_star"):
        return pa.int64()
    if not arg_types:
        raise PlanError(f"aggregate {func}() needs an argument")
    t = arg_types[0]
    if func in comoments.BIVARIATE:
        if len(arg_types) != 2:
            raise PlanError(f"{func}(y, x) takes two arguments, got {len(arg_types)}")
        for arg in arg_types:
            if not (pa.types.is_integer(arg) or pa.types.is_floating(arg) or
                    pa.types.is_decimal(arg) or pa.types.is_null(arg)):
                raise PlanError(f"{func}() needs numeric arguments, got {arg}")
        return comoments.return_type(func)
    if func in BITWISE:
        if not (pa.types.is_integer(t) or pa.types.is_null(t)):
            raise PlanError(f"{func}() needs an integer argument, got {t}")
        return t
    if func == "sum":
        if pa.types.is_integer(t) or pa.types.is_boolean(t):
            # DuckDB sums integers into a HUGEINT: exact past BIGINT (on int64 until a
            # group's sum could pass it, then on 128 bits)
            return EXACT_SUM
        if pa.types.is_decimal(t):
            return pa.decimal128(38, t.scale)
        if pa.types.is_floating(t):
            return pa.float64()
        raise PlanError(f"sum() cannot be applied to {t}")
    if func == "product":
        return pa.float64()
    if func in NUMERIC_RESULT:
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
            if func in ("median", "quantile_cont") and pa.types.is_date(t):
                return pa.timestamp("us")  # DuckDB: the interpolated date is a TIMESTAMP
            if func in ("median", "quantile_cont") and pa.types.is_timestamp(t):
                return t
            raise PlanError(f"{func}() cannot be applied to {t}")
        if func in ("median", "quantile_cont") and pa.types.is_decimal(t):
            return t  # DuckDB interpolates decimals in their own type
        return pa.float64()
    if func in ("bool_and", "bool_or", "every"):
        if not pa.types.is_boolean(t):
            raise PlanError(f"{func}() needs a BOOLEAN argument, got {t}")
        return pa.bool_()
    if func in ("string_agg", "group_concat", "listagg"):
        return pa.string()
    if func in ("list", "array_agg"):
        return pa.list_(t)
    return t  # min, max, first, any_value, quantile_disc


@dataclass(frozen=True)
class AggregateSpec:
    """One aggregate over an input column (``column`` None for COUNT(*))."""

    func: str
    column: str | None
    output: str
    type: pa.DataType
    distinct: bool = False
    options: tuple = ()

    def option(self, name, default=None):
        return dict(self.options).get(name, default)


_KERNEL = {"count": "count", "sum": "sum", "avg": "mean", "mean": "mean", "min": "min",
           "max": "max", "stddev": "stddev", "stddev_samp": "stddev", "stddev_pop": "stddev",
           "variance": "variance", "var_samp": "variance", "var_pop": "variance",
           "bool_and": "all", "every": "all", "bool_or": "any", "first": "first",
           "any_value": "first", "arbitrary": "first", "product": "product",
           "list": "list", "array_agg": "list"}


def _first_by_position(t: pa.DataType) -> bool:
    """first / any_value of types Arrow's hash_first_last has no kernel for: decimals,
    nested values and intervals (the value of a nested or interval GROUP BY key,
    optimizer/encode_nested_keys.py)."""
    return pa.types.is_decimal(t) or pa.types.is_nested(t) or pa.types.is_interval(t)


def _kernel_options(spec: AggregateSpec):
    func = spec.func
    if func in ("stddev", "stddev_samp", "variance", "var_samp"):
        return pc.VarianceOptions(ddof=1)
    if func in ("stddev_pop", "var_pop"):
        return pc.VarianceOptions(ddof=0)
    if func == "count":
        return pc.CountOptions(mode="only_valid")
    if func in ("bool_and", "bool_or", "every", "sum", "product", "min", "max", "avg", "mean"):
        return pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
    return None


def one_empty_row() -> pa.Table:
    """A table of one row and no columns (Arrow keeps the row count of a column-less batch)."""
    return pa.Table.from_batches([pa.RecordBatch.from_struct_array(
        pa.array([{}], pa.struct([])))])


def with_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s columns under ``schema``'s names and types; a column-less table keeps its
    row count (``Table.from_arrays`` would make it empty)."""
    if not schema.names:
        return table.select([])
    return pa.Table.from_arrays(table.columns, schema=schema)


def aggregate_table(table: pa.Table, keys: list[str], specs: list[AggregateSpec],
                    compiled: bool = True) -> pa.Table:
    """GROUP BY ``keys`` over ``table``; output columns: keys then one per spec, named.

    Without keys the result has exactly one row, also for empty input (COUNT = 0, others NULL).
    ``compiled``: number the groups with the compiled kernels (grouped_kernels.py) when the
    keys allow; else, and for what those kernels do not cover, Arrow's hash aggregation.
    """
    if not keys:
        if not specs:  # a global aggregate with nothing to compute still makes one group
            return one_empty_row()
        # Arrow's hash kernels (list, distinct, ...) need a key: group by a constant one
        keyed = table.append_column("__group", pa.array([0] * 0, pa.int8())
                                    if table.num_rows == 0 else
                                    pa.repeat(pa.scalar(0, pa.int8()), table.num_rows))
        result = aggregate_table(keyed, ["__group"], specs).drop_columns(["__group"])
        if result.num_rows == 0:
            return pa.table([pa.array([0] if s.func in ("count", "count_star", "regr_count")
                                      else [None], s.type) for s in specs],
                            names=[s.output for s in specs])
        return result
    simple, special = [], []
    # DuckDB groups -0.0 with 0.0 (IEEE equal); Arrow hashes the bits: fold -0.0 first
    work = _fold_negative_zero(table, keys + [s.column for s in specs
                                              if s.distinct and s.column is not None])
    for spec in specs:  # the NULL type: Arrow's count_distinct counts its NULL as a value
        if spec.column is not None and pa.types.is_null(work.schema.field(spec.column).type):
            index = work.schema.get_field_index(spec.column)
            work = work.set_column(index, spec.column, pa.nulls(work.num_rows, pa.int8()))
    table = work
    if compiled:
        result = aggregate_by_ids(table, keys, specs, lambda t, k, s: aggregate_table(
            t, k, s, compiled=False))
        if result is not None:
            columns = result.columns[:len(keys)] + [
                _cast_result(result.column(len(keys) + i), spec.type)
                for i, spec in enumerate(specs)]
            return pa.table(columns, names=result.column_names)
    nan_checks: list[tuple[int, int]] = []  # (spec, position in simple) for MAX over doubles
    overflow_checks: list[tuple[int, int]] = []  # (spec, position) for SUM over integers
    decimal_checks: list[tuple[int, int]] = []  # (spec, position) for 128-bit DECIMAL SUMs
    single_checks: list[tuple[int, int]] = []  # (spec, position) for var_pop / stddev_pop
    constant_checks: list[tuple[int, int]] = []  # (spec, position of min, max next) for var
    first_rows: list[tuple[int, int]] = []  # (spec, position) for first/any_value on decimals
    ranked_rows: list[tuple[int, int, np.ndarray]] = []  # (spec, position, order): min/max
    scaled_sums: list[int] = []  # specs whose DECIMAL SUM runs on scaled int64
    # (spec, position of the scaled sum, AVG: its count next) for DECIMAL AVG / double SUM
    scaled_doubles: list[tuple[int, int, bool]] = []
    by_group: list[int] = []  # specs computed in numpy over the rows ordered group by group
    for i, spec in enumerate(specs):
        if spec.func in _BY_GROUP and not spec.distinct:
            by_group.append(i)
        elif spec.func == "count_star":
            simple.append((i, ([], "count_all", None)))
        elif spec.distinct and spec.func == "count":
            simple.append((i, (spec.column, "count_distinct", pc.CountOptions(mode="only_valid"))))
        elif spec.distinct or spec.func in ("string_agg", "group_concat", "listagg", "median",
                                            "quantile_cont", "quantile_disc", "quantile"):
            special.append((i, spec))
        elif _KERNEL.get(spec.func) == "first" and \
                _first_by_position(table.schema.field(spec.column).type):
            # Arrow's hash_first_last has no decimal kernel: the first non-NULL row's
            # position per group (min over positions, NULL where the value is NULL), taken
            values = table[spec.column]
            positions = pa.array(np.arange(table.num_rows, dtype=np.int64),
                                 mask=np.asarray(values.is_null().to_numpy(
                                     zero_copy_only=False), dtype=bool))
            name = f"__first_{i}"
            work = work.append_column(name, positions)
            first_rows.append((i, len(simple)))
            simple.append((-1, (name, "min", pc.ScalarAggregateOptions(skip_nulls=True,
                                                                      min_count=1))))
        elif spec.func in ("min", "max") and _ranked(table.schema.field(spec.column).type):
            # Arrow has no INTERVAL or nested min/max: each row's rank in DuckDB's order (by
            # length, a month = 30 days; nested values by their order bytes; equal values by
            # row), the group's min/max rank, its row
            values = table[spec.column].combine_chunks()
            ranks, order = _order_ranks(values)
            name = f"__rank_{i}"
            work = work.append_column(name, ranks)
            ranked_rows.append((i, len(simple), order))
            simple.append((-1, (name, spec.func, pc.ScalarAggregateOptions(skip_nulls=True,
                                                                          min_count=1))))
        elif spec.func in _KERNEL:
            column = spec.column
            t = table.schema.field(column).type
            average = spec.func in ("avg", "mean")
            if (average or spec.func == "sum" and pa.types.is_floating(spec.type)) and \
                    D.fits_int64(t):
                scaled = _scaled_int64(table[column])
                if not _sum_may_wrap(scaled):
                    # a DECIMAL's AVG (or its partial state, a double SUM): the exact sum of
                    # the scaled integers as a double, over the count, as the compiled path
                    # computes it; no cast of every value to double first (Q1's three
                    # averages spent more in that cast than in the hash aggregation)
                    column = f"__scaled_{i}"
                    work = work.append_column(column, scaled)
                    scaled_doubles.append((i, len(simple), average))
                    simple.append((i, (column, "sum", _kernel_options(spec))))
                    if average:
                        simple.append((-1, (column, "count",
                                            pc.CountOptions(mode="only_valid"))))
                    continue
            if (spec.func in NUMERIC_RESULT and pa.types.is_decimal(t)) or (
                    spec.func == "sum" and pa.types.is_integer(t)
                    and pa.types.is_floating(spec.type)):
                # decimals for avg/stddev, and integer sums kept as double (avg states):
                # accumulate in double; Arrow's int64 sum would wrap around
                cast_name = f"__f64_{i}"
                work = work.append_column(cast_name, pc.cast(table[column], pa.float64(),
                                                             safe=False))
                column = cast_name
            if spec.func == "sum" and pa.types.is_integer(t) and \
                    pa.types.is_decimal(spec.type) and _sum_may_wrap(table[column]):
                # an exact integer sum (a partial state) that int64 could wrap: on 128 bits
                column = f"__exact_{i}"
                work = work.append_column(column, pc.cast(table[spec.column], spec.type))
            elif spec.func == "sum" and pa.types.is_decimal128(t) and \
                    pa.types.is_decimal(spec.type):
                # DECIMAL(p <= 18) always; wider (the partial sums a final aggregate merges)
                # when every value happens to fit int64
                scaled = _scaled_int64(table[column]) if D.fits_int64(t) else \
                    _scaled_int64_if_fits(table[column])
                if scaled is not None and not _sum_may_wrap(scaled):
                    # Arrow sums decimal128 on 128-bit words; the scaled int64 sum is exact
                    # here, several times faster, and read back as a decimal below
                    column = f"__scaled_{i}"
                    work = work.append_column(column, scaled)
                    scaled_sums.append(i)
                else:
                    # on 128-bit words, which Arrow lets wrap and pass 38 digits unchecked:
                    # a double shadow sum alongside tells an overflow
                    shadow = f"__dshadow_{i}"
                    work = work.append_column(shadow, pa.array(
                        D.approximate_unscaled(table[column]), pa.float64(),
                        mask=np.asarray(table[column].is_null(), dtype=bool)))
                    decimal_checks.append((i, len(simple) + 1))
                    simple.append((i, (column, _KERNEL[spec.func], _kernel_options(spec))))
                    simple.append((-1, (shadow, "sum", _kernel_options(spec))))
                    continue
            simple.append((i, (column, _KERNEL[spec.func], _kernel_options(spec))))
            if spec.func == "sum" and pa.types.is_integer(t) and \
                    pa.types.is_integer(spec.type) and _sum_may_wrap(table[column]):
                # Arrow's int64 sum wraps silently: a double sum alongside tells a wrapped
                # result (off by a multiple of 2**64) from a right one
                check_name = f"__fsum_{i}"
                work = work.append_column(check_name, pc.cast(table[column], pa.float64(),
                                                              safe=False))
                overflow_checks.append((i, len(simple)))
                simple.append((-1, (check_name, "sum", _kernel_options(spec))))
            if spec.func in ("var_pop", "stddev_pop"):
                # one value has no spread, infinite or not (Arrow: inf - inf = NaN); DuckDB's
                # Welford update gives 0
                single_checks.append((i, len(simple)))
                simple.append((-1, (column, "count", pc.CountOptions(mode="only_valid"))))
            if _KERNEL[spec.func] in ("variance", "stddev"):
                # equal finite values have exactly no spread, as DuckDB's Welford update
                # gives; Arrow merging its chunks' partial moments leaves rounding (1e-8 for
                # five times 99999999.99)
                constant_checks.append((i, len(simple)))
                bound = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
                simple.append((-1, (column, "min", bound)))
                simple.append((-1, (column, "max", bound)))
            if spec.func == "max" and pa.types.is_floating(t):
                # DuckDB: NaN is the greatest double, so MAX is NaN when a NaN is present;
                # Arrow's max skips NaN
                nan_name = f"__nan_{i}"
                work = work.append_column(nan_name, pc.is_nan(table[column]))
                nan_checks.append((i, len(simple)))
                simple.append((-1, (nan_name, "any", pc.ScalarAggregateOptions(
                    skip_nulls=True, min_count=1))))
        else:
            raise PlanError(f"aggregate {spec.func}() is not supported")
    aggregations = [agg for _, agg in simple]
    if by_group:  # each group's row numbers: the rows ordered group by group
        work = work.append_column("__row", pa.array(np.arange(work.num_rows, dtype=np.int64)))
        aggregations.append(("__row", "list", None))
    if special:
        # a list per group for each special aggregate (and for its ORDER BY columns, whose
        # lists line up element by element); finished below, vectorized
        for _, spec in special:
            aggregations.append((spec.column, "list", None))
            for name in spec.option("order_columns", ()):
                aggregations.append((name, "list", None))
    grouped = work.group_by(keys, use_threads=False).aggregate(aggregations) if aggregations \
        else work.group_by(keys, use_threads=False).aggregate([([], "count_all", None)])
    n_keys = len(keys)
    # Arrow (>= 17) puts the keys first, then the aggregates in the order asked
    key_columns = [grouped.column(k) for k in range(n_keys)]
    results: dict[int, pa.Array] = {}
    for position, (i, _) in enumerate(simple):
        if i >= 0:
            results[i] = grouped.column(n_keys + position)
    for i in scaled_sums:
        sums = results[i].combine_chunks() if isinstance(results[i], pa.ChunkedArray) \
            else results[i]
        results[i] = D.from_unscaled(sums.fill_null(0).to_numpy(),
                                     np.asarray(sums.is_valid()), specs[i].type)
    for i, position, average in scaled_doubles:
        sums = grouped.column(n_keys + position).combine_chunks()
        scale = table.schema.field(specs[i].column).type.scale
        # in long double, as DuckDB divides its exact sum: a sum past 2**53 keeps its digits
        divisor = np.full(len(sums), 10.0 ** scale, dtype=np.longdouble)
        if average:
            divisor *= grouped.column(n_keys + position + 1).combine_chunks().to_numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            totals = np.asarray(sums.fill_null(0).to_numpy(), dtype=np.int64).astype(
                np.longdouble) / divisor
        results[i] = pa.array(totals.astype(np.float64), pa.float64(),
                              mask=np.asarray(sums.is_null(), dtype=bool))
    for i, position in overflow_checks:
        exact = pc.cast(results[i], pa.float64(), safe=False)
        wrapped = pc.greater(pc.abs(pc.subtract(exact, grouped.column(n_keys + position))),
                             2.0 ** 62)
        if pc.any(wrapped).as_py():
            raise bigint_sum_overflow(specs[i].output.split("#")[0])
    for i, position in decimal_checks:
        shadow = grouped.column(n_keys + position).combine_chunks()
        if D.sums_overflow(results[i], shadow.fill_null(0.0).to_numpy()):
            raise ExecutionError(f"Overflow in {specs[i].output.split('#')[0]}: the total "
                                 f"does not fit in DECIMAL(38, {specs[i].type.scale})")
    for i, position in nan_checks:
        has_nan = pc.fill_null(grouped.column(n_keys + position), False)
        results[i] = pc.if_else(has_nan, pa.scalar(float("nan"), results[i].type), results[i])
    for i, position in first_rows:
        source = table[specs[i].column].combine_chunks()
        rows = grouped.column(n_keys + position).combine_chunks()
        results[i] = source.take(rows)
    for i, position, order in ranked_rows:
        source = table[specs[i].column].combine_chunks()
        ranks = grouped.column(n_keys + position).combine_chunks()
        rows = pa.array(order).take(ranks) if len(order) else pa.nulls(len(ranks), pa.int64())
        results[i] = source.take(rows)
    for i, position in single_checks:
        one = pc.equal(grouped.column(n_keys + position), 1)
        results[i] = pc.if_else(one, pa.scalar(0.0, results[i].type), results[i])
    for i, position in constant_checks:
        low, high = grouped.column(n_keys + position), grouped.column(n_keys + position + 1)
        constant = pc.fill_null(pc.and_(pc.equal(low, high), pc.is_finite(low)), False)
        # samp of one value stays NULL; a NaN among the values (min/max skip it) stays NaN
        constant = pc.and_(constant, pc.fill_null(pc.invert(pc.is_nan(results[i])), False))
        results[i] = pc.if_else(constant, pa.scalar(0.0, results[i].type), results[i])
    position = n_keys + len(simple)
    if by_group:
        rows = grouped.column(position).combine_chunks()
        position += 1
        order = pc.list_flatten(rows).to_numpy()
        offsets = rows.offsets.to_numpy() - rows.offsets[0].as_py()
        shared: dict = {}  # co-moments of one (y, x) pair serve corr, regr_slope, ...
        for i in by_group:
            results[i] = _by_group(specs[i], table, order, offsets, shared)
    for i, spec in special:
        lists = grouped.column(position).combine_chunks()
        n_order = len(spec.option("order_columns", ()))
        order_lists = [grouped.column(position + 1 + k).combine_chunks() for k in range(n_order)]
        position += 1 + n_order
        results[i] = _finish_special(spec, lists, order_lists)
    columns = key_columns + [_cast_result(results[i], spec.type) for i, spec in enumerate(specs)]
    names = keys + [spec.output for spec in specs]
    return pa.table(columns, names=names)


def _ranked(t: pa.DataType) -> bool:
    """Types whose MIN/MAX go through row ranks (Arrow has no kernel for them)."""
    return pa.types.is_interval(t) or pa.types.is_nested(t)


def _order_ranks(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """(rank of each row in DuckDB's order, NULL where NULL; the rows by rank): intervals by
    length, nested values by their order bytes (kernels/order_keys.py). Equal values rank by
    row, so MIN keeps the first of them and MAX the last."""
    if pa.types.is_interval(values.type):
        days, nanos = C.interval_order_parts(values)
        order = pc.sort_indices(pa.table({"d": days, "n": nanos}),
                                sort_keys=[("d", "ascending"), ("n", "ascending")]).to_numpy()
    else:
        order = pc.sort_indices(order_bytes(values)).to_numpy()
    ranks = np.empty(len(values), np.int64)
    ranks[order] = np.arange(len(values), dtype=np.int64)
    mask = None if values.null_count == 0 else np.asarray(
        values.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    return pa.array(ranks, pa.int64(), mask=mask), order


_BY_GROUP = BITWISE + comoments.BIVARIATE + (_COMOMENTS, _COMOMENTS_MERGE)


def _by_group(spec: AggregateSpec, table: pa.Table, order: np.ndarray,
              offsets: np.ndarray, shared: dict) -> pa.Array:
    """``spec`` per group, the rows taken in ``order`` (group g: ``offsets[g]:offsets[g+1]``).
    Vectorized with reduceat: no loop over groups. ``shared`` keeps the co-moments of each
    (y, x) pair for the other statistics of the same pair."""
    pair = (spec.column, spec.option("second_column"))
    if spec.func in comoments.BIVARIATE + (_COMOMENTS,) and pair in shared:
        moments = shared[pair]
        return moments.to_arrow() if spec.func == _COMOMENTS else \
            comoments.finish(spec.func, moments)
    values = table[spec.column].combine_chunks().take(pa.array(order))
    if spec.func == _COMOMENTS_MERGE:
        return comoments.merge_sorted(comoments.CoMoments.from_arrow(values),
                                      offsets).to_arrow()
    if spec.func in BITWISE:
        return _bitwise(spec.func, values, offsets, spec.type)
    x = table[spec.option("second_column")].combine_chunks().take(pa.array(order))
    valid = _validity(values) & _validity(x)
    moments = comoments.from_sorted_rows(_doubles(values), _doubles(x), valid, offsets)
    shared[pair] = moments
    if spec.func == _COMOMENTS:
        return moments.to_arrow()
    return comoments.finish(spec.func, moments)


def _doubles(values: pa.Array) -> np.ndarray:
    return np.asarray(pc.cast(values, pa.float64(), safe=False).fill_null(0.0).to_numpy(
        zero_copy_only=False), dtype=np.float64)


def _validity(values: pa.Array) -> np.ndarray:
    if values.null_count == 0:
        return np.ones(len(values), dtype=bool)
    return np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _bitwise(func: str, values: pa.Array, offsets: np.ndarray, type_: pa.DataType) -> pa.Array:
    """bit_and / bit_or / bit_xor of each group's non-NULL values (NULL when none)."""
    groups = len(offsets) - 1
    if pa.types.is_null(values.type) or pa.types.is_null(type_):
        return pa.nulls(groups, type_)
    valid = _validity(values)
    numbers = values.fill_null(0).to_numpy(zero_copy_only=False)
    kept = numbers[valid]
    group = np.repeat(np.arange(groups), np.diff(offsets))[valid]
    counts = np.bincount(group, minlength=groups)
    op = {"bit_and": np.bitwise_and, "bit_or": np.bitwise_or, "bit_xor": np.bitwise_xor}[func]
    out = np.zeros(groups, dtype=numbers.dtype)
    has = counts > 0
    if has.any():
        starts = (np.cumsum(counts) - counts)[has]
        out[has] = op.reduceat(kept, starts)
    return pa.array(out, type_, mask=~has)


def _scaled_int64(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    """A DECIMAL(p <= 18) column's unscaled values as int64, chunk by chunk, sharing each
    chunk's validity bitmap."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = []
    for chunk in chunks:
        ints = np.empty(chunk.offset + len(chunk), dtype=np.int64)  # the bitmap's offset
        ints[chunk.offset:] = D.unscaled(chunk)
        validity = chunk.buffers()[0] if chunk.null_count else None
        out.append(pa.Array.from_buffers(pa.int64(), len(chunk), [validity, pa.py_buffer(ints)],
                                         null_count=chunk.null_count, offset=chunk.offset))
    return pa.chunked_array(out, pa.int64())


def _scaled_int64_if_fits(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | None:
    """A decimal128 column's unscaled values as int64 when every non-NULL one fits."""
    return _scaled_int64(column) if D.values_fit_int64(column) else None


def _sum_may_wrap(column) -> bool:
    """Whether some group's integer SUM over ``column`` could leave the int64 range: not
    when (largest magnitude) x (non-NULL values) is below 2**63, which one min_max proves
    for most data at a fraction of the double sum that would otherwise check it."""
    count = len(column) - column.null_count
    if count == 0:
        return False
    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return max(abs(low), abs(high)) * count >= 1 << 63


def _fold_negative_zero(table: pa.Table, names: list[str]) -> pa.Table:
    """Float columns with one zero (-0.0 + 0.0 = 0.0) and one NaN bit pattern: Arrow's
    group_by hashes the bits, and a NaN with its sign bit set (var_samp of infinities gives
    one) made a second group beside NaN (seed 9103: a UNION of (s, NaN) kept two rows)."""
    for name in dict.fromkeys(names):
        t = table.schema.field(name).type
        if pa.types.is_floating(t):
            index = table.schema.get_field_index(name)
            column = pc.add(table[name], 0.0)
            column = pc.if_else(pc.is_nan(column), pa.scalar(float("nan"), column.type),
                                column)
            table = table.set_column(index, name, column)
    return table


def _cast_result(column, type_: pa.DataType):
    if column.type == type_:
        return column
    if pa.types.is_null(type_):  # min(NULL) and the like: every value is NULL
        return pa.nulls(len(column), type_)
    # integer or decimal sums widened to double (avg states) may round, by definition
    lossy = pa.types.is_floating(type_) and not pa.types.is_floating(column.type)
    return pc.cast(column, type_, safe=not lossy)


def _finish_special(spec: AggregateSpec, lists: pa.ListArray,
                    order_lists: list[pa.ListArray] = ()) -> pa.Array:
    """Reduce a list per group (NULLs already inside) to the aggregate value, vectorized."""
    n_groups = len(lists)
    parents = pc.list_parent_indices(lists)
    values = pc.list_flatten(lists)
    valid = values.is_valid()
    parents, values = parents.filter(valid), values.filter(valid)
    order_keys = [pc.list_flatten(keys).filter(valid) for keys in order_lists]
    if spec.distinct:
        pairs = pa.table({"g": parents, "v": values}).group_by(["g", "v"],
                                                              use_threads=False).aggregate([])
        parents, values = pairs["g"].combine_chunks(), pairs["v"].combine_chunks()
        order_keys = [values for _ in order_keys]  # DISTINCT: the keys are the argument
    if order_keys:  # ORDER BY inside the aggregate: sort each group's values by the keys
        directions = spec.option("order_by")
        columns = {"g": parents, **{f"k{i}": k for i, k in enumerate(order_keys)}}
        sort_keys = [("g", "ascending", "at_end")] + [
            (f"k{i}", "descending" if descending else "ascending",
             "at_start" if nulls_first else "at_end")
            for i, (descending, nulls_first) in enumerate(directions)]
        order = pc.sort_indices(pa.table(columns), sort_keys=sort_keys)
        parents, values = parents.take(order), values.take(order)
    func = spec.func
    if func in ("string_agg", "group_concat", "listagg"):
        order = np.argsort(parents.to_numpy(), kind="stable")
        values = values.take(pa.array(order)).cast(pa.string())
        parents_np = parents.to_numpy()[order]
        counts = np.bincount(parents_np, minlength=n_groups)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        rebuilt = pa.ListArray.from_arrays(pa.array(offsets), values)
        joined = pc.binary_join(rebuilt, spec.option("separator", ","))
        return pc.if_else(pa.array(counts > 0), joined, pa.nulls(n_groups, pa.string()))
    if func in ("median", "quantile_cont", "quantile_disc", "quantile"):
        return _quantiles(spec, parents, values, n_groups)
    # DISTINCT sum / avg / min / max / ... : aggregate the de-duplicated pairs by group
    inner = AggregateSpec(spec.func, "v", "r", spec.type)
    reduced = aggregate_table(pa.table({"g": parents, "v": values}), ["g"], [inner])
    out = pa.nulls(n_groups, spec.type)
    if reduced.num_rows:
        slots = np.full(n_groups, -1, dtype=np.int64)
        slots[reduced["g"].to_numpy()] = np.arange(reduced.num_rows)
        idx = pa.array(np.where(slots >= 0, slots, 0))
        taken = reduced["r"].combine_chunks().take(idx)
        out = pc.if_else(pa.array(slots >= 0), taken, out)
    if spec.func == "count":
        out = pc.fill_null(out, 0)
    return out


def _quantiles(spec, parents, values, n_groups) -> pa.Array:
    q = float(spec.option("quantile", 0.5))
    order = pc.sort_indices(pa.table({"g": parents, "v": values}),
                            sort_keys=[("g", "ascending"), ("v", "ascending")])
    sorted_values = values.take(order)
    counts = np.bincount(parents.to_numpy(), minlength=n_groups)
    starts = np.cumsum(counts) - counts
    has = counts > 0
    if spec.func == "quantile_disc":
        # DuckDB's discrete index: max(1, n - floor(n - q * n)) - 1
        index = np.maximum(1, counts - np.floor(counts - q * counts).astype(np.int64)) - 1
        pos = starts + index.clip(0)
        taken = sorted_values.take(pa.array(np.where(has, pos, 0)))
        return pc.if_else(pa.array(has), taken, pa.nulls(n_groups, taken.type))
    position = q * (counts - 1)
    lower = np.floor(position).astype(np.int64).clip(0)
    upper = np.ceil(position).astype(np.int64).clip(0)
    lo_index, hi_index = np.where(has, starts + lower, 0), np.where(has, starts + upper, 0)
    fraction = position - lower
    value_type = sorted_values.type
    if pa.types.is_decimal(value_type) and value_type.precision <= 18 or \
            pa.types.is_temporal(value_type):
        # DuckDB: lo + (hi - lo) * d in double, truncated back to the unscaled integer
        # (decimals) or to microseconds (dates become timestamps)
        if pa.types.is_decimal(value_type):
            units = _decimal_units(sorted_values)
        else:
            units = pc.cast(pc.cast(sorted_values, spec.type), pa.int64()).to_numpy(
                zero_copy_only=False)
        lo_units = units[lo_index] if len(units) else np.zeros(n_groups, np.int64)
        hi_units = units[hi_index] if len(units) else np.zeros(n_groups, np.int64)
        result = np.trunc(lo_units + (hi_units - lo_units).astype(np.float64) * fraction)
        result = np.where(has, result, 0).astype(np.int64)
        if pa.types.is_decimal(spec.type):
            return _decimal_from_units(result, spec.type, ~has)
        return pa.array(result, pa.int64(), mask=~has).cast(spec.type)
    # BIGINT beyond 2**53 loses precision in double, as in DuckDB
    as_float = np.asarray(pc.cast(sorted_values, pa.float64(), safe=False).to_numpy(
        zero_copy_only=False))
    lo_values = as_float[lo_index] if len(as_float) else np.zeros(n_groups)
    hi_values = as_float[hi_index] if len(as_float) else np.zeros(n_groups)
    result = lo_values + (hi_values - lo_values) * fraction
    result = pa.array(result, pa.float64(), mask=~has)
    return result if spec.type == pa.float64() else pc.cast(result, spec.type)


def _decimal_units(values: pa.Array) -> np.ndarray:
    """The unscaled integers of a DECIMAL(<= 18, s) array (NULL slots arbitrary)."""
    words = np.frombuffer(values.buffers()[1], dtype=np.int64)
    return words.reshape(-1, 2)[values.offset:values.offset + len(values), 0]


def _decimal_from_units(units: np.ndarray, type_: pa.DataType, mask: np.ndarray) -> pa.Array:
    words = np.empty((len(units), 2), dtype=np.int64)
    words[:, 0], words[:, 1] = units, np.where(units < 0, -1, 0)
    array = pa.Array.from_buffers(type_, len(units), [None, pa.py_buffer(words.tobytes())])
    return pc.if_else(pa.array(~mask), array, pa.nulls(len(units), type_))


# ----------------------------------------------------------------------------- two phases
#
#   partial (per input partition, per chunk)      final (per hash partition of the keys)
#   sum(x)   -> s = sum(x)                         sum(s)  (integers: exact, DECIMAL(38, 0))
#   count(x) -> c = count(x)                       sum(c)
#   min/max, bool_and/or, any_value -> same        same function over the states
#   bit_and/or/xor -> same                          same function over the states
#   avg(x)   -> s = sum(x)::double, c = count(x)   sum(s) / sum(c)  (doubles: AVG of integers
#                                                  and decimals is an exact SUM and COUNT,
#                                                  optimizer/exact_avg.py)
#   corr, covar_*, regr_* -> co-moments (a struct)  merged with Chan's formula, finished
#                                                   (functions/comoments.py)



def is_decomposable(spec: AggregateSpec) -> bool:
    return capabilities(spec.func).decomposable and not spec.distinct


def partial_specs(spec: AggregateSpec) -> list[AggregateSpec]:
    """The state columns a partial aggregate computes for ``spec``."""
    if spec.func in ("avg", "mean"):
        return [AggregateSpec("sum", spec.column, f"{spec.output}.sum", pa.float64()),
                AggregateSpec("count", spec.column, f"{spec.output}.count", pa.int64())]
    if spec.func in ("count", "count_star"):
        return [AggregateSpec(spec.func, spec.column, f"{spec.output}.count", pa.int64())]
    if spec.func in comoments.BIVARIATE:
        return [AggregateSpec(_COMOMENTS, spec.column, f"{spec.output}.state",
                              comoments.STATE_TYPE, options=spec.options)]
    return [AggregateSpec(spec.func, spec.column, f"{spec.output}.state", spec.type)]


def merge_specs(spec: AggregateSpec) -> list[AggregateSpec]:
    """Aggregates over the state columns that combine partial results."""
    merge = {"count": "sum", "count_star": "sum", "avg": "sum", "mean": "sum"}.get(
        spec.func, spec.func)
    if spec.func in comoments.BIVARIATE:
        merge = _COMOMENTS_MERGE
    return [AggregateSpec(merge, state.output, state.output, state.type)
            for state in partial_specs(spec)]


def finish_merged(spec: AggregateSpec, merged: list[pa.ChunkedArray]) -> pa.Array:
    """The final value of ``spec`` from its merged state columns."""
    if spec.func in ("avg", "mean"):
        total, count = merged
        value = pc.divide(total, pc.cast(count, pa.float64()))
        return pc.if_else(pc.equal(count, 0), pa.scalar(None, pa.float64()), value)
    if spec.func in ("count", "count_star"):
        return pc.fill_null(merged[0], 0)
    if spec.func in comoments.BIVARIATE:
        return comoments.finish(spec.func, comoments.CoMoments.from_arrow(merged[0]))
    return _cast_result(merged[0], spec.type)



# Skipping partial aggregation: where the group keys barely repeat, a partial aggregate costs
# a full hash aggregation and reduces almost nothing; it can instead hand each input row on
# as a state of its own (a group of one row), which the final aggregate merges as any state:
#
#   count(*) -> 1     count(x) -> 1 if x is not NULL else 0     sum(x) -> x (in the state type)
#   avg(x)   -> (x::double, 1 or 0)     min, max, any_value, bool_and/or, bit_* -> x
#
# The co-moment statistics (corr, regr_*) have no cheap one-row state: they always aggregate.
_ROW_IS_STATE = ("min", "max", "bool_and", "bool_or", "every", "any_value", "first",
                 "arbitrary") + BITWISE


def has_row_states(spec: AggregateSpec) -> bool:
    """Whether one input row converts to ``spec``'s partial state without aggregating."""
    return is_decomposable(spec) and (
        spec.func in _ROW_IS_STATE + ("count", "count_star", "sum", "avg", "mean"))


def row_states(spec: AggregateSpec, table: pa.Table) -> list[pa.ChunkedArray]:
    """Each row of ``table`` as its own partial state of ``spec``: the columns
    ``partial_specs(spec)`` would compute for a group of that row alone."""
    states = partial_specs(spec)
    if spec.func == "count_star":
        return [pa.chunked_array([pa.array(np.ones(table.num_rows, np.int64))], pa.int64())]
    values = table[spec.column]
    counts = pc.cast(pc.is_valid(values), pa.int64())
    if spec.func == "count":
        return [counts]
    if pa.types.is_boolean(values.type) and not pa.types.is_boolean(states[0].type):
        values = pc.cast(values, pa.int64())  # Arrow casts no boolean to decimal
    first = values if values.type == states[0].type else \
        pc.cast(values, states[0].type, safe=not pa.types.is_floating(states[0].type))
    if spec.func in ("avg", "mean"):
        return [first, counts]
    return [first]
