"""Turning candidate (probe row, build row) pairs into join output, for every join type.

Hash and nested-loop joins differ only in how they propose candidate pairs; filtering by
the residual predicate, tracking matched rows, and emitting outer/semi/anti rows is shared.
The build side is the physical left child (collected), the probe side the right (streamed):

    inner        pairs
    left         pairs + unmatched build rows at the end (probe columns NULL)
    right        pairs + unmatched probe rows per batch (build columns NULL)
    full         both
    left_semi / left_anti     build rows with / without a match, at the end
    right_semi / right_anti   probe rows with / without a match, per batch
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from plansight.engine.logical.expr import Expr
from plansight.engine.physical.expressions import evaluate_predicate
from plansight.engine.physical.vocabulary import JoinType

JOIN_TYPES = tuple(JoinType)


def join_schema(left: pa.Schema, right: pa.Schema, join_type: str) -> pa.Schema:
    join_type = JoinType.of(join_type)
    if join_type.emits_left_only:
        return left
    if join_type.emits_right_only:
        return right
    return pa.schema(list(left) + list(right))


def _take(table: pa.Table | pa.RecordBatch, indices: np.ndarray) -> list[pa.Array]:
    idx = pa.array(indices, pa.int64())
    return [col.take(idx) for col in table.columns]


def _nulls(schema: pa.Schema, n: int) -> list[pa.Array]:
    return [pa.nulls(n, f.type) for f in schema]


def _combine(columns) -> list[pa.Array]:
    return [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns]


class JoinAssembler:
    """Accumulates matches of one build table against a stream of probe batches."""

    def __init__(self, build: pa.Table, join_type: str, schema: pa.Schema,
                 filter: Expr | None = None):
        self.build, self.join_type, self.schema, self.filter = build, join_type, schema, filter
        # plain arrays, combined once: a take from them needs no per-batch chunk merging
        self.build_columns = _combine(build.columns)
        self.visited = np.zeros(build.num_rows, dtype=bool)
        self._track_build = join_type in ("left", "full", "left_semi", "left_anti")

    def pairs_batch(self, probe: pa.RecordBatch, probe_idx, build_idx) -> list[pa.Array]:
        """Build columns then probe columns of the candidate pairs (filter evaluation input)."""
        indices = pa.array(build_idx, pa.int64())
        build = [column.take(indices) for column in self.build_columns]
        if len(probe_idx) == probe.num_rows and \
                np.array_equal(probe_idx, np.arange(probe.num_rows)):
            return build + list(probe.columns)  # every probe row matched once: no gather
        return build + _take(probe, probe_idx)

    def probe(self, probe: pa.RecordBatch, probe_idx: np.ndarray, build_idx: np.ndarray,
              probe_excluded: np.ndarray | None = None):
        """Emit the output for one probe batch given its candidate pairs.

        ``probe_excluded`` marks probe rows that must not appear in anti output (NOT IN with
        a NULL key).
        """
        kind = self.join_type
        columns = None
        if self.filter is not None and len(probe_idx):
            columns = self.pairs_batch(probe, probe_idx, build_idx)
            pair_schema = pa.schema(list(self.build.schema) + list(probe.schema))
            mask = evaluate_predicate(self.filter,
                                      pa.RecordBatch.from_arrays(columns, schema=pair_schema))
            keep = np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)
            probe_idx, build_idx = probe_idx[keep], build_idx[keep]
            columns = [c.filter(mask) for c in columns]
        if self._track_build and len(build_idx):
            self.visited[build_idx] = True
        if kind in ("left_semi", "left_anti"):
            return
        if kind in ("right_semi", "right_anti"):
            matched = np.zeros(probe.num_rows, dtype=bool)
            matched[probe_idx] = True
            keep = matched if kind == "right_semi" else ~matched
            if probe_excluded is not None and kind == "right_anti":
                keep &= ~probe_excluded
            if keep.any():
                yield probe.filter(pa.array(keep))
            return
        if len(probe_idx):
            if columns is None:
                columns = self.pairs_batch(probe, probe_idx, build_idx)
            yield pa.RecordBatch.from_arrays(columns, schema=self.schema)
        if kind in ("right", "full"):
            matched = np.zeros(probe.num_rows, dtype=bool)
            matched[probe_idx] = True
            unmatched = np.flatnonzero(~matched)
            if len(unmatched):
                cols = _nulls(self.build.schema, len(unmatched)) + _take(probe, unmatched)
                yield pa.RecordBatch.from_arrays(cols, schema=self.schema)

    def finish(self, probe_schema: pa.Schema, batch_size: int, build_excluded: bool = False):
        """Rows that depend on the whole probe side: unmatched / semi / anti build rows."""
        kind = self.join_type
        if kind in ("left", "full"):
            rows = np.flatnonzero(~self.visited)
            for start in range(0, len(rows), batch_size):
                chunk = rows[start:start + batch_size]
                cols = _combine(_take(self.build, chunk)) + _nulls(probe_schema, len(chunk))
                yield pa.RecordBatch.from_arrays(cols, schema=self.schema)
        elif kind in ("left_semi", "left_anti"):
            rows = np.flatnonzero(self.visited if kind == "left_semi" else ~self.visited)
            for start in range(0, len(rows), batch_size):
                chunk = rows[start:start + batch_size]
                yield pa.RecordBatch.from_arrays(_combine(_take(self.build, chunk)),
                                                 schema=self.schema)


def expand_matches(probe_codes: np.ndarray, group_starts: np.ndarray, group_counts: np.ndarray,
                   build_order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All (probe row, build row) pairs with equal key codes, without a Python loop.

    ``probe_codes[i]`` is the build key group of probe row i (-1: no match); group g's build
    rows are ``build_order[group_starts[g] : group_starts[g] + group_counts[g]]``.

    Example:
        >>> expand_matches(np.array([1, -1, 0]), np.array([0, 1]), np.array([1, 2]),
        ...                np.array([5, 6, 7]))
        (array([0, 0, 2]), array([6, 7, 5]))
    """
    hit = probe_codes >= 0
    if len(group_counts) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    counts = np.where(hit, group_counts[np.where(hit, probe_codes, 0)], 0)
    total = int(counts.sum())
    probe_idx = np.repeat(np.arange(len(probe_codes)), counts)
    if total == 0:
        return probe_idx, np.empty(0, dtype=np.int64)
    run_start = np.repeat(np.cumsum(counts) - counts, counts)
    rank = np.arange(total) - run_start
    build_idx = build_order[group_starts[probe_codes[probe_idx]] + rank]
    return probe_idx, build_idx
