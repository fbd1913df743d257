"""The ``%%query`` cell magic and ``%query`` line magic: a thin layer over ``Session.sql``.

The magic only parses options, finds notebook variables the SQL names, applies per-cell
options, runs the query (under the live monitor unless ``--no-monitor``) and turns user
errors into a short message. Everything else is the library's job.

    %%query -o top --pandas --partitions 4
    SELECT k, sum(v) AS s FROM df GROUP BY k ORDER BY s DESC LIMIT 10

    x = %query SELECT 1 AS one
"""

from __future__ import annotations

import re
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from sqlglot import exp

from plansight.errors import Cancelled, InternalError, PlansightError, internal_error
from plansight.magic.extension import get_session
from plansight.magic.result import QueryResult
from plansight.replacement_scan import (  # noqa: F401 -- part of the magic's API
    find_tables,
    is_tabular,
    referenced_tables,
)

# Options that consume the next token; used to find where the SQL of a line magic starts.
_VALUE_OPTIONS = {"-o", "--out", "--partitions", "--memory-limit", "--batch-size", "--cluster",
                  "--trace",
                  "--save", "--with", "--file", "-f"}
# first words of SQL: after --plot KIND X, a word that is not one of these is the Y column
_SQL_STARTS = {"SELECT", "WITH", "FROM", "VALUES", "SHOW", "EXPLAIN", "DESCRIBE", "CREATE",
               "DROP", "INSERT", "COPY", "SET", "TABLE", "SUMMARIZE", "PIVOT"}

_RED, _RESET = "\x1b[31m", "\x1b[0m"


