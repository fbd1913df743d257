"""Table sources a session can register: in-memory Arrow data and Parquet/CSV/IPC files.

A source knows its schema and row-count estimate, splits itself into scan units (batch ranges,
files, row groups) and reads one unit with a projection pushed into the reader.
"""

from __future__ import annotations

import glob
import itertools
import math
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from plansight.engine.errors import PlanError
from plansight.engine.exec.alignment import realigned
from plansight.engine.kernels.dictionary import decode_one_width
from plansight.engine.source_ordering import (
    SourceSortKey,
    first_unsorted_row,
    parquet_sorting_columns,
    parse_sorted_by,
    stats_disprove_order,
    stats_prove_order,
)
from plansight.engine.statistics import (
    EXACT_DISTINCT_ROWS,
    PREDICATE_SAMPLE_ROWS,
    SAMPLE_ROWS,
    ColumnStatistics,
    clustered_distinct,
    disjoint_ranges,
    from_arrow,
    from_row_groups,
    row_sample,
    sampled_distinct,
)

#: row groups a Parquet column's predicate sample is drawn from (each decoded once)
SAMPLE_GROUPS = 4


@dataclass(frozen=True)
class ScanUnit:
    """One piece of a source: a file (with optional row groups) or a slice of memory batches."""

    path: str | None = None
    row_groups: tuple[int, ...] | None = None
    offset: int = 0  # memory sources: a row range of the table
    rows: int = 0


class TableSource:
    kind = "memory"
    schema: pa.Schema
    #: how the rows of each unit are sorted (source_ordering.py); () when unknown
    ordering: tuple[SourceSortKey, ...] = ()

    def num_rows(self) -> int | None:
        return None

    def units(self, partitions: int = 1) -> list[ScanUnit]:
        """Scan units; ``partitions`` says how many the scan would like at least."""
        raise NotImplementedError

    def read(self, unit: ScanUnit, columns: list[str], batch_size: int) -> Iterator[pa.RecordBatch]:
        raise NotImplementedError

    def read_stored(self, unit: ScanUnit, columns: list[str], batch_size: int,
                    readers: dict | None = None) -> Iterator[pa.RecordBatch]:
        """``read`` before the types are normalized (``normalize_batch`` with the schema's
        fields makes them so): a scan drops the rows its dynamic filters rule out first, and
        decodes a dictionary-encoded string column only for the rows that stay. ``readers``:
        a dict the caller keeps while it reads units one after another (one scan
        partition), where a source may keep its open file readers between units."""
        return self.read(unit, columns, batch_size)

    def unit_stats(self, unit: ScanUnit, column: str) -> tuple[Any, Any, int | None] | None:
        """(min, max, null count) of ``column`` in ``unit`` when the format keeps them."""
        return None

    def prune(self, units: list[ScanUnit], predicates: list[Any]) -> tuple[list[ScanUnit], int]:
        """Drop units whose statistics prove no row passes; returns (kept, pruned count)."""
        return units, 0

    def column_statistics(self, column: str) -> ColumnStatistics | None:
        """What the source knows of ``column`` (statistics.py), or None; computed once per
        source and column (the planner asks for every key and filter column of every
        query)."""
        cache = self.__dict__.setdefault("_column_statistics", {})
        if column not in cache:
            cache[column] = self._compute_column_statistics(column)
        return cache[column]

    def column_sample(self, column: str) -> pa.ChunkedArray | None:
        """A sample of ``column``'s rows (``row_sample``: at most ``PREDICATE_SAMPLE_ROWS``,
        NULLs included, of the schema's type), or None when the source keeps none: the
        estimates evaluate predicates no statistic judges on it (a LIKE pattern). Taken once
        per source and column, on first use, never per query."""
        cache = self.__dict__.setdefault("_column_samples", {})
        if column not in cache:
            sample = None
            if column in self.schema.names:
                try:
                    sample = self._compute_column_sample(column)
                    target = self.schema.field(column).type
                    if sample is not None and sample.type != target:
                        sample = sample.cast(target)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    sample = None  # a type Arrow cannot sample: the estimates' defaults
            cache[column] = sample
        return cache[column]

    def _compute_column_sample(self, column: str) -> pa.ChunkedArray | None:
        """None: CSV and IPC sources would have to read their files to sample them."""
        return None

    def __getstate__(self) -> dict:
        # the samples serve the planner only: a source shipped to a worker leaves them
        # behind (4096 strings a column would ride along with every task)
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_column_samples", "_sampled_fractions")}

    def _compute_column_statistics(self, column: str) -> ColumnStatistics | None:
        """From the units' statistics (file metadata): no data is read."""
        try:
            groups = []
            for unit in self.units():
                stats = self.unit_stats(unit, column)
                if stats is None:
                    return None
                groups.append((*stats, None))
        except NotImplementedError:
            return None
        return from_row_groups(groups, self.num_rows() or 0)

    def fully_matches(self, unit: ScanUnit, predicates: list[Any]) -> bool:
        """True only when statistics prove that every row of ``unit`` passes ``predicates``."""
        return False

    def in_order(self, first: ScanUnit, second: ScanUnit) -> bool:
        """Whether every row of ``second`` sorts at or after every row of ``first`` under
        ``ordering``: a partition reading them one after the other then stays sorted."""
        return False

    def describe(self) -> str:
        return f"file_type={self.kind}"


