"""Statements that change the session rather than return rows, run as soon as
``Session.sql`` reads them (as DuckDB does):

    CREATE [OR REPLACE] TABLE t AS query      the query's result, kept in memory as table t
    CREATE TABLE IF NOT EXISTS t AS query
    CREATE [OR REPLACE] VIEW v AS query       a named query, bound again wherever v is read
    DROP TABLE|VIEW [IF EXISTS] name
    INSERT INTO t [(columns)] query           rows appended to an in-memory table
    COPY (query) | t TO 'file' [(FORMAT PARQUET|CSV, HEADER, DELIMITER ',')]
    CALL dbgen(sf = 0.01)                     the TPC-H tables at that scale, as in DuckDB
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from sqlglot import exp

from plansight.engine.catalog import MemorySource, View
from plansight.errors import NotSupportedError, PlanError

SESSION_STATEMENTS = (exp.Create, exp.Drop, exp.Insert, exp.Copy)
_DBGEN = re.compile(r"^\s*dbgen\s*\(\s*(?:sf\s*(?::=|=)\s*)?([0-9]*\.?[0-9]+)\s*\)\s*;?\s*$",
                    re.IGNORECASE)


def is_session_statement(node: exp.Expression) -> bool:
    return isinstance(node, SESSION_STATEMENTS) or _is_call(node)


def _is_call(node: exp.Expression) -> bool:
    return isinstance(node, exp.Command) and str(node.this).upper() == "CALL"


def run_statement(session, node: exp.Expression, run_query: Callable[[exp.Expression], pa.Table],
                  catalog: dict[str, Any] | None = None) -> None:
    """Apply ``node`` to ``session``; ``run_query`` runs a query node to an Arrow table;
    ``catalog`` holds the caller's tables (DataFrames) a view may name."""
    if isinstance(node, exp.Create):
        _create(session, node, run_query, catalog)
    elif isinstance(node, exp.Drop):
        _drop(session, node)
    elif isinstance(node, exp.Insert):
        _insert(session, node, run_query)
    elif isinstance(node, exp.Copy):
        _copy(node, run_query)
    elif _is_call(node):
        _call(session, node)


def _target_name(node: exp.Expression) -> str:
    table = node.this if isinstance(node, exp.Schema) else node
    if not isinstance(table, exp.Table) or not table.name:
        raise PlanError(f"expected a table name, got {node.sql(dialect='duckdb')}")
    return table.name


def _existing(session, name: str) -> str | None:
    """The registered name matching ``name`` case-insensitively."""
    return next((key for key in session._tables if key.lower() == name.lower()), None)


def _create(session, node: exp.Create, run_query, catalog) -> None:
    kind = str(node.args.get("kind") or "").upper()
    if kind not in ("TABLE", "VIEW"):
        raise NotSupportedError(f"CREATE {kind} is not supported; plansight creates tables "
                                "and views from queries")
    query = node.expression
    if query is None:
        raise NotSupportedError(f"CREATE {kind} needs AS query: plansight tables are made "
                                "from query results (CREATE TABLE t AS SELECT ...)")
    name = _target_name(node.this)
    existing = _existing(session, name)
    if existing is not None:
        if node.args.get("exists"):
            return  # IF NOT EXISTS
        if not node.args.get("replace"):
            raise PlanError(f"{'view' if isinstance(session._tables[existing], View) else 'table'}"
                            f" {existing!r} already exists: use CREATE OR REPLACE {kind}")
    if kind == "VIEW":
        view = View(name, query, query.sql(dialect="duckdb"))
        session._check_view(view, catalog)  # binds now: a broken view fails where it is written
        if existing is not None:
            session.deregister(existing)
        session._tables[name] = view
        return
    table = run_query(query)
    if existing is not None:
        session.deregister(existing)
    session.register(name, table)


def _drop(session, node: exp.Drop) -> None:
    kind = str(node.args.get("kind") or "").upper()
    if kind not in ("TABLE", "VIEW"):
        raise NotSupportedError(f"DROP {kind} is not supported")
    for table in node.args.get("expressions") or node.args.get("tables") or []:
        existing = _existing(session, table.name)
        if existing is None:
            if node.args.get("exists"):
                continue
            raise PlanError(f"{kind.lower()} {table.name!r} does not exist")
        is_view = isinstance(session._tables[existing], View)
        if is_view != (kind == "VIEW"):
            raise PlanError(f"{existing!r} is a {'view' if is_view else 'table'}: use DROP "
                            f"{'VIEW' if is_view else 'TABLE'}")
        session.deregister(existing)