@magics_class
class PlansightMagics(Magics):
    """``%%query`` / ``%query``: run SQL on the kernel's plansight Session."""

    @no_var_expand
    @magic_arguments()
    @argument("-o", "--out", metavar="NAME",
              help="store the result in the notebook variable NAME (jupysql's NAME << SELECT "
                   "... does the same; an Arrow table unless "
                   "--pandas or --polars)")
    @argument("--pandas", action="store_true",
              help="return (and store) the result as a pandas DataFrame")
    @argument("--polars", action="store_true",
              help="return (and store) the result as a polars DataFrame")
    @argument("--explain", action="store_true",
              help="print the physical plan without running the query")
    @argument("--analyze", action="store_true",
              help="run the query and show every operator's metrics: the monitor's full "
                   "table (never collapsed), or EXPLAIN ANALYZE text with --no-monitor")
    @argument("--no-monitor", action="store_true",
              help="do not show the live plan monitor")
    @argument("--partitions", type=int, metavar="N",
              help="target partitions for this cell only")
    @argument("--memory-limit", metavar="SIZE",
              help="memory limit for this cell only, e.g. 512MB")
    @argument("--batch-size", type=int, metavar="N",
              help="batch size (rows) for this cell only")
    @argument("--cluster", metavar="WHERE",
              help="run this cell on a Dask cluster: local:N (N worker processes on this "
                   "machine), a scheduler address tcp://host:8786, or none")
    @argument("--profile", action="store_true",
              help="profile the run: show the operator timeline (Gantt) and the memory/CPU "
                   "curve; the result's .profile holds it (plansight.profiling.Profile)")
    @argument("--trace", metavar="FILE",
              help="write the run as Chrome trace-event JSON to FILE (open it in "
                   "https://ui.perfetto.dev); implies --profile")
    @argument("--save", metavar="NAME",
              help="save the cell's query as NAME (a view: later queries read it by name)")
    @argument("--no-execute", action="store_true",
              help="with --save: save the query without running it")
    @argument("--with", metavar="NAME", action="append", dest="with_",
              help="use the query saved as NAME (saved queries are views, so naming it in "
                   "the SQL is enough; --with checks it exists)")
    @argument("-f", "--file", metavar="PATH", help="run the SQL in the file PATH")
    @argument("--plot", nargs="+", metavar="ARG",
              help="chart the result: --plot bar|line|scatter X Y, or --plot hist X "
                   "(matplotlib)")
    @line_cell_magic
    def query(self, line: str, cell: str | None = None):
        """Run SQL on plansight's engine; notebook DataFrames and Arrow tables are tables.

        Options come first on the magic line; the SQL follows them (line magic) or fills
        the cell (cell magic). Returns the result, or None after an error or ``--explain``.
        ``:name`` in the SQL binds the notebook variable ``name`` as a typed value. To stop
        a running query, click the monitor's Cancel button (JupyterLab >= 4.4) or
        interrupt the kernel; the next cell works either way. A failing query fails the
        cell (Run All stops there) with a short message.

        ``%config Query.displaylimit = N`` sets the rows a result shows (0: all),
        ``Query.autopandas`` / ``Query.autopolars`` return DataFrames by default.
        """
        options_text, sql = split_options(line)
        if cell is not None:
            sql = f"{sql}\n{cell}" if sql.strip() else cell
        args = parse_argstring(self.query, options_text)  # a bad option: IPython's UsageError
        if args.file:
            if sql.strip():
                raise UsageError("--file and SQL in the cell: give one of them")
            try:
                with open(args.file) as handle:
                    sql = handle.read()
            except OSError as error:
                raise UsageError(f"cannot read {args.file}: {error.strerror}") from None
        capture, sql = split_capture(sql)
        if capture is not None:
            if args.out not in (None, capture):
                raise UsageError(f"both -o {args.out} and {capture} << name the result: "
                                 "use one of them")
            args.out = capture
        if not sql.strip():
            raise UsageError("no SQL given: write it after the options or in the cell body")
        try:
            return self._run(args, sql)
        except PlansightError as error:
            # a failed cell fails: Run All, nbclient and nbval stop here, and -o never
            # leaves the previous cell's result behind under the new cell's name
            if args.out:
                self.shell.user_ns.pop(args.out, None)
            if isinstance(error, InternalError):
                raise  # a bug: keep the traceback
            raise short_error(error) from None
        except Exception as error:  # a bug in the magic's own code: an InternalError
            if args.out:
                self.shell.user_ns.pop(args.out, None)
            raise internal_error(error, "running the cell") from error

    # -- helpers --------------------------------------------------------------
    @staticmethod
    def _monitor(args) -> bool:
        options = _options()
        return not args.no_monitor and (options is None or options.monitor)

    def _run(self, args, sql: str):
        session = get_session()
        for name in args.with_ or ():
            if name.lower() not in {view.lower() for view in session.views()}:
                raise UsageError(f"--with {name}: no query saved as {name!r} (save one with "
                                 f"%%query --save {name})")
        if args.save:
            session.create_view(args.save, sql, catalog=namespace_tables(
                sql, session.tables(), self.shell.user_ns, session.views()))
            if args.no_execute:
                return None
        catalog = namespace_tables(sql, session.tables(), self.shell.user_ns,
                                   session.views())
        overrides = {}
        if args.partitions is not None:
            overrides["target_partitions"] = args.partitions
        if args.memory_limit is not None:
            overrides["memory_limit"] = args.memory_limit
        if args.batch_size is not None:
            overrides["batch_size"] = args.batch_size
        if args.cluster is not None:
            overrides["cluster"] = args.cluster
        params = namespace_parameters(sql, self.shell.user_ns)
        query = session.sql(sql, catalog=catalog, params=params, options=overrides)
        if args.explain:
            print(query.explain())
            return None
        if query.physical is None:  # only SET statements
            return None
        profile = None
        if args.profile or args.trace:
            from plansight.profiling import profile_query

            profile = profile_query(query, execute=lambda observers: self._execute(
                query, monitor=self._monitor(args), observers=observers,
                detail=args.analyze))
            run = profile.run
            _display(profile)
            if args.trace:
                try:
                    path = profile.write_trace(args.trace)
                except OSError as error:
                    _print_error(f"could not write the trace: {error}")
                else:
                    print(f"trace written to {path} (open it in https://ui.perfetto.dev)")
        else:
            run = self._execute(query, monitor=self._monitor(args), detail=args.analyze)
        if getattr(query, "_explain", None) is not None:  # EXPLAIN [ANALYZE] written in SQL
            print(run.result.column(0)[0].as_py())
            return None
        if args.analyze and not self._monitor(args):  # else the monitor shows the plan
            print(run.explain_analyze())
        result = run.result
        if args.plot:
            from plansight.magic.plot import plot_result

            _display(plot_result(result, args.plot))
        options = _options()
        as_pandas = args.pandas or (not args.polars and options is not None and
                                    options.autopandas)
        as_polars = args.polars or (not as_pandas and options is not None and
                                    options.autopolars)
        value: Any = QueryResult(result, run.elapsed, profile,
                                 display_limit=options.displaylimit if options else None)
        if as_pandas:
            value = result.to_pandas()
        elif as_polars:
            import polars as pl

            value = pl.from_arrow(result)
        if args.out:
            self.shell.user_ns[args.out] = value if (as_pandas or as_polars) else result
        return value

    @staticmethod
    def _execute(query, monitor: bool, observers=(), detail: bool = False):
        if monitor:
            from plansight.widgets.plan_view import QueryMonitor

            return QueryMonitor(query, observers=observers, detail=detail).run()
        try:
            return query.execute(observer=list(observers))
        except KeyboardInterrupt:
            query.cancel()
            raise Cancelled("query cancelled") from None