class MemorySource(TableSource):
    kind = "memory"

    def __init__(self, table: pa.Table, sorted_by=None):
        self.table = table
        self.schema = table.schema
        self.ordering = parse_sorted_by(sorted_by, self.schema)
        if self.ordering:
            self._check_declared_order()

    def __setstate__(self, state: dict) -> None:
        # a table shipped to a worker arrives in buffers wherever the comm put them
        self.__dict__.update(state)
        if isinstance(state.get("table"), pa.Table):
            self.table = realigned(self.table)

    def _check_declared_order(self) -> None:
        try:
            row = first_unsorted_row(self.table, self.ordering)
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return  # a type the comparison kernels do not order: trusted as declared
        if row is not None:
            keys = ", ".join(map(str, self.ordering))
            raise PlanError(f"sorted_by {keys} does not hold: row {row} sorts before row "
                            f"{row - 1}")

    def num_rows(self) -> int:
        return self.table.num_rows

    def _compute_column_statistics(self, column):
        """min/max in one pass and a distinct count, once per registration and column."""
        return from_arrow(self.table.column(column))

    def _compute_column_sample(self, column):
        return row_sample(self.table.column(column))

    def units(self, partitions: int = 1) -> list[ScanUnit]:
        """Contiguous row ranges: one per ~1M rows, and at least one per partition."""
        n = self.table.num_rows
        count = max(1, min(n, max(partitions, -(-n // (1 << 20)))))
        bounds = [n * i // count for i in range(count + 1)]
        return [ScanUnit(offset=lo, rows=hi - lo) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]

    def read(self, unit, columns, batch_size):
        piece = self.table.slice(unit.offset, unit.rows).select(columns)
        for batch in piece.to_batches(max_chunksize=batch_size):
            if batch.num_rows:
                yield batch

    def in_order(self, first, second):
        return bool(self.ordering) and second.offset >= first.offset + first.rows

    def describe(self) -> str:
        return f"memory rows={self.table.num_rows}"


def _expand(path: str | os.PathLike | list, suffixes: tuple[str, ...]) -> list[str]:
    if isinstance(path, (list, tuple)):  # several files, folders or globs, in order
        return [f for p in path for f in _expand(p, suffixes)]
    path = str(path)
    if os.path.isdir(path):
        files = sorted(p for p in glob.glob(os.path.join(path, "**", "*"), recursive=True)
                       if os.path.isfile(p) and (not suffixes or p.endswith(suffixes)))
    elif any(ch in path for ch in "*?["):
        files = sorted(glob.glob(path, recursive=True))
    else:
        files = [path]
    if not files:
        raise PlanError(f"no files found at {path!r}")
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise PlanError(f"file not found: {missing[0]!r}")
    return files


class ParquetSource(TableSource):
    kind = "parquet"

    def __init__(self, path, sorted_by=None):
        import pyarrow.parquet as pq

        self.files = _expand(path, (".parquet", ".parq", ".pq"))
        self._dictionaries: dict[str, frozenset[str]] = {}  # per file: _small_dictionaries
        self._stats: dict[tuple[str, int], dict] = {}  # per row group: _unit_stats
        try:
            self._meta = {f: pq.ParquetFile(f).metadata for f in self.files}
            self.file_schema = pq.ParquetFile(self.files[0]).schema_arrow
            self.schema = normalize_schema(self.file_schema)
        except (pa.ArrowInvalid, OSError) as e:
            raise PlanError(f"cannot read Parquet file {self.files[0]!r}: {e}") from e
        # declared: every file is sorted so; from metadata: every row group is
        self.files_sorted = sorted_by is not None
        if self.files_sorted:
            self.ordering = parse_sorted_by(sorted_by, self.schema)
            self._check_declared_order()
        else:
            self.ordering = parquet_sorting_columns(list(self._meta.values()), self.schema)

    def _check_declared_order(self) -> None:
        """Row-group statistics that contradict the declared first key: a clear error."""
        key = self.ordering[0]
        for path, meta in self._meta.items():
            previous = None
            for index in range(meta.num_row_groups):
                stats = _row_group_stats(meta, index).get(key.column)
                problem = stats_disprove_order(key, previous, stats)
                if problem is not None:
                    raise PlanError(f"sorted_by {key} does not hold in {path!r}: row group "
                                    f"{index} {problem}")
                previous = stats if stats is not None else previous

    def num_rows(self) -> int:
        return sum(m.num_rows for m in self._meta.values())

    def units(self, partitions: int = 1) -> list[ScanUnit]:
        return [ScanUnit(path=f, row_groups=(i,), rows=m.row_group(i).num_rows)
                for f, m in self._meta.items() for i in range(m.num_row_groups)]

    def read(self, unit, columns, batch_size):
        target = pa.schema([self.schema.field(c) for c in columns])
        for batch in self.read_stored(unit, columns, batch_size):
            yield normalize_batch(batch, target)

    def read_stored(self, unit, columns, batch_size, readers=None):
        import pyarrow.parquet as pq

        try:
            # one open file per scan partition and file, not per row group: opening one
            # (filesystem resolution, schema paths) is Python work holding the GIL, 1,424
            # times over TPC-H's 22 queries at one partition
            reader = readers.get(unit.path) if readers is not None else None
            if reader is None:
                # the footer read at registration: parsing it again per row group cost ~1 ms
                meta = self._meta[unit.path]
                reader = pq.ParquetFile(unit.path, metadata=meta, read_dictionary=[
                    c for c in columns if c in self._small_dictionaries(unit.path)])
                if readers is not None:
                    readers[unit.path] = reader
            yield from reader.iter_batches(batch_size=batch_size, row_groups=unit.row_groups,
                                           columns=columns, use_threads=False)
        except (pa.ArrowInvalid, OSError) as e:
            raise PlanError(f"cannot read Parquet file {unit.path!r}: {e}") from e

    def unit_stats(self, unit, column):
        return self._unit_stats(unit).get(column)

    def _unit_stats(self, unit) -> dict[str, tuple[Any, Any, int | None]]:
        """Every column's min/max/nulls of a unit's row group, made once per registration:
        reading them out of the footer took ~0.5 ms per row group and query."""
        key = (unit.path, unit.row_groups[0])
        stats = self._stats.get(key)
        if stats is None:
            stats = self._stats[key] = _row_group_stats(self._meta[unit.path], key[1])
        return stats

    def _small_dictionaries(self, path: str) -> frozenset[str]:
        """String columns of ``path`` whose every chunk is dictionary-encoded with a small
        dictionary (flags, modes, segments). Read as dictionary
        indices and decoded by one take, they cost about half of decoding each value."""
        cache = self._dictionaries
        if path not in cache:
            meta = self._meta[path]
            names = set()
            for index in range(meta.num_columns):
                column = meta.schema.column(index)
                if column.physical_type != "BYTE_ARRAY" or column.max_repetition_level:
                    continue
                chunks = [meta.row_group(g).column(index) for g in range(meta.num_row_groups)]
                if chunks and all(_small_dictionary(chunk) for chunk in chunks):
                    names.add(column.path)
            cache[path] = frozenset(names)
        return cache[path]

    def _compute_column_statistics(self, column):
        """From the footer metadata only, with the distinct counts the writer stored."""
        if column not in self.schema.names:
            return None
        groups, ranges = [], []  # ranges: (min, max, path, row group, rows)
        for path, meta in self._meta.items():
            index = meta.schema.names.index(column) if column in meta.schema.names else -1
            for group in range(meta.num_row_groups):
                chunk = meta.row_group(group)
                stats = chunk.column(index).statistics if index >= 0 else None
                if stats is None or not stats.has_min_max:
                    if chunk.num_rows == 0:
                        continue
                    return None
                groups.append((stats.min, stats.max,
                               stats.null_count if stats.has_null_count else None,
                               stats.distinct_count if stats.has_distinct_count else None))
                ranges.append((stats.min, stats.max, path, group, chunk.num_rows))
        statistics = from_row_groups(groups, self.num_rows())
        if statistics is not None and statistics.distinct_count is None:
            # the metadata cannot bound it (strings, decimals, floats): count a sample
            distinct = self._sampled_distinct(column)
            statistics = replace(statistics, distinct_count=distinct)
        elif statistics is not None and statistics.distinct_is_bound and \
                disjoint_ranges([r[:2] for r in ranges]):
            # a bound, but the key is clustered: one row group counts it per row
            distinct = self._clustered_distinct(column, ranges)
            if distinct is not None:
                statistics = replace(statistics, distinct_count=min(
                    distinct, statistics.distinct_count), distinct_is_bound=False)
        return statistics

    def _clustered_distinct(self, column: str, ranges: list) -> float | None:
        """``clustered_distinct`` from the exact distinct count of the middle row group (read
        once per registration; only that column of it is decoded)."""
        import pyarrow.parquet as pq

        _, _, path, group, rows = ranges[len(ranges) // 2]
        if rows == 0:
            return None
        try:
            values = pq.ParquetFile(path).read_row_group(
                group, columns=[column], use_threads=False).column(0)
        except (pa.ArrowInvalid, OSError) as e:
            raise PlanError(f"cannot read Parquet file {path!r}: {e}") from e
        counted = pc.count_distinct(values, mode="only_valid").as_py()
        return clustered_distinct(counted, rows, self.num_rows())

    def _sampled_distinct(self, column: str) -> float | None:
        """Distinct values of ``column`` counted in whole row groups spread evenly over the
        files, ``SAMPLE_ROWS`` rows or more (every row of a small table), read once per
        registration: only that column of those row groups is decoded."""
        import pyarrow.parquet as pq

        units = self.units()
        total = sum(unit.rows for unit in units)
        if not units or total == 0:
            return None
        wanted = total if total <= EXACT_DISTINCT_ROWS else SAMPLE_ROWS
        average = total / len(units)
        count = min(len(units), max(1, math.ceil(wanted / max(average, 1.0))))
        chosen = [units[i * len(units) // count] for i in range(count)]
        try:
            pieces = [pq.ParquetFile(unit.path).read_row_groups(
                list(unit.row_groups), columns=[column], use_threads=False).column(0)
                for unit in chosen]
        except (pa.ArrowInvalid, OSError) as e:
            raise PlanError(f"cannot read Parquet file {chosen[0].path!r}: {e}") from e
        sample = pa.chunked_array([c for piece in pieces for c in piece.chunks],
                                  type=pieces[0].type)
        return sampled_distinct(sample, total)

    def _compute_column_sample(self, column):
        """``row_sample`` of a few row groups spread evenly over the files (up to
        ``SAMPLE_GROUPS``, so a clustered column is not judged by one stretch of it): only
        that column of them is decoded, once per registration."""
        import pyarrow.parquet as pq

        groups = [(path, g) for path, meta in self._meta.items()
                  for g in range(meta.num_row_groups) if meta.row_group(g).num_rows]
        if not groups:
            return None
        count = min(len(groups), SAMPLE_GROUPS)
        chosen = [groups[i * len(groups) // count] for i in range(count)]
        pieces = []
        for path, group in chosen:
            try:
                piece = pq.ParquetFile(path).read_row_group(
                    group, columns=[column], use_threads=False).column(0)
            except (pa.ArrowInvalid, OSError) as e:
                raise PlanError(f"cannot read Parquet file {path!r}: {e}") from e
            # as scans read it (string_view stored, string in the schema): Arrow takes rows
            # of the schema's types only
            piece = piece.cast(self.schema.field(column).type)
            pieces.append(row_sample(piece, -(-PREDICATE_SAMPLE_ROWS // count)))
        return pa.chunked_array([c for piece in pieces for c in piece.chunks],
                                type=pieces[0].type)

    def prune(self, units, predicates):
        if not predicates:
            return units, 0
        kept = []
        for unit in units:
            stats = self._unit_stats(unit)
            if all(_may_match(p, stats) for p in predicates):
                kept.append(unit)
        return kept, len(units) - len(kept)

    def fully_matches(self, unit, predicates):
        stats = self._unit_stats(unit)
        return all(_all_match(p, stats) for p in predicates)

    def in_order(self, first, second):
        if not self.ordering:
            return False
        if self.files_sorted and first.path == second.path and \
                second.row_groups[0] > first.row_groups[0]:
            return True
        column = self.ordering[0].column
        return stats_prove_order(self.ordering[0], self.unit_stats(first, column),
                                 self.unit_stats(second, column))

    def describe(self) -> str:
        return f"files={len(self.files)}, file_type=parquet"


def _small_dictionary(chunk) -> bool:
    """Whether a column chunk starts with a dictionary page of at most half a byte per value
    (a few distinct values repeated: a large dictionary means values that barely repeat,
    whose decoding through indices costs more than reading them)."""
    if not chunk.has_dictionary_page or chunk.dictionary_page_offset is None:
        return False
    size = chunk.data_page_offset - chunk.dictionary_page_offset
    return 0 < size and 2 * size <= chunk.num_values


def _row_group_stats(meta, index: int) -> dict[str, tuple[Any, Any, int | None]]:
    group = meta.row_group(index)
    stats = {}
    for c in range(group.num_columns):
        column = group.column(c)
        s = column.statistics
        if s is not None and s.has_min_max:
            nulls = s.null_count if s.has_null_count else None  # None: unknown
            stats[column.path_in_schema] = (s.min, s.max, nulls)
    return stats


def _may_match(predicate: tuple[str, str, Any], stats) -> bool:
    """False only when min/max statistics prove that no row satisfies ``column op value``."""
    column, op, value = predicate
    if column not in stats:
        return True
    low, high, _ = stats[column]
    if isinstance(low, float) and (op in ("gt", "gte") or value != value):
        # Parquet min/max leave NaN out, and NaN is the greatest double (it satisfies any
        # x > v, and x = NaN): only upper bounds and equality with a number can prune
        return True
    try:
        if op == "eq":
            return low <= value <= high
        if op == "lt":
            return low < value
        if op == "lte":
            return low <= value
        if op == "gt":
            return high > value
        if op == "gte":
            return high >= value
    except TypeError:
        return True
    return True


def _all_match(predicate: tuple[str, str, Any], stats) -> bool:
    """True only when statistics prove that every row satisfies ``column op value``: no
    NULLs (known null count 0) and min/max inside the range. Float statistics leave NaN
    out, so a float column never proves it."""
    column, op, value = predicate
    if column not in stats:
        return False
    low, high, nulls = stats[column]
    if nulls is None or nulls > 0 or isinstance(low, float) or isinstance(high, float):
        return False
    try:
        if op == "eq":
            return bool(low == value and high == value)
        if op == "lt":
            return bool(high < value)
        if op == "lte":
            return bool(high <= value)
        if op == "gt":
            return bool(low > value)
        if op == "gte":
            return bool(low >= value)
    except TypeError:
        return False
    return False


class CsvSource(TableSource):
    """CSV files. Options (DuckDB's read_csv meanings): ``header`` (default true),
    ``delimiter``/``sep``, ``quote``, ``escape``, ``skip`` (lines before the header),
    ``nullstr`` (the text read as NULL instead of the empty field), ``columns`` (name -> Arrow type:
    the files' column names and types, in order), ``all_varchar``."""

    kind = "csv"

    def __init__(self, path, **options):
        import pyarrow.csv as pacsv

        self.files = _expand(path, (".csv", ".tsv", ".txt", ".csv.gz"))
        self.options = options
        delimiter = options.get("delimiter", options.get("sep", ","))
        quote, escape = options.get("quote", '"'), options.get("escape")
        self._parse = pacsv.ParseOptions(delimiter=delimiter, quote_char=quote or False,
                                         escape_char=escape or False)
        header = options.get("header", True)
        columns: dict[str, pa.DataType] | None = options.get("columns")
        self._read = pacsv.ReadOptions(
            autogenerate_column_names=not header and not columns,
            column_names=list(columns) if columns else None,
            skip_rows=int(options.get("skip", 0)) + (1 if header and columns else 0),
            block_size=1 << 22)
        # DuckDB: an empty field is NULL; with nullstr, that text is NULL in every column and
        # an empty field is NULL only where it cannot be a value (not in text columns)
        nullstr = options.get("nullstr")
        self._nullstr = None if nullstr is None else \
            ([nullstr] if isinstance(nullstr, str) else list(nullstr))
        self._null_values = [""] + (self._nullstr or [])
        try:
            if not header and not columns:  # DuckDB's names: column0, column1, ...
                names = self._read_schema(pacsv).names
                width = len(str(len(names) - 1))
                self._read = pacsv.ReadOptions(
                    column_names=[f"column{i:0{width}d}" for i in range(len(names))],
                    skip_rows=int(options.get("skip", 0)), block_size=1 << 22)
            if columns:
                schema = pa.schema(list(columns.items()))
            else:
                schema = self._read_schema(pacsv)
            if options.get("all_varchar"):
                schema = pa.schema([pa.field(f.name, pa.string()) for f in schema])
            self.schema = normalize_schema(schema)
        except (pa.ArrowInvalid, OSError) as e:
            raise PlanError(f"cannot read CSV file {self.files[0]!r}: {e}") from e
        self._convert_types = dict(zip(self.schema.names, self.schema.types))

    def _read_schema(self, pacsv) -> pa.Schema:
        # types as DuckDB's sniffer sees them: with nullstr, an empty field is a text value
        reader = pacsv.open_csv(self.files[0], read_options=self._read, parse_options=self._parse,
                                convert_options=pacsv.ConvertOptions(
                                    null_values=self._nullstr or [""], strings_can_be_null=True))
        schema = reader.schema
        reader.close()
        return schema

    def _convert_options(self, columns: list[str]):
        import pyarrow.csv as pacsv

        # without nullstr, an empty field is NULL for every type, strings too, as in DuckDB
        # (Arrow's default reads it as '' for strings)
        return pacsv.ConvertOptions(
            include_columns=columns, column_types=self._convert_types,
            null_values=self._null_values, strings_can_be_null=self._nullstr is None)

    def _null_text(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Text columns read with empty fields kept: the nullstr values become NULL."""
        columns = []
        for column in batch.columns:
            if pa.types.is_string(column.type):
                is_null = pc.is_in(column, value_set=pa.array(self._nullstr, pa.string()))
                column = pc.if_else(is_null, pa.scalar(None, column.type), column)
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, schema=batch.schema)

    def units(self, partitions: int = 1) -> list[ScanUnit]:
        return [ScanUnit(path=f, rows=os.path.getsize(f) // 64) for f in self.files]

    def num_rows(self) -> int:
        return sum(u.rows for u in self.units())

    def read(self, unit, columns, batch_size):
        import pyarrow.csv as pacsv

        convert = self._convert_options(columns)
        try:
            reader = pacsv.open_csv(unit.path, read_options=self._read,
                                    parse_options=self._parse, convert_options=convert)
            for batch in reader:
                if self._nullstr is not None:
                    batch = self._null_text(batch)
                for offset in range(0, batch.num_rows, batch_size):
                    yield batch.slice(offset, batch_size)
        except (pa.ArrowInvalid, OSError) as e:
            raise PlanError(f"cannot read CSV file {unit.path!r}: {e}") from e


class IpcSource(TableSource):
    kind = "arrow"

    def __init__(self, path):
        self.files = _expand(path, (".arrow", ".ipc", ".feather"))
        try:
            self.schema = normalize_schema(self._open(self.files[0]).schema)
        except (pa.ArrowInvalid, OSError) as e:
            raise PlanError(f"cannot read Arrow IPC file {self.files[0]!r}: {e}") from e

    @staticmethod
    def _open(path):
        try:
            return pa.ipc.open_file(pa.memory_map(path))
        except pa.ArrowInvalid:
            return pa.ipc.open_stream(pa.memory_map(path))

    def units(self, partitions: int = 1) -> list[ScanUnit]:
        return [ScanUnit(path=f, rows=os.path.getsize(f) // 16) for f in self.files]

    def num_rows(self) -> int:
        return sum(u.rows for u in self.units())

    def read(self, unit, columns, batch_size):
        try:
            reader = self._open(unit.path)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches)) \
                if isinstance(reader, pa.ipc.RecordBatchFileReader) else reader
            target = pa.schema([self.schema.field(c) for c in columns])
            for batch in batches:
                batch = normalize_batch(batch.select(columns), target)
                for offset in range(0, batch.num_rows, batch_size):
                    yield batch.slice(offset, batch_size)
        except (pa.ArrowInvalid, OSError) as e:
            raise PlanError(f"cannot read Arrow IPC file {unit.path!r}: {e}") from e


class DataFrameSource(MemorySource):
    """A pandas DataFrame, converted to Arrow a column at a time as queries use its columns.

    Any frame a user holds is queryable: an ``object`` column whose values have several
    types (``["x", 1, None, 2.5]``) reads as VARCHAR holding ``str()`` of each value, as in
    DuckDB, and a column that cannot be converted fails only the queries that read it, with
    a PlanError naming it. Each column's type is known from its dtype, or for ``object``
    columns from pandas' own type inference (one pass in C, no conversion).
    """

    kind = "pandas"

    def __init__(self, frame: Any, name: str = ""):
        import pandas as pd

        self.frame, self.name, self.ordering = frame, name, ()
        self._names = [str(c) for c in frame.columns]
        if len(set(self._names)) != len(self._names):
            raise PlanError("the DataFrame has duplicate column names: "
                            f"{sorted({c for c in self._names if self._names.count(c) > 1})}")
        self._mixed: set[str] = set()
        self._columns: dict[str, pa.ChunkedArray] = {}
        self._lock = threading.Lock()
        fields = []
        for position, column in enumerate(self._names):
            series = frame.iloc[:, position]
            if series.dtype == object:
                kind = pd.api.types.infer_dtype(series, skipna=True)
                if kind.startswith("mixed") and kind != "mixed-integer-float" or kind == "empty":
                    self._mixed.add(column)
                    type_ = pa.string()
                else:
                    type_ = pa.infer_type(series.head(1000), from_pandas=True)
            else:
                type_ = pa.Schema.from_pandas(frame.iloc[:0, [position]],
                                              preserve_index=False).types[0]
            fields.append(pa.field(column, normalize_type(type_)))
        self.schema = pa.schema(fields)

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def table(self) -> pa.Table:
        """The whole frame as Arrow (every column converted)."""
        return self._table(self._names)

    def num_rows(self) -> int:
        return len(self.frame)

    def _column(self, name: str) -> pa.ChunkedArray:
        with self._lock:  # partitions read concurrently: convert each column once
            return self._convert(name)

    def _convert(self, name: str) -> pa.ChunkedArray:
        if name not in self._columns:
            series = self.frame.iloc[:, self._names.index(name)]
            target = self.schema.field(name).type
            try:
                if name in self._mixed:
                    array = pa.array(series.astype(str).to_numpy(dtype=object),
                                     type=pa.string(),
                                     mask=series.isna().to_numpy(dtype=bool))
                elif series.dtype == object:
                    array = pa.array(series, type=target, from_pandas=True)
                else:
                    array = pa.Table.from_pandas(series.to_frame(), preserve_index=False
                                                 ).column(0)
                column = pa.chunked_array([array]) if isinstance(array, pa.Array) else array
                self._columns[name] = column.cast(target) if column.type != target else column
            except (pa.ArrowException, OverflowError, TypeError, ValueError) as e:
                where = f" of DataFrame {self.name!r}" if self.name else ""
                raise PlanError(f"cannot read column {name!r}{where} as {target}: {e}") from e
        return self._columns[name]

    def _table(self, columns: list[str]) -> pa.Table:
        return pa.table([self._column(c) for c in columns],
                        schema=pa.schema([self.schema.field(c) for c in columns]))

    def _compute_column_statistics(self, column):
        """From the one column, converted as a query would convert it."""
        return from_arrow(self._column(column))

    def _compute_column_sample(self, column):
        return row_sample(self._column(column))

    def units(self, partitions: int = 1) -> list[ScanUnit]:
        n = len(self.frame)
        count = max(1, min(n, max(partitions, -(-n // (1 << 20)))))
        bounds = [n * i // count for i in range(count + 1)]
        return [ScanUnit(offset=lo, rows=hi - lo) for lo, hi in itertools.pairwise(bounds)
                if hi > lo]

    def read(self, unit, columns, batch_size):
        piece = self._table(columns).slice(unit.offset, unit.rows)
        for batch in piece.to_batches(max_chunksize=batch_size):
            if batch.num_rows:
                yield batch

    def describe(self) -> str:
        return f"pandas rows={len(self.frame)}"


class View:
    """A named query (``CREATE VIEW``, a magic's ``--save``): bound again each time a query
    reads it, so it sees the tables as they are then."""

    def __init__(self, name: str, query: Any, sql: str):
        self.name, self.query, self.sql = name, query, sql  # query: the parsed sqlglot node

    def __repr__(self) -> str:
        return f"View({self.name!r}: {self.sql})"


def source_from_object(obj: Any, sorted_by=None, name: str = "") -> TableSource:
    """A MemorySource from an Arrow table/batch/reader, pandas or polars DataFrame;
    ``sorted_by`` declares how its rows are sorted (source_ordering.py)."""
    if isinstance(obj, (TableSource, View)):
        if sorted_by is not None:
            raise PlanError("sorted_by applies to data, not to an existing table source")
        return obj
    if sorted_by is None and type(obj).__module__.split(".")[0] == "pandas" and \
            type(obj).__name__ == "DataFrame":
        return DataFrameSource(obj, name)
    return MemorySource(_arrow_table(obj), sorted_by)


def _arrow_table(obj: Any) -> pa.Table:
    if isinstance(obj, pa.Table):
        return normalize_table(obj)
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    if isinstance(obj, pa.RecordBatchReader):
        return obj.read_all()
    module = type(obj).__module__.split(".")[0]
    if module == "pandas":
        return DataFrameSource(obj).table
    if module == "polars":
        return normalize_table(obj.to_arrow())
    if hasattr(obj, "__arrow_c_stream__"):
        return pa.table(obj)
    raise PlanError(f"cannot register an object of type {type(obj).__name__}: expected a "
                    "pyarrow Table/RecordBatch/RecordBatchReader or a pandas/polars DataFrame")


def normalize_type(t: pa.DataType) -> pa.DataType:
    """The one type the engine's kernels use for each family (string for every string kind)."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_dictionary(t):
        return normalize_type(t.value_type)
    return t


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, normalize_type(f.type), f.nullable) for f in schema])


def normalize_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``schema``'s (normalized) types; casts only columns that differ."""
    if batch.schema.types == schema.types:
        return batch
    columns = [c if c.type == f.type else _normalized(c, f.type)
               for c, f in zip(batch.columns, schema)]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _normalized(column: pa.Array, to: pa.DataType) -> pa.Array:
    if pa.types.is_dictionary(column.type):
        # the (small) dictionary cast first, string views to strings, then one take: faster
        # than a cast of the column, and than casting the taken values
        dictionary = column.dictionary
        if dictionary.type != to:
            dictionary = dictionary.cast(to)
        # flags and codes of one width: one compiled copy per row, no length per row
        decoded = decode_one_width(column.indices, dictionary)
        return decoded if decoded is not None else dictionary.take(column.indices)
    return column.cast(to)


def normalize_table(table: pa.Table) -> pa.Table:
    """Large/view string types are read as plain ones so kernels see one string type."""
    schema = normalize_schema(table.schema)
    return table.cast(schema) if schema.types != table.schema.types else table


__all__ = [
    "CsvSource",
    "DataFrameSource",
    "IpcSource",
    "MemorySource",
    "ParquetSource",
    "ScanUnit",
    "TableSource",
    "View",
    "source_from_object",
]
