"""Sort orders of table sources: declared by the user ("WITH ORDER") or read from Parquet.

A source that knows how its rows are sorted lets the planner skip sorts, stream sorted
aggregates and windows, merge partitions instead of re-sorting them and stop a top-k early.

    Session.register("t", table, sorted_by=["a", "b DESC NULLS FIRST"])
    Session.register_parquet("t", path, sorted_by="a")      # every file is sorted so
    Session.register_parquet("t", path)                      # Parquet `sorting_columns`

A *declared* order is checked as far as that is cheap, otherwise trusted like DataFusion's
``WITH ORDER``: an in-memory table is checked row by row (one vectorized pass over adjacent
rows per key); Parquet files against row-group statistics, which catch a file whose row
groups are out of order on the first key (or whose NULLs sit on the wrong side), not disorder
inside a row group. Rows that are not really sorted as declared give wrong results (a sort
skipped, a top-k stopped too early).

Parquet's ``sorting_columns`` metadata describes each *row group*, not the file: two row groups
are only known to follow each other when their statistics prove it (see
``ParquetSource.in_order``). A key without NULLS FIRST/LAST puts NULLs last, the engine's (and
DuckDB's) default for both directions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import PlanError, did_you_mean


@dataclass(frozen=True)
class SourceSortKey:
    """One key of a source's sort order, by source column name."""

    column: str
    descending: bool = False
    nulls_first: bool = False

    def __str__(self) -> str:
        return f"{self.column} {'DESC' if self.descending else 'ASC'} " \
               f"NULLS {'FIRST' if self.nulls_first else 'LAST'}"


_SPEC = re.compile(r'^\s*("(?:[^"]|"")+"|[^\s"]+)'
                   r'(?:\s+(ASC|DESC))?(?:\s+NULLS\s+(FIRST|LAST))?\s*$',
                   re.IGNORECASE)


def parse_sorted_by(spec: str | Sequence[str] | None,
                    schema: pa.Schema) -> tuple[SourceSortKey, ...]:
    """``"a"``, ``"a DESC"``, ``"a DESC NULLS FIRST"`` (a list, or one comma-separated string)
    as sort keys on ``schema``'s columns; a clear PlanError for anything else.

    Example:
        >>> import pyarrow as pa
        >>> schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
        >>> [str(k) for k in parse_sorted_by(["a", "b desc nulls first"], schema)]
        ['a ASC NULLS LAST', 'b DESC NULLS FIRST']
    """
    if spec is None:
        return ()
    if isinstance(spec, str):
        items = [part for part in spec.split(",") if part.strip()]
    elif isinstance(spec, Iterable):
        items = list(spec)
    else:
        raise PlanError(f"sorted_by must be a column name or a list of them, got {spec!r}")
    if not items:
        raise PlanError("sorted_by is empty: name at least one column")
    names = schema.names
    keys: list[SourceSortKey] = []
    for item in items:
        if not isinstance(item, str):
            raise PlanError(f"sorted_by entries are strings like 'a DESC NULLS FIRST', got "
                            f"{item!r}")
        match = _SPEC.match(item)
        if match is None:
            raise PlanError(f"cannot read sorted_by entry {item!r}: use 'column', "
                            "'column ASC|DESC' or 'column ASC|DESC NULLS FIRST|LAST'")
        column, direction, nulls = match.groups()
        if column.startswith('"'):
            column = column[1:-1].replace('""', '"')
        column = _resolve(column, names)
        if any(k.column == column for k in keys):
            raise PlanError(f"sorted_by names column {column!r} twice")
        keys.append(SourceSortKey(column, (direction or "").upper() == "DESC",
                                  (nulls or "").upper() == "FIRST"))
    return tuple(keys)


def _resolve(column: str, names: list[str]) -> str:
    if column in names:
        return column
    folded = [n for n in names if n.lower() == column.lower()]
    if len(folded) == 1:
        return folded[0]
    raise PlanError(f"sorted_by: unknown column {column!r}." + did_you_mean(column, names) +
                    f" Columns: {', '.join(names)}")