_CAPTURE = re.compile(r"^\s*([A-Za-z_]\w*)\s*<<(?!=)\s*")


def split_capture(sql: str) -> tuple[str | None, str]:
    """jupysql's ``name << SELECT ...``: (the variable to store the result in, the SQL).

    Stored like ``-o name``; ``<<`` between SQL values is the bit shift, never a capture.

    Example:
        >>> split_capture("res << SELECT 1")
        ('res', 'SELECT 1')
        >>> split_capture("SELECT 1 << 2")
        (None, 'SELECT 1 << 2')
    """
    match = _CAPTURE.match(sql)
    if match is None or match.group(1).upper() in ("SELECT", "WITH", "FROM", "VALUES"):
        return None, sql
    return match.group(1), sql[match.end():]


def split_options(line: str) -> tuple[str, str]:
    """Split a magic line into its leading options and the SQL after them.

    Example:
        >>> split_options("-o x --partitions 2 SELECT '-a' AS y")
        ('-o x --partitions 2', "SELECT '-a' AS y")
        >>> split_options("--explain")
        ('--explain', '')
        >>> split_options("--plot bar k total SELECT 1")
        ('--plot bar k total', 'SELECT 1')
        >>> split_options("--plot hist x select 1")
        ('--plot hist x', 'select 1')
    """
    position, expect_values, plot_words = 0, 0, 0
    for match in re.finditer(r"\S+", line):
        token = match.group()
        if expect_values:
            expect_values, position = expect_values - 1, match.end()
            continue
        if plot_words and not token.startswith("-") and token.upper() not in _SQL_STARTS:
            plot_words, position = plot_words - 1, match.end()  # the optional Y column
            continue
        plot_words = 0
        if not token.startswith("-") or token in ("-", "--"):
            break
        name = token.split("=", 1)[0]
        expect_values = 1 if name in _VALUE_OPTIONS and "=" not in token else 0
        if name == "--plot":
            expect_values, plot_words = 2, 1  # KIND X, then maybe Y
        position = match.end()
    return line[:position].strip(), line[position:].strip()


def namespace_parameters(sql: str, user_ns: dict) -> dict[str, Any]:
    """Values of the ``:name`` placeholders the SQL uses, from the notebook namespace.

    They are bound as typed literals by the engine, never pasted into the SQL text, so a
    string holding quotes is just a string. Unknown names are left for the engine's error.

    Example:
        >>> namespace_parameters("SELECT * FROM t WHERE x > :low AND y = :who",
        ...                      {"low": 3, "who": "o'brien", "other": 1})
        {'low': 3, 'who': "o'brien"}
    """
    statements = _parse_or_none(sql)
    if statements is None:
        return {}
    found: dict[str, Any] = {}
    for statement in statements:
        if statement is None:
            continue
        for placeholder in statement.find_all(exp.Placeholder):
            name = placeholder.name
            if name and name in user_ns:
                found[name] = user_ns[name]
    return found


def _parse_or_none(sql: str) -> list[exp.Expression] | None:
    """The engine's parse of ``sql`` (its dialect reads ``SELECT :x``), None on a syntax error."""
    from plansight.engine.sql.parser import parse

    try:
        return parse(sql)
    except PlansightError:
        return None


def namespace_tables(sql: str, registered: list[str], user_ns: dict,
                     views: dict | None = None) -> dict[str, Any]:
    """Notebook variables holding tables that the SQL (or a view it reads) names and the
    session does not know; every table variable for SHOW TABLES."""
    return find_tables(sql, registered, user_ns, views=views)


def _options():
    from plansight.magic.extension import get_options

    return get_options()


def _display(obj) -> None:
    """Show ``obj`` in the cell's output (HTML in a notebook, its repr in a terminal)."""
    from IPython.display import display

    display(obj)


def _print_error(message: str) -> None:
    print(f"{_RED}{message}{_RESET}", file=sys.stderr)


def short_error(error: PlansightError) -> PlansightError:
    """``error``, shown by IPython as its class and message only (caret snippet included),
    without a Python traceback, as jupysql shows its errors; still raised, so the cell fails.

    IPython renders an exception that has ``_render_traceback_`` with the lines it returns.

    Example:
        >>> from plansight.errors import PlanError
        >>> lines = short_error(PlanError("no table 'x'"))._render_traceback_()
        >>> "PlanError: no table 'x'" in lines[0] and "Traceback" not in lines[0]
        True
    """
    text = f"{type(error).__name__}: {error}"
    error._render_traceback_ = lambda: [f"{_RED}{text}{_RESET}"]
    return error
