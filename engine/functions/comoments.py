"""Two-variable statistics (corr, covar_*, regr_*) from co-moments, as DuckDB defines them.

Every one of them is a function of one state per group (or window frame) of the pairs
``(y, x)`` where neither is NULL (the SQL order is ``f(y, x)``: the dependent variable first)::

    count    n                        sum_x, sum_y      sums of x and y
    cxy      sum((x - mean_x) * (y - mean_y))           m2x, m2y   sum((x - mean)**2)
    constant_x, constant_y            every x (y) of the group is one finite value

``cxy``, ``m2x``, ``m2y`` are centered (two-pass, or merged with Chan's formula), never
``sum(x*y) - sum(x)*sum(y)/n``, which cancels catastrophically for data far from zero.
A constant variable gets exactly zero spread, as DuckDB's Welford update gives it, so
``corr`` of a constant column is NaN (0 / 0) and ``regr_r2`` follows DuckDB's special cases.

The state travels between the two phases of an aggregation (and into spill runs) as one
struct column (``STATE_TYPE``); min and max of x and y ride along so that merged partial
states still know a constant variable exactly.

Example:
    >>> m = from_sorted_rows(np.array([2.0, 4.0, 7.0]), np.array([1.0, 2.0, 3.0]),
    ...                      np.ones(3, dtype=bool), np.array([0, 3]))
    >>> round(finish("regr_slope", m)[0].as_py(), 12), finish("regr_count", m).to_pylist()
    (2.5, [3])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import PlanError

BIVARIATE = ("corr", "covar_pop", "covar_samp", "regr_slope", "regr_intercept", "regr_count",
             "regr_r2", "regr_avgx", "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy")

_FIELDS = ("count", "sum_x", "sum_y", "cxy", "m2x", "m2y", "min_x", "max_x", "min_y", "max_y")
STATE_TYPE = pa.struct([pa.field("count", pa.int64())] +
                       [pa.field(name, pa.float64()) for name in _FIELDS[1:]])


def return_type(func: str) -> pa.DataType:
    """DuckDB's: UINTEGER for regr_count, DOUBLE for the others."""
    return pa.uint32() if func == "regr_count" else pa.float64()


@dataclass
class CoMoments:
    """One state per group: numpy arrays of equal length (see the module docstring)."""

    count: np.ndarray
    sum_x: np.ndarray
    sum_y: np.ndarray
    cxy: np.ndarray
    m2x: np.ndarray
    m2y: np.ndarray
    min_x: np.ndarray
    max_x: np.ndarray
    min_y: np.ndarray
    max_y: np.ndarray

    def to_arrow(self) -> pa.StructArray:
        """The states as a ``STATE_TYPE`` column (partial aggregates, spill runs)."""
        arrays = [pa.array(np.asarray(getattr(self, name)), field.type)
                  for name, field in zip(_FIELDS, STATE_TYPE)]
        return pa.StructArray.from_arrays(arrays, fields=list(STATE_TYPE))

    @staticmethod
    def from_arrow(states: pa.Array | pa.ChunkedArray) -> CoMoments:
        """States read back; a NULL state (a global aggregate over no rows) counts 0 pairs."""
        if isinstance(states, pa.ChunkedArray):
            states = states.combine_chunks() if states.num_chunks else pa.array([], STATE_TYPE)
        valid = states.is_valid()
        empty = {"count": 0, "min_x": np.inf, "min_y": np.inf, "max_x": -np.inf,
                 "max_y": -np.inf}
        values = {}
        for name in _FIELDS:
            column = pc.if_else(valid, states.field(name),
                                pa.scalar(empty.get(name, 0.0), STATE_TYPE.field(name).type))
            values[name] = np.asarray(column.to_numpy(zero_copy_only=False))
        return CoMoments(**values)


def _grouped(op: np.ufunc, values: np.ndarray, offsets: np.ndarray, identity: float
             ) -> np.ndarray:
    """``op`` over each group's slice ``values[offsets[g]:offsets[g + 1]]`` (identity if
    empty)."""
    groups = len(offsets) - 1
    out = np.full(groups, identity, dtype=np.float64)
    sizes = np.diff(offsets)
    nonempty = sizes > 0
    if len(values) and nonempty.any():
        out[nonempty] = op.reduceat(values, offsets[:-1][nonempty])
    return out


