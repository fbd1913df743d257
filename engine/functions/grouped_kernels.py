"""GROUP BY on compiled group ids: the fast path of ``aggregate_table``.

    key columns ──group_ids (numba hash tables)──▶ id per row ──first row per id──▶ key values
    argument columns ──scatter by id (numba)──▶ sum / count / min / max / avg per group
                     ──anything else: Arrow's group_by over the ids──▶ reordered by id

Integer-encoded keys (integers, dates, decimals up to 18 digits, ...) and strings of at most
7 bytes, packed into one int64 each (keys.py). With many groups Arrow's hash aggregation
costs far more than a dense id and a scatter (Q18 groups 6M lineitem rows into 1.5M orders:
0.65 s against 0.25 s), most of all for surrogate keys in a narrow range, numbered by an
array instead of a hash table; and every kernel here releases the GIL, so partitions
aggregate at the same time. Longer strings stay with Arrow: per-row hashing of bytes
measured no faster than Arrow's, and the strings would first be copied into one buffer;
packed, Q1's two one-letter flags number through one range table together, and its
aggregate (6M rows, 11 states) took ~0.4 s against Arrow's ~0.55 s. Other key types
(decimals over 18 digits, nested types) leave the whole aggregate to Arrow too.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from plansight.engine.kernels import decimal as D
from plansight.engine.kernels import group_states as S
from plansight.engine.kernels.keys import group_ids, key_kind, short_bytes, validity

#: the aggregates computed by a scatter kernel (others go to Arrow, grouped by the ids)
COMPILED = ("count", "count_star", "sum", "avg", "mean", "min", "max")


def aggregate_by_ids(table: pa.Table, keys: list[str], specs: list,
                     aggregate_rest: Callable[[pa.Table, list[str], list], pa.Table]
                     ) -> pa.Table | None:
    """GROUP BY ``keys`` (at least one) as ``aggregate_table`` computes it, or None when a key
    column has no integer encoding. ``aggregate_rest(table, keys, specs)`` computes the
    specs no kernel covers (Arrow's path), grouped by an id column."""
    columns = [table[k] for k in keys]
    if not all(key_kind(c.type) == "int" or key_kind(c.type) == "bytes" and short_bytes(c)
               for c in columns):
        return None  # long strings: Arrow's hash aggregation is as fast as ours (module doc)
    ids, groups = group_ids(columns)
    first = S.first_rows(ids, groups)
    out = [take_rows(c, first) for c in columns]
    results: dict[int, pa.Array] = {}
    # (column, kind) -> (sums, counts): one pass for SUM(x) and COUNT(x); "rows" -> rows
    # per group, the counts of COUNT(*) and of every column without NULLs
    shared: dict = {}
    for i, spec in enumerate(specs):
        result = None
        if spec.func in COMPILED and not spec.distinct:
            column = table[spec.column] if spec.column is not None else None
            result = _compiled(spec, column, ids, groups, shared)
        if result is not None:
            results[i] = result
    rest = [i for i in range(len(specs)) if i not in results]
    if rest:
        with_ids = table.append_column("__gid", pa.array(ids, pa.int64()))
        grouped = aggregate_rest(with_ids, ["__gid"], [specs[i] for i in rest])
        # Arrow numbers groups its own way: put its rows in id order
        position = np.empty(groups, dtype=np.int64)
        position[np.asarray(grouped["__gid"].to_numpy(), dtype=np.int64)] = \
            np.arange(grouped.num_rows)
        order = pa.array(position, pa.int64())
        for k, i in enumerate(rest):
            results[i] = grouped.column(1 + k).take(order)
    out += [results[i] for i in range(len(specs))]
    return pa.table(out, names=list(keys) + [spec.output for spec in specs])


def take_rows(column: pa.ChunkedArray | pa.Array, rows: np.ndarray) -> pa.Array:
    """``column.take(rows)``, taken chunk by chunk when ``rows`` ascend: Arrow's take on a
    chunked array first concatenates its chunks, which for each compacted chunk of a string
    key (Q1's flags, 4 chunks of ~56K rows, to take 4 rows) cost more than the rest of the
    numbering. Rows out of order go to Arrow's take (no sort here)."""
    if not isinstance(column, pa.ChunkedArray) or column.num_chunks <= 1 or len(rows) == 0 \
            or not bool(np.all(rows[1:] >= rows[:-1])):
        return column.take(pa.array(rows, pa.int64()))
    # ascending, as first rows of ids numbered in order of first appearance are: each
    # chunk's share is a contiguous run of the rows, and the pieces are in order
    bounds = np.cumsum([0] + [len(chunk) for chunk in column.chunks])
    cuts = np.searchsorted(rows, bounds)
    pieces = [chunk.take(pa.array(rows[lo:hi] - start, pa.int64()))
              for chunk, start, lo, hi in zip(column.chunks, bounds, cuts, cuts[1:]) if hi > lo]
    return pa.concat_arrays(pieces)


def _chunks(column: pa.ChunkedArray | pa.Array, ids: np.ndarray):
    """(chunk, its rows' ids) for each chunk of ``column``."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    start = 0
    for chunk in chunks:
        yield chunk, ids[start:start + len(chunk)]
        start += len(chunk)


def _compiled(spec, column, ids: np.ndarray, groups: int, shared: dict) -> pa.Array | None:
    """``spec`` per group by a scatter kernel, or None when none applies (type, overflow).
    ``shared`` keeps the integer sums and counts per argument column, so SUM(x) and COUNT(x)
    of one column (TPC-H Q1's SUMs and the AVGs exact_avg makes of them) scatter it once."""
    func = spec.func
    counts = np.zeros(groups, dtype=np.int64)
    if func == "count_star":
        return pa.array(_rows_per_group(ids, groups, shared), pa.int64())
    if func == "count":
        known = shared.get(("count", spec.column))
        if known is not None:
            return pa.array(known, pa.int64())
        if column.null_count == 0:
            counts = _rows_per_group(ids, groups, shared)
        else:
            for chunk, chunk_ids in _chunks(column, ids):
                S.count_valid(chunk_ids, validity(chunk), counts)
        shared[("count", spec.column)] = counts
        return pa.array(counts, pa.int64())
    t = column.type
    kind = _value_kind(t)
    if kind is None and func == "sum" and pa.types.is_decimal128(t) and \
            D.values_fit_int64(column):
        kind = "decimal"  # a wide decimal whose values fit: summed exactly on int64
    if kind is None or (kind == "temporal" and func not in ("min", "max")):
        return None
    if func in ("min", "max"):
        if kind == "float":
            return None  # NaN orders above every number in SQL; Arrow's rules are kept
        states = np.zeros(groups, dtype=np.int64)
        update = S.min_int if func == "min" else S.max_int
        for chunk, chunk_ids in _chunks(column, ids):
            update(chunk_ids, _int64_values(chunk, kind), validity(chunk), states, counts)
        return _typed(states, counts > 0, t, kind)
    if kind != "float":
        if func != "sum" or pa.types.is_floating(spec.type):
            # AVG of integers or decimals, or its double partial sum: exact_avg rewrites
            # every such AVG into an exact SUM and COUNT before planning, so no grouped
            # aggregate asks for one; Arrow's path (aggregate_table) still covers them
            return None
        known = shared.get((spec.column, kind))
        if known is False:
            return None
        if known is not None:
            sums, counts = known
        else:
            sums = np.zeros(groups, dtype=np.int64)
            no_nulls = column.null_count == 0
            for chunk, chunk_ids in _chunks(column, ids):
                values = _int64_values(chunk, kind)
                if not (S.sum_int_no_nulls(chunk_ids, values, sums) if no_nulls else
                        S.sum_int(chunk_ids, values, validity(chunk), sums, counts)):
                    shared[(spec.column, kind)] = False
                    return None  # Arrow's path raises the SQL error or sums on wider words
            if no_nulls:  # every row counts: each group's rows (every id has one at least)
                counts = _rows_per_group(ids, groups, shared)
            shared[(spec.column, kind)] = (sums, counts)
            shared[("count", spec.column)] = counts
        if kind == "int" and pa.types.is_decimal(spec.type):  # SUM of integers: DECIMAL(38, 0)
            return D.from_unscaled(sums, counts > 0, spec.type)
        return _typed(sums, counts > 0, pa.int64() if kind == "int" else spec.type, kind)
    totals = np.zeros(groups, dtype=np.float64)  # over doubles, in row order
    for chunk, chunk_ids in _chunks(column, ids):
        values = chunk.to_numpy(zero_copy_only=False) if chunk.null_count == 0 else \
            chunk.fill_null(0).to_numpy(zero_copy_only=False)
        S.sum_float(chunk_ids, np.asarray(values, dtype=np.float64), validity(chunk), totals,
                    counts)
    if func in ("avg", "mean"):
        with np.errstate(invalid="ignore", divide="ignore"):
            totals = totals / counts
    return pa.array(totals, pa.float64(), mask=counts == 0)


def _rows_per_group(ids: np.ndarray, groups: int, shared: dict) -> np.ndarray:
    """The rows of each group, counted once per aggregate_by_ids call (``shared``): COUNT(*)
    and the counts of every NULL-free column are these. Read only, never updated."""
    rows = shared.get("rows")
    if rows is None:
        rows = np.zeros(groups, dtype=np.int64)
        S.count_rows(ids, rows)
        shared["rows"] = rows
    return rows


def _value_kind(t: pa.DataType) -> str | None:
    """"int" (integers), "decimal" (scaled int64), "temporal" (int64 or int32 ticks),
    "float"; None: no kernel."""
    if pa.types.is_integer(t) and t != pa.uint64():
        return "int"
    if D.fits_int64(t):
        return "decimal"
    if pa.types.is_floating(t) and not pa.types.is_float16(t):
        return "float"
    if pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t) or \
            pa.types.is_duration(t):
        return "temporal"
    return None


def _int64_values(column: pa.Array, kind: str) -> np.ndarray:
    """The exact int64 values (arbitrary under NULLs)."""
    if kind == "decimal":
        return D.unscaled(column)
    if len(column) == 0:
        return np.empty(0, dtype=np.int64)
    width = column.type.bit_width
    if kind == "temporal":
        dtype = np.int64 if width == 64 else np.int32
    else:
        dtype = column.type.to_pandas_dtype()
    values = np.frombuffer(column.buffers()[1], dtype=dtype)
    return values[column.offset:column.offset + len(column)].astype(np.int64, copy=False)


def _typed(states: np.ndarray, present: np.ndarray, t: pa.DataType, kind: str) -> pa.Array:
    """Per-group int64 states as an array of type ``t``, NULL where no value was seen."""
    mask = ~present
    if kind == "decimal":
        return D.from_unscaled(states, present, t)
    if kind == "temporal":
        width = np.int64 if t.bit_width == 64 else np.int32
        ints = pa.array(states.astype(width), mask=mask)
        return ints.view(t)
    return pa.array(states, pa.int64(), mask=mask).cast(t)
