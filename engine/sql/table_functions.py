"""Files named in SQL: ``FROM 'data/*.parquet'``, ``read_parquet``, ``read_csv`` and
``read_ipc`` (DuckDB's names and common options) become table sources at bind time.

A glob or a list reads every file, each file's row groups its own scan units, so statistics
prune them as they do for ``Session.register_parquet`` (the same ParquetSource).

    SELECT * FROM 'sales/*.parquet' WHERE day >= DATE '2024-01-01'
    SELECT * FROM read_csv('a.csv', header = true, delim = ';', nullstr = 'NA')
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from plansight.engine.catalog import CsvSource, IpcSource, ParquetSource, TableSource
from plansight.engine.errors import NotSupportedError, PlanError
from plansight.engine.sql.functions import sql_type_to_arrow

_SUFFIXES = {
    ".parquet": "parquet", ".parq": "parquet", ".pq": "parquet",
    ".csv": "csv", ".tsv": "csv", ".csv.gz": "csv", ".txt": "csv",
    ".arrow": "ipc", ".ipc": "ipc", ".feather": "ipc",
}
_FUNCTIONS = {
    "read_parquet": "parquet", "parquet_scan": "parquet",
    "read_csv": "csv", "read_csv_auto": "csv", "csv_scan": "csv",
    "read_ipc": "ipc", "read_arrow": "ipc", "read_feather": "ipc",
}
# DuckDB's read_csv options -> CsvSource keyword arguments
_CSV_OPTIONS = {"header": "header", "delim": "delimiter", "sep": "delimiter",
                "delimiter": "delimiter", "quote": "quote", "escape": "escape",
                "skip": "skip", "nullstr": "nullstr", "null_padding": None,
                "columns": "columns", "auto_detect": None, "all_varchar": "all_varchar",
                "filename": None, "normalize_names": None}


def file_kind(path: str) -> str | None:
    """The reader for ``path`` by its extension (a glob's too), or None.

    Example:
        >>> file_kind("data/*.parquet"), file_kind("x.CSV"), file_kind("t")
        ('parquet', 'csv', None)
    """
    lowered = path.lower()
    for suffix, kind in _SUFFIXES.items():
        if lowered.endswith(suffix):
            return kind
    return None


def open_files(kind: str, paths: str | list[str], options: dict[str, Any] | None = None
               ) -> TableSource:
    """A table source reading ``paths`` (files, folders or globs) with reader ``kind``."""
    options = options or {}
    if kind == "parquet":
        unknown = set(options) - {"hive_partitioning", "union_by_name", "filename",
                                  "binary_as_string"}
        if unknown:
            raise NotSupportedError(f"read_parquet option {min(unknown)!r} is not "
                                    "supported")
        return ParquetSource(paths)
    if kind == "csv":
        arguments = {}
        for name, value in options.items():
            if name not in _CSV_OPTIONS:
                raise NotSupportedError(f"read_csv option {name!r} is not supported; "
                                        f"supported: {', '.join(sorted(_CSV_OPTIONS))}")
            if _CSV_OPTIONS[name] is not None:
                arguments[_CSV_OPTIONS[name]] = value
        return CsvSource(paths, **arguments)
    if options:
        raise NotSupportedError(f"read_ipc takes no options, got {min(options)!r}")
    return IpcSource(paths)


def table_function_source(node: exp.Expression) -> TableSource:
    """The source of ``read_parquet(...)``, ``read_csv(...)``, ``read_ipc(...)`` in FROM."""
    if isinstance(node, exp.ReadParquet):
        name, args = "read_parquet", list(node.expressions)
    elif isinstance(node, exp.ReadCSV):
        name, args = "read_csv", [node.this, *node.expressions]
    elif isinstance(node, exp.Anonymous):
        name, args = str(node.this).lower(), list(node.expressions)
    else:
        name, args = node.sql_name().lower(), list(node.args.values())
    if name not in _FUNCTIONS:
        raise NotSupportedError(f"table function {name}(...) is not supported; files are read "
                                f"with {', '.join(sorted(_FUNCTIONS))} or FROM 'file'")
    positional = [a for a in args if not isinstance(a, (exp.EQ, exp.PropertyEQ))]
    if len(positional) != 1:
        raise PlanError(f"{name} takes one file, folder, glob or list of them, then options "
                        "written name = value")
    options = {a.this.name.lower(): _option_value(a.expression, name)
               for a in args if isinstance(a, (exp.EQ, exp.PropertyEQ))}
    return open_files(_FUNCTIONS[name], _paths(positional[0], name), options)


def _paths(node: exp.Expression, function: str) -> str | list[str]:
    if isinstance(node, exp.Literal) and node.is_string:
        return node.this
    if isinstance(node, exp.Array) and all(isinstance(e, exp.Literal) and e.is_string
                                           for e in node.expressions):
        return [e.this for e in node.expressions]
    raise PlanError(f"{function} needs a file path as a string (or a list of them), "
                    f"got {node.sql(dialect='duckdb')}")


def _option_value(node: exp.Expression, function: str) -> Any:
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else int(node.this)
    if isinstance(node, exp.Struct):  # columns = {'a': 'INT', 'b': 'VARCHAR'}
        types = {}
        for item in node.expressions:
            key = item.this.name if isinstance(item, exp.PropertyEQ) else item.alias_or_name
            text = item.expression.name if isinstance(item, exp.PropertyEQ) else item.this.name
            types[key] = sql_type_to_arrow(exp.DataType.build(text, dialect="duckdb"))
        return types
    raise PlanError(f"{function} option value {node.sql(dialect='duckdb')} must be a "
                    "constant")
