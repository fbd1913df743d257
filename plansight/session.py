"""Session: the catalog of registered tables, the options, and the memory pool of queries."""

from __future__ import annotations

import os
import re
import sys
import threading
from typing import Any

import psutil
import pyarrow as pa
from sqlglot import exp

from plansight.engine.catalog import (
    CsvSource,
    IpcSource,
    ParquetSource,
    TableSource,
    View,
    source_from_object,
)
from plansight.engine.exec.allocator import retain_freed_memory, use_returning_arrow_pool
from plansight.engine.exec.context import SessionConfig
from plansight.engine.exec.memory_pool import parse_memory_limit
from plansight.engine.sql.parser import parse
from plansight.errors import PlanError, PlansightError, add_caret, did_you_mean, internal_error
from plansight.replacement_scan import find_tables
from plansight.statements import is_session_statement, run_statement

NULL_ORDERS = ("nulls_last", "nulls_first", "nulls_first_on_asc_last_on_desc",
               "nulls_last_on_asc_first_on_desc")


def _positive_int(name):
    def check(value):
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = 0
        if isinstance(value, bool) or number < 1 or (isinstance(value, float) and
                                                    value != number):
            raise PlanError(f"option {name} must be a positive integer, got {value!r}")
        return number
    return check


def _null_order(value):
    text = str(value).lower().replace(" ", "_")
    if text not in NULL_ORDERS:
        raise PlanError(f"invalid value {value!r} for default_null_order: use one of "
                        f"{', '.join(NULL_ORDERS)}")
    return text


def _boolean(name):
    def check(value):
        if isinstance(value, bool):
            return value
        text = str(value).lower()
        if text in ("true", "1", "on", "yes"):
            return True
        if text in ("false", "0", "off", "no"):
            return False
        raise PlanError(f"option {name} must be true or false, got {value!r}")
    return check


def _boolean_or_auto(name):
    """True, False, or "auto" (the engine decides case by case)."""
    boolean = _boolean(name)

    def check(value):
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            return boolean(value)
        except PlanError:
            raise PlanError(f"option {name} must be true, false or auto, got {value!r}") \
                from None
    return check


def _memory(value):
    if value is None or str(value).lower() in ("none", "unlimited", "-1"):
        return None
    try:
        return parse_memory_limit(value)
    except ValueError as e:
        raise PlanError(str(e)) from None


def _spill_dir(value):
    return None if value in (None, "") else str(value)


def _choice(name, choices):
    def check(value):
        text = str(value).lower()
        if text not in choices:
            raise PlanError(f"invalid {name} {value!r}: use one of {', '.join(choices)}")
        return text
    return check


def _non_negative_int(name):
    positive = _positive_int(name)

    def check(value):
        return 0 if value in (0, "0") else positive(value)
    return check


def _cluster(value):
    """None (run here), "local:N", a scheduler address, or a distributed.Client."""
    if value is None or (isinstance(value, str) and value.strip().lower() in
                         ("", "none", "off", "local")):
        return None
    if hasattr(value, "scheduler_info") and hasattr(value, "submit"):
        return value  # a distributed.Client
    text = str(value).strip()
    if text.lower().startswith("local:"):
        _positive_int("cluster workers")(text.split(":", 1)[1])
        return text.lower()
    if "://" in text or re.fullmatch(r"[\w.\-]+:\d+", text):
        return text
    raise PlanError(f"invalid cluster {value!r}: use 'local:N', a scheduler address such as "
                    "'tcp://host:8786', a distributed.Client, or none")