def _sums(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each group's sum: contiguous slices, so one sequential reduceat (no scatter)."""
    return _grouped(np.add, values, offsets, 0.0)


def from_sorted_rows(y: np.ndarray, x: np.ndarray, valid: np.ndarray, offsets: np.ndarray
                     ) -> CoMoments:
    """The co-moments of each group of rows, the rows ordered group by group
    (group g is rows ``offsets[g]:offsets[g + 1]``); ``valid``: neither value is NULL."""
    sizes = np.diff(offsets)
    x = np.where(valid, x, 0.0)
    y = np.where(valid, y, 0.0)
    count = _sums(valid.astype(np.float64), offsets).astype(np.int64)
    sum_x, sum_y = _sums(x, offsets), _sums(y, offsets)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_x = np.repeat(np.where(count > 0, sum_x / np.maximum(count, 1), 0.0), sizes)
        mean_y = np.repeat(np.where(count > 0, sum_y / np.maximum(count, 1), 0.0), sizes)
        dx = np.where(valid, x - mean_x, 0.0)
        dy = np.where(valid, y - mean_y, 0.0)
        cxy, m2x, m2y = _sums(dx * dy, offsets), _sums(dx * dx, offsets), \
            _sums(dy * dy, offsets)
    return CoMoments(
        count, sum_x, sum_y, cxy, m2x, m2y,
        _grouped(np.minimum, np.where(valid, x, np.inf), offsets, np.inf),
        _grouped(np.maximum, np.where(valid, x, -np.inf), offsets, -np.inf),
        _grouped(np.minimum, np.where(valid, y, np.inf), offsets, np.inf),
        _grouped(np.maximum, np.where(valid, y, -np.inf), offsets, -np.inf))


def merge_sorted(states: CoMoments, offsets: np.ndarray) -> CoMoments:
    """Partial states merged per group (Chan et al.), the states ordered group by group."""
    sizes = np.diff(offsets)
    count = _sums(states.count.astype(np.float64), offsets).astype(np.int64)
    sum_x, sum_y = _sums(states.sum_x, offsets), _sums(states.sum_y, offsets)
    with np.errstate(invalid="ignore", divide="ignore"):
        has = states.count > 0
        part_x = np.where(has, states.sum_x / np.maximum(states.count, 1), 0.0)
        part_y = np.where(has, states.sum_y / np.maximum(states.count, 1), 0.0)
        mean_x = np.repeat(sum_x / np.maximum(count, 1), sizes)
        mean_y = np.repeat(sum_y / np.maximum(count, 1), sizes)
        n = states.count.astype(np.float64)
        shift_x = np.where(has, part_x - mean_x, 0.0)
        shift_y = np.where(has, part_y - mean_y, 0.0)
        cxy = _sums(states.cxy + n * shift_x * shift_y, offsets)
        m2x = _sums(states.m2x + n * shift_x * shift_x, offsets)
        m2y = _sums(states.m2y + n * shift_y * shift_y, offsets)
    return CoMoments(count, sum_x, sum_y, cxy, m2x, m2y,
                     _grouped(np.minimum, states.min_x, offsets, np.inf),
                     _grouped(np.maximum, states.max_x, offsets, -np.inf),
                     _grouped(np.minimum, states.min_y, offsets, np.inf),
                     _grouped(np.maximum, states.max_y, offsets, -np.inf))


def finish(func: str, m: CoMoments) -> pa.Array:
    """``func``'s value of every state, as DuckDB computes it (NULL over no pairs)."""
    count = m.count
    if func == "regr_count":
        return pa.array(count.astype(np.uint32), pa.uint32())
    # a variable with one finite value has no spread at all (DuckDB's Welford update)
    constant_x = (m.min_x == m.max_x) & np.isfinite(m.min_x)
    constant_y = (m.min_y == m.max_y) & np.isfinite(m.min_y)
    m2x = np.where(constant_x, 0.0, m.m2x)
    m2y = np.where(constant_y, 0.0, m.m2y)
    cxy = np.where(constant_x | constant_y, 0.0, m.cxy)
    empty = count == 0
    n = np.maximum(count, 1).astype(np.float64)
    null = empty
    with np.errstate(invalid="ignore", divide="ignore"):
        var_x, var_y, cov = m2x / n, m2y / n, cxy / n
        if func == "covar_pop":
            value = cov
        elif func == "covar_samp":
            null = count < 2
            value = cxy / np.maximum(count - 1, 1)
        elif func == "corr":
            value = cov / (np.sqrt(var_x) * np.sqrt(var_y))
        elif func == "regr_slope":
            value = cov / var_x
        elif func == "regr_intercept":
            null = empty | (var_x == 0)
            value = m.sum_y / n - (cov / var_x) * (m.sum_x / n)
        elif func == "regr_r2":
            null = empty | (var_x == 0)
            r = cov / (np.sqrt(var_x) * np.sqrt(var_y))
            value = np.where(var_y == 0, 1.0, r * r)
        elif func == "regr_avgx":
            value = m.sum_x / n
        elif func == "regr_avgy":
            value = m.sum_y / n
        elif func == "regr_sxx":
            value = m2x
        elif func == "regr_syy":
            value = m2y
        elif func == "regr_sxy":
            value = cxy
        else:
            raise PlanError(f"{func}() is not a two-variable statistic")
    return pa.array(np.where(null, 0.0, value), pa.float64(), mask=null)


__all__ = ["BIVARIATE", "STATE_TYPE", "CoMoments", "finish", "from_sorted_rows",
           "merge_sorted", "return_type"]
