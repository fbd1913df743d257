"""Streaming aggregation over input sorted on the group keys (no hash table of all groups).

When rows arrive sorted on the group keys (in any permutation, any direction), each group is
one run of consecutive rows. A group is complete as soon as a different key follows, so it
can be emitted at once and only the open (last) group is carried to the next batch:

    batch:     k = [ 3  3 | 4 | 5  5  5 | 6  6 ]        (carried open group: k = 3)
    new run:        F  F   T   T  F  F   T  F          compare every row with the one before
    run code:       0  0   1   2  2  2   3  3          cumsum; 0 = the carried group
                    └──────┴───┴──────┘  └──┴── open: carried to the next batch
                          complete: emitted now

Runs are found vectorized (Arrow's not_equal on the keys shifted by one row, NULL equal to
NULL and NaN equal to NaN, like GROUP BY) and reduced in one Arrow ``group_by`` over the
integer run codes, so the per-batch cost does not depend on the number of groups.

Two ways to carry the open group:

- ``StateCarry`` (decomposable aggregates: sum, count, min, max, avg, bool_and/or, ...): the
  open group is one row of partial states, merged with its continuation in the next batch.
  Memory: one state row.
- ``RowCarry`` (everything else: DISTINCT, median, string_agg, stddev, ...): the open group's
  rows are kept (zero-copy slices) until the group completes. Memory: one group's rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.functions.aggregate import (
    AggregateSpec,
    aggregate_table,
    finish_merged,
    merge_specs,
    partial_specs,
)

_RUN = "__run"


def comparable(type_: pa.DataType) -> bool:
    """Key types whose runs can be found by comparing neighbours with Arrow kernels."""
    if pa.types.is_dictionary(type_):
        type_ = type_.value_type
    return not (pa.types.is_nested(type_) or pa.types.is_null(type_))


def _plain(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_floating(array.type):
        array = pc.add(array, 0.0)  # -0.0 groups with 0.0 (GROUP BY folds it too)
    return array


def _numpy_bool(array: pa.Array) -> np.ndarray:
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=bool)


def changes(array: pa.Array) -> np.ndarray:
    """For rows 1..n-1 of ``array``: whether the value differs from the row before.

    NULL equals NULL and NaN equals NaN, as in grouping.
    """
    n = len(array)
    if n < 2:
        return np.zeros(0, dtype=bool)
    before, after = array.slice(0, n - 1), array.slice(1)
    differ = _numpy_bool(pc.fill_null(pc.not_equal(before, after), False))
    if pa.types.is_floating(array.type):
        both_nan = _numpy_bool(pc.fill_null(pc.and_(pc.is_nan(before), pc.is_nan(after)),
                                            False))
        differ &= ~both_nan
    if array.null_count:
        valid = _numpy_bool(array.is_valid())
        differ |= valid[:-1] != valid[1:]
    return differ


def run_starts(keys: list[pa.Array], previous: list[pa.Array] | None) -> np.ndarray:
    """Per row: whether it starts a new group. ``previous``: the one-row keys of the row
    before the first (the open group's), or None at the start of the input."""
    n = len(keys[0])
    new = np.zeros(n, dtype=bool)
    for i, key in enumerate(keys):
        if previous is None:
            new[1:] |= changes(key)
        else:
            new |= changes(pa.concat_arrays([previous[i], key]))
    if previous is None and n:
        new[0] = True
    return new


def _grouped(table: pa.Table, codes: np.ndarray, keys: list[str],
             specs: list[AggregateSpec]) -> pa.Table:
    """One row per run code (ascending): the keys of its first row, then each spec."""
    coded = table.append_column(_RUN, pa.array(codes, pa.int64()))
    result = aggregate_table(coded, [_RUN], specs)
    result = result.take(pc.sort_indices(result[_RUN]))
    firsts = np.flatnonzero(np.diff(codes, prepend=codes[0] - 1) != 0)
    key_columns = [_plain(table[k]).take(pa.array(firsts)) for k in keys]
    return pa.table(key_columns + result.drop_columns([_RUN]).columns,
                    names=keys + [s.output for s in specs])


class _Carry:
    """Shared driver: split each batch into complete groups and the open one."""

    def __init__(self, keys: list[str], schema: pa.Schema):
        self.keys, self.schema = keys, schema
        self.previous: list[pa.Array] | None = None  # one-row keys of the open group

    def push(self, batch: pa.RecordBatch) -> Iterator[pa.Table]:
        if batch.num_rows == 0:
            return
        keys = [_plain(batch.column(batch.schema.get_field_index(k))) for k in self.keys]
        new = run_starts(keys, self.previous)
        codes = np.cumsum(new)  # 0: rows continuing the open group
        last = batch.num_rows - 1
        self.previous = [k.slice(last, 1) for k in keys]
        yield from self._consume(pa.Table.from_batches([batch]), codes)

    def _consume(self, table: pa.Table, codes: np.ndarray) -> Iterator[pa.Table]:
        raise NotImplementedError

    def finish(self) -> Iterator[pa.Table]:
        raise NotImplementedError

    @property
    def held_bytes(self) -> int:
        return 0


class StateCarry(_Carry):
    """Decomposable aggregates: carries one row of partial states.

    ``reduce``: specs turning input rows into states (partial specs, or merge specs when the
    input already holds states); ``finish``: whether to turn states into final values (a
    Partial aggregate emits states).
    """

    def __init__(self, keys: list[str], specs: list[AggregateSpec], schema: pa.Schema,
                 input_is_states: bool, finish: bool):
        super().__init__(keys, schema)
        self.specs, self.finishes = specs, finish
        self.merges = [m for s in specs for m in merge_specs(s)]
        self.reduce = self.merges if input_is_states else \
            [st for s in specs for st in partial_specs(s)]
        self.open: pa.Table | None = None  # keys + states of the open group

    def _consume(self, table, codes):
        states = _grouped(table, codes, self.keys, self.reduce)
        if self.open is not None:
            if codes[0] == 0:  # the batch continues the open group: merge the two rows
                head = pa.concat_tables([self.open, states.slice(0, 1)])
                merged = _grouped(head, np.zeros(2, np.int64), self.keys, self.merges)
                states = pa.concat_tables([merged, states.slice(1)])
            else:
                yield self._output(self.open)
        self.open = states.slice(states.num_rows - 1)
        if states.num_rows > 1:
            yield self._output(states.slice(0, states.num_rows - 1))

    def finish(self):
        if self.open is not None:
            yield self._output(self.open)
            self.open = None

    def _output(self, states: pa.Table) -> pa.Table:
        if not self.finishes:
            return _conform(states.columns, self.schema)
        columns = [states.column(k) for k in self.keys]
        position = len(self.keys)
        for spec in self.specs:
            width = len(merge_specs(spec))
            columns.append(finish_merged(spec, [states.column(position + i)
                                                for i in range(width)]))
            position += width
        return _conform(columns, self.schema)


class RowCarry(_Carry):
    """Any aggregate: carries the open group's rows until a different key follows."""

    def __init__(self, keys: list[str], specs: list[AggregateSpec], schema: pa.Schema):
        super().__init__(keys, schema)
        self.specs = specs
        self.rows: list[pa.Table] = []  # the open group's rows so far

    @property
    def held_bytes(self) -> int:
        return sum(t.nbytes for t in self.rows)

    def _consume(self, table, codes):
        top = int(codes[-1])
        if top == 0:  # no group ends in this batch
            self.rows.append(table)
            return
        cut = int(np.searchsorted(codes, top))  # first row of the open group
        carried = sum(t.num_rows for t in self.rows)
        if carried or cut:
            complete = pa.concat_tables(self.rows + [table.slice(0, cut)])
            complete_codes = np.concatenate([np.zeros(carried, np.int64), codes[:cut]])
            yield self._output(complete, complete_codes)
        self.rows = [table.slice(cut)]

    def finish(self):
        if self.rows:
            table = pa.concat_tables(self.rows)
            self.rows = []
            yield self._output(table, np.zeros(table.num_rows, np.int64))

    def _output(self, table: pa.Table, codes: np.ndarray) -> pa.Table:
        return _conform(_grouped(table, codes, self.keys, self.specs).columns, self.schema)


def _conform(columns, schema: pa.Schema) -> pa.Table:
    return pa.Table.from_arrays([c.cast(f.type) if c.type != f.type else c
                                 for c, f in zip(columns, schema)], schema=schema)