def _insert(session, node: exp.Insert, run_query) -> None:
    name = _target_name(node.this)
    existing = _existing(session, name)
    source = session._tables.get(existing) if existing else None
    if source is None:
        raise PlanError(f"table {name!r} does not exist: create it first "
                        "(CREATE TABLE t AS SELECT ...)")
    if not hasattr(source, "table") or isinstance(source, View):
        raise PlanError(f"cannot insert into {existing!r}: only tables made by CREATE TABLE "
                        "or registered in-memory data take new rows")
    target: pa.Table = source.table
    rows = run_query(node.expression)
    columns = [c.name for c in node.this.expressions] if isinstance(node.this, exp.Schema) \
        else target.column_names
    if rows.num_columns != len(columns):
        raise PlanError(f"INSERT INTO {existing} gives {rows.num_columns} values per row for "
                        f"{len(columns)} columns")
    lowered = {c.lower(): c for c in target.column_names}
    unknown = [c for c in columns if c.lower() not in lowered]
    if unknown:
        raise PlanError(f"table {existing!r} has no column {unknown[0]!r}")
    given = {lowered[c.lower()]: rows.column(i) for i, c in enumerate(columns)}
    arrays = []
    for field in target.schema:
        values = given.get(field.name)
        if values is None:
            arrays.append(pa.nulls(rows.num_rows, field.type))
            continue
        try:
            arrays.append(values.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise PlanError(f"cannot insert {values.type} values into column {field.name!r} "
                            f"({field.type}) of {existing!r}: {e}") from None
    appended = pa.table(arrays, schema=target.schema)
    session._tables[existing] = MemorySource(pa.concat_tables([target, appended]))


def _call(session, node: exp.Command) -> None:
    """``CALL dbgen(sf = N)``: DuckDB's way to make the TPC-H tables, here the built-in
    generator (plansight.datasets), registered in the session."""
    from plansight.datasets import load_sample

    text = node.expression.name if node.expression is not None else ""
    match = _DBGEN.match(text)
    if match is None:
        raise NotSupportedError(f"CALL {text} is not supported; CALL dbgen(sf = 0.01) makes "
                                "the TPC-H tables")
    load_sample(session, "tpch", float(match.group(1)))


def _copy(node: exp.Copy, run_query) -> None:
    if node.args.get("kind"):  # COPY t FROM 'file'
        raise NotSupportedError("COPY ... FROM is not supported: read files with FROM 'file' "
                                "or read_csv/read_parquet")
    files = node.args.get("files") or []
    if len(files) != 1 or not (isinstance(files[0], exp.Literal) and files[0].is_string):
        raise PlanError("COPY ... TO needs one file name in quotes")
    path = files[0].this
    params = _copy_params(node)
    source = node.this
    query = source.this if isinstance(source, exp.Subquery) else exp.select("*").from_(source)
    table = run_query(query)
    fmt = str(params.pop("format", "csv" if path.lower().endswith((".csv", ".tsv"))
                         else "parquet")).lower()
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            compression = params.pop("compression", "snappy")
            pq.write_table(table, path, compression=str(compression).lower())
        elif fmt == "csv":
            import pyarrow.csv as pacsv

            header = params.pop("header", True)
            delimiter = params.pop("delimiter", params.pop("delim", params.pop("sep", ",")))
            pacsv.write_csv(table, path, pacsv.WriteOptions(include_header=bool(header),
                                                            delimiter=str(delimiter)))
        else:
            raise NotSupportedError(f"COPY format {fmt.upper()} is not supported: use "
                                    "PARQUET or CSV")
    except OSError as e:
        raise PlanError(f"cannot write {path!r}: {e}") from None
    if params:
        raise NotSupportedError(f"COPY option {min(params).upper()} is not supported")


def _copy_params(node: exp.Copy) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for param in node.args.get("params") or []:
        value = param.expression
        if value is None:
            parsed: Any = True
        elif isinstance(value, exp.Boolean):
            parsed = value.this
        elif isinstance(value, (exp.Literal, exp.Var, exp.Identifier, exp.Column)):
            parsed = value.name
            if str(parsed).lower() in ("true", "false"):
                parsed = str(parsed).lower() == "true"
        else:
            parsed = value.sql(dialect="duckdb")
        params[param.this.name.lower()] = parsed
    return params