# ----------------------------------------------------------------------------- Parquet

def parquet_sorting_columns(metas: Sequence[Any],
                            schema: pa.Schema) -> tuple[SourceSortKey, ...]:
    """The order every row group of every file says it is sorted by (``sorting_columns``),
    cut before the first key that is not a top-level column; () when they disagree."""
    found = None
    for meta in metas:
        for index in range(meta.num_row_groups):
            columns = meta.row_group(index).sorting_columns
            if found is None:
                found = columns
            elif columns != found:
                return ()
    keys = []
    for column in found or ():
        path = meta.schema.column(column.column_index).path
        if "." in path or path not in schema.names:
            break
        keys.append(SourceSortKey(path, bool(column.descending), bool(column.nulls_first)))
    return tuple(keys)


def stats_prove_order(key: SourceSortKey, first, second) -> bool:
    """True only when row-group statistics ``(min, max, null count)`` prove that every row
    of ``second`` sorts strictly after every row of ``first`` on ``key`` — then on any key
    list starting with it. Float statistics leave NaN out, so floats never prove it."""
    if first is None or second is None:
        return False
    low1, high1, nulls1 = first
    low2, high2, nulls2 = second
    if any(isinstance(v, float) for v in (low1, high1, low2, high2)):
        return False
    # NULLs sort at one end: only the unit on that end may hold them
    if (nulls2 if key.nulls_first else nulls1) != 0:
        return False
    try:
        return bool(low1 > high2) if key.descending else bool(high1 < low2)
    except TypeError:
        return False


def stats_disprove_order(key: SourceSortKey, first, second) -> str | None:
    """Why row-group statistics show ``second`` cannot follow ``first`` on ``key`` (None when
    they do not show it). Statistics are ``(min, max, null count)``, None when absent."""
    if first is None or second is None:
        return None
    low1, high1, nulls1 = first
    low2, high2, nulls2 = second
    try:
        if key.descending and high2 > low1:
            return f"holds {key.column} = {high2!r} above the previous row group's minimum " \
                   f"{low1!r}"
        if not key.descending and low2 < high1:
            return f"holds {key.column} = {low2!r} below the previous row group's maximum " \
                   f"{high1!r}"
    except TypeError:
        return None
    if not key.nulls_first and nulls1:
        return f"follows a row group with NULL {key.column} (NULLS LAST)"
    if key.nulls_first and nulls2:
        return f"holds NULL {key.column} after non-NULL values (NULLS FIRST)"
    return None


def first_unsorted_row(table: pa.Table, keys: Sequence[SourceSortKey]) -> int | None:
    """The first row of ``table`` that sorts before the row above it under ``keys`` (None when
    the table is sorted so). One vectorized pass over adjacent pairs per key column; a float
    key is preceded by its NaN-ness (NaN sorts after every number, as in the sort)."""
    rows = table.num_rows
    if rows < 2:
        return None
    broken = np.zeros(rows - 1, dtype=bool)
    undecided = np.ones(rows - 1, dtype=bool)  # pairs equal on the keys compared so far
    for key in keys:
        column = table.column(key.column)
        parts = [pc.is_nan(column), column] if pa.types.is_floating(column.type) else [column]
        for part in parts:
            above, below = part.slice(0, rows - 1), part.slice(1)
            smaller = _flags(pc.less(below, above))
            larger = _flags(pc.greater(below, above))
            before, after = (larger, smaller) if key.descending else (smaller, larger)
            above_null = _flags(pc.is_null(above))
            below_null = _flags(pc.is_null(below))
            null_first = below_null & ~above_null  # the lower row NULL, the upper not
            null_last = above_null & ~below_null
            if key.nulls_first:
                before, after = before | null_first, after | null_last
            else:
                before, after = before | null_last, after | null_first
            broken |= undecided & before
            undecided &= ~(before | after)
    found = np.flatnonzero(broken)
    return int(found[0]) + 1 if len(found) else None


def _flags(values) -> np.ndarray:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)