OPTIONS = {
    "target_partitions": _positive_int("target_partitions"),
    "threads": _positive_int("threads"),  # DuckDB's name for the same knob
    "batch_size": _positive_int("batch_size"),
    "memory_limit": _memory,
    "default_null_order": _null_order,
    "integer_division": _boolean("integer_division"),
    "spill_dir": _spill_dir,
    "temp_directory": _spill_dir,  # DuckDB's name
    "memory_pool_policy": _choice("memory_pool_policy", ("greedy", "fair")),
    "hash_join_single_partition_threshold_rows": _non_negative_int(
        "hash_join_single_partition_threshold_rows"),
    "aggregate_single_final_threshold_rows": _non_negative_int(
        "aggregate_single_final_threshold_rows"),
    "window_executor": _choice("window_executor", ("auto", "hash", "sorted", "partition")),
    "spill_merge_fan_in": _positive_int("spill_merge_fan_in"),
    "dynamic_filter_max_keys": _non_negative_int("dynamic_filter_max_keys"),
    "dynamic_filter_max_bitmap_bits": _non_negative_int("dynamic_filter_max_bitmap_bits"),
    "dynamic_filter_through_joins": _boolean_or_auto("dynamic_filter_through_joins"),
    "dynamic_filter_bypass_after_rows": _non_negative_int("dynamic_filter_bypass_after_rows"),
    "dynamic_filter_across_stages": _boolean("dynamic_filter_across_stages"),
    "optimizer": _boolean("optimizer"),  # false: only the rules a plan needs (reference plans)
    "recursive_cte_max_iterations": _positive_int("recursive_cte_max_iterations"),
    "cluster": _cluster,
    "cluster_min_rows": _non_negative_int("cluster_min_rows"),  # smaller queries run here
}
_ALIASES = {"threads": "target_partitions", "temp_directory": "spill_dir"}


def apply_option(config: SessionConfig, name: str, value: Any) -> None:
    """Validate ``value`` for option ``name`` and set it on ``config`` (PlanError if bad)."""
    key = str(name).lower()
    if key not in OPTIONS:
        raise PlanError(f"unknown option {name!r}." + did_you_mean(key, OPTIONS) +
                        f" Options: {', '.join(sorted(OPTIONS))}")
    setattr(config, _ALIASES.get(key, key), OPTIONS[key](value))


def default_memory_limit() -> int:
    """80% of the RAM available now, like DuckDB's default share."""
    return int(psutil.virtual_memory().available * 0.8)


