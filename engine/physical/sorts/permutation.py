"""Sort permutations: the key columns a sort orders by and the stable permutation of rows.

Shared by every sorting operator (SortExec, the merges, the window and aggregate fallbacks):
integer-like keys are packed into one uint64 per row (see packed_sort), others use Arrow's
``sort_indices``. DuckDB's order is kept: NaN is the greatest double.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.functions.scalar.calendar import interval_order_parts
from plansight.engine.logical.expr import SortKey
from plansight.engine.physical.expressions import evaluate
from plansight.engine.physical.sorts.packed_sort import packed_sort_indices


def sort_columns(table: pa.Table | pa.RecordBatch,
                 keys: list[SortKey]) -> tuple[list[pa.Array], list[tuple[str, str, str]]]:
    """The columns ``sort_indices`` orders by, with Arrow sort keys ``(name, order, placement)``.

    A floating key contributes two columns: its NaN-ness, then its values; an INTERVAL key
    two, its length as DuckDB orders it (``interval_order_parts``: a month = 30 days).
    """
    columns, sort_keys = [], []
    for key in keys:
        column = evaluate(key.expr, table)
        order = "descending" if key.descending else "ascending"
        placement = "at_start" if key.nulls_first else "at_end"
        if pa.types.is_interval(column.type):
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            for part in interval_order_parts(column):
                columns.append(part)
                sort_keys.append((f"k{len(sort_keys)}", order, placement))
            continue
        if pa.types.is_floating(column.type):
            # DuckDB: NaN is the greatest double; Arrow puts NaN next to the NULLs instead
            # (wrong for ASC NULLS FIRST and DESC NULLS LAST), so NaN-ness sorts first
            columns.append(pc.is_nan(column))
            sort_keys.append((f"k{len(sort_keys)}", order, placement))
        columns.append(column)
        sort_keys.append((f"k{len(sort_keys)}", order, placement))
    return columns, sort_keys


def sort_indices(table: pa.Table | pa.RecordBatch, keys: list[SortKey]) -> pa.Array:
    """Stable sort permutation of ``table`` by ``keys`` (evaluated on the table)."""
    return sort_permutation(*sort_columns(table, keys))


def sort_permutation(columns: list[pa.Array], sort_keys: list[tuple[str, str, str]],
                     sorted_runs: bool = False) -> pa.Array:
    """Stable sort permutation of the rows of ``columns`` (see ``sort_columns``): packed into
    one uint64 per row when the keys allow it (several times faster), else Arrow's sort.
    ``sorted_runs``: the rows are sorted runs one after the other (see packed_sort)."""
    packed = packed_sort_indices(columns, sort_keys, sorted_runs)
    if packed is not None:
        return pa.array(packed)
    keyed = pa.table(columns, names=[name for name, _, _ in sort_keys])
    return pc.sort_indices(keyed, sort_keys=sort_keys)


def contiguous(table: pa.Table) -> pa.Table:
    """``table`` with every column in one chunk, copied a column at a time.

    A column whose chunks cannot be joined (a string column over 2 GiB overflows its 32-bit
    offsets) stays chunked: it is taken chunk-aware, slower but correct.
    """
    schema, columns = table.schema, []
    while table.num_columns:
        column = table.column(0)
        try:
            columns.append(pa.chunked_array([column.combine_chunks()], type=column.type)
                           if column.num_chunks > 1 else column)
        except (pa.ArrowInvalid, pa.ArrowCapacityError):
            columns.append(column)
        # dropping the table's reference frees the column's input chunks (if nobody else
        # holds them) before the next column is copied
        table = table.remove_column(0)
    return pa.Table.from_arrays(columns, schema=schema)