class Session:
    """A catalog of tables and the options queries run with.

    ``cluster`` runs queries on Dask (``pip install plansight[distributed]``): ``"local:N"``
    starts N worker processes on 127.0.0.1, ``"tcp://host:8786"`` connects to a scheduler,
    or pass a ``distributed.Client``. The plan is cut into stages at its exchanges (EXPLAIN
    shows them) and each stage runs as one task per partition; ``close()`` stops a cluster
    the session started.

    Example:
        >>> import pyarrow as pa, plansight as ps
        >>> s = ps.Session(target_partitions=1)
        >>> s.register("t", pa.table({"x": [1, 2, 3]}))
        >>> s.sql("SELECT count(*) AS n, max(x) AS top FROM t").to_arrow().to_pylist()
        [{'n': 3, 'top': 3}]
    """

    def __init__(self, target_partitions: int | None = None, memory_limit: int | str | None = None,
                 batch_size: int = 8192, spill_dir: str | None = None, cluster: Any = None):
        # large numpy/Arrow temporaries are reused instead of faulted in per query
        retain_freed_memory()
        use_returning_arrow_pool()  # an Arrow pool that gives freed memory back
        self.config = SessionConfig()
        self._tables: dict[str, TableSource] = {}
        self._lock = threading.Lock()
        self.set_option("target_partitions", target_partitions or os.cpu_count() or 1)
        self.set_option("memory_limit", memory_limit if memory_limit is not None
                        else default_memory_limit())
        self.set_option("batch_size", batch_size)
        self.set_option("spill_dir", spill_dir)
        self.set_option("cluster", cluster)
        self._clusters: dict[Any, Any] = {}  # cluster option value -> ClusterConnection

    # -- options --------------------------------------------------------------
    def set_option(self, name: str, value: Any) -> None:
        """Set a session option (DuckDB's names where DuckDB has the option)."""
        apply_option(self.config, name, value)

    def get_option(self, name: str) -> Any:
        key = name.lower()
        if key not in OPTIONS:
            raise PlanError(f"unknown option {name!r}." + did_you_mean(key, OPTIONS))
        return getattr(self.config, _ALIASES.get(key, key))

    def cluster_connection(self, spec: Any):
        """The session's connection to cluster ``spec`` (made on first use, then kept)."""
        from plansight.cluster import connect

        key = spec if isinstance(spec, str) else id(spec)
        with self._lock:
            connection = self._clusters.get(key)
            if connection is None:
                connection = self._clusters[key] = connect(spec)
            return connection

    def close(self) -> None:
        """Stop the clusters this session started (``local:N``) and forget scattered tables."""
        with self._lock:
            connections, self._clusters = list(self._clusters.values()), {}
        for connection in connections:
            connection.close()

    # -- catalog --------------------------------------------------------------
    def register(self, name: str, obj: Any, sorted_by: str | list[str] | None = None) -> None:
        """Register an Arrow table / RecordBatchReader or a pandas / polars DataFrame.

        ``sorted_by`` declares how the rows are already sorted (``["a", "b DESC NULLS
        FIRST"]``): sorts on it are skipped and a top-k stops early. It is checked (one
        vectorized pass): rows not sorted so are a PlanError naming the first such row.

        Example:
            >>> import pyarrow as pa, plansight as ps
            >>> s = ps.Session(target_partitions=1)
            >>> s.register("t", pa.table({"a": [1, 2, 3]}), sorted_by=["a"])
            >>> "SortExec" in s.sql("SELECT a FROM t ORDER BY a").explain()
            False
        """
        self._check_name(name)
        self._tables[name] = source_from_object(obj, sorted_by, name=name)

    def register_parquet(self, name: str, path, sorted_by: str | list[str] | None = None
                         ) -> None:
        """Register Parquet files (a file, a folder or a glob).

        ``sorted_by`` declares that every file is sorted so (checked against row-group
        statistics, otherwise trusted); without it, the ``sorting_columns`` the files'
        metadata carry are used where statistics prove the row groups follow each other.
        """
        self._check_name(name)
        self._tables[name] = ParquetSource(path, sorted_by)

    def register_csv(self, name: str, path, **options) -> None:
        self._check_name(name)
        self._tables[name] = CsvSource(path, **options)

    def register_ipc(self, name: str, path) -> None:
        self._check_name(name)
        self._tables[name] = IpcSource(path)

    def deregister(self, name: str) -> None:
        self._tables.pop(name, None)

    def tables(self) -> list[str]:
        return sorted(self._tables)

    def table_schema(self, name: str):
        source = self._tables[name]
        if isinstance(source, View):
            return pa.schema([pa.field(c.name, c.type) for c in self.sql(
                f'SELECT * FROM "{name}"').logical.columns])
        return source.schema

    @staticmethod
    def _check_name(name: str) -> None:
        if not isinstance(name, str) or not name:
            raise PlanError(f"table name must be a non-empty string, got {name!r}")

    # -- queries --------------------------------------------------------------
    def sql(self, text: str, catalog: dict[str, Any] | None = None,
            params: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
            _caller_depth: int = 1):
        """Parse, bind and plan ``text`` (lazy: nothing runs until a result is asked for).

        SET statements apply at once. ``catalog`` adds tables visible to this query only.
        ``params`` binds ``:name`` placeholders to values, as typed literals (never as text).
        ``options`` overrides session options for this query only (the session is unchanged).
        A table name neither registered nor in ``catalog`` is looked up among the caller's
        variables (a replacement scan, as in DuckDB): a DataFrame ``df`` in scope is ``df``.

        Example:
            >>> import pyarrow as pa, plansight as ps
            >>> s = ps.Session(target_partitions=1)
            >>> s.register("t", pa.table({"x": [1, 5, 9]}))
            >>> s.sql("SELECT x FROM t WHERE x > :low", params={"low": 4}).to_arrow().to_pylist()
            [{'x': 5}, {'x': 9}]
        """
        try:
            # one frame deeper: the replacement scan looks at the caller's variables
            return self._sql(text, catalog, params, options, _caller_depth + 1)
        except PlansightError:
            raise
        except RecursionError as e:
            raise PlansightError("the query is nested too deeply to plan") from e
        except Exception as e:  # a bug: say so, keep the original
            raise internal_error(e, "parsing and planning") from e

    def _sql(self, text: str, catalog: dict[str, Any] | None, params: dict[str, Any] | None,
             options: dict[str, Any] | None, _caller_depth: int):
        from plansight.query import Query

        statements = parse(text)
        catalog = dict(catalog or {})
        frame = sys._getframe(_caller_depth)
        # SHOW TABLES lists the caller's module (a notebook's) variables, not a function's
        catalog.update(find_tables(statements, [*self._tables, *catalog], frame.f_locals,
                                   frame.f_globals, views=self.views(),
                                   listed=(frame.f_globals,)))
        del frame
        params = params or {}

        def visible_tables() -> dict[str, Any]:
            # a table created by an earlier statement wins over a variable of the same name
            tables: dict[str, Any] = dict(self._tables)
            known = {name.lower() for name in tables}
            for name, obj in catalog.items():
                if name.lower() not in known:
                    tables[name] = source_from_object(obj, name=name)
            return tables

        def run_query(node: exp.Expression):
            return Query(self, text, node, visible_tables(), params, query_config()).to_arrow()

        def query_config():
            # made when needed: a SET earlier in the text applies to what follows it
            config = self.config.copy()
            for name, value in (options or {}).items():
                apply_option(config, name, value)
            return config

        query = None
        for statement in statements:
            if isinstance(statement, exp.Set):
                self._apply_set(statement)
                continue
            if query is not None:
                raise PlanError("several queries in one call: run them one at a time "
                                "(SET, CREATE, DROP, INSERT and COPY statements may precede "
                                "a query)")
            if is_session_statement(statement):
                try:
                    run_statement(self, statement, run_query, catalog)
                except PlansightError as e:
                    raise add_caret(e, text) from None
                continue
            query = statement
        return Query(self, text, query, visible_tables(), params, query_config())

    def create_view(self, name: str, sql: str, catalog: dict[str, Any] | None = None) -> None:
        """Save the query ``sql`` as the view ``name`` (CREATE OR REPLACE VIEW): later queries
        read it by name and run it with the tables as they are then.

        Example:
            >>> import plansight as ps
            >>> s = ps.Session(target_partitions=1)
            >>> s.create_view("one", "SELECT 1 AS x")
            >>> s.sql("SELECT x + 1 AS y FROM one").to_arrow().to_pylist()
            [{'y': 2}]
        """
        self._check_name(name)
        statements = [s for s in parse(sql) if not isinstance(s, exp.Set)]
        if len(statements) != 1 or is_session_statement(statements[0]):
            raise PlanError(f"a saved query must be one query (SELECT, WITH, VALUES), "
                            f"got {len(statements)} statements" if len(statements) != 1 else
                            "a saved query must be a query (SELECT, WITH, VALUES)")
        view = View(name, statements[0], sql)
        try:
            self._check_view(view, catalog)
        except PlansightError as e:
            raise add_caret(e, sql) from None
        existing = next((key for key in self._tables if key.lower() == name.lower()), None)
        if existing is not None:
            self.deregister(existing)
        self._tables[name] = view

    def views(self) -> dict[str, View]:
        """The session's views (CREATE VIEW, %%query --save), by name."""
        return {name: v for name, v in self._tables.items() if isinstance(v, View)}

    def _check_view(self, view: View, catalog: dict[str, Any] | None = None) -> None:
        """Bind ``view``'s query now (a view naming a missing table fails at CREATE)."""
        from plansight.engine.sql.binder import Binder

        tables = {**{name: source_from_object(obj, name=name)
                     for name, obj in (catalog or {}).items()}, **self._tables}
        options = {"integer_division": self.config.integer_division,
                   "default_null_order": self.config.default_null_order}
        Binder(tables, options, {}).bind_query(view.query, None)

    def _apply_set(self, statement: exp.Set) -> None:
        for item in statement.expressions:
            assignment = item.this
            if not isinstance(assignment, exp.EQ):
                raise PlanError(f"cannot understand {statement.sql()}: use SET name = value")
            name = assignment.this.name
            value_node = assignment.expression
            value = value_node.name if isinstance(value_node, (exp.Literal, exp.Column,
                                                                 exp.Identifier, exp.Var)) \
                else value_node.sql()
            if isinstance(value_node, exp.Boolean):
                value = value_node.this
            self.set_option(name, value)
