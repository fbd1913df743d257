"""The %%query / %query magics through a real IPython shell."""

from __future__ import annotations

import doctest
import importlib
import re

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from IPython import get_ipython
from IPython.testing.globalipapp import start_ipython

import plansight as ps
from plansight.errors import InternalError
from plansight.magic import QueryResult, get_session, set_session


@pytest.fixture
def ip():
    start_ipython()  # once per process; later calls return None
    shell = get_ipython()
    if "query" not in shell.magics_manager.magics["cell"]:
        shell.run_line_magic("load_ext", "plansight")
    set_session(ps.Session(target_partitions=2))
    yield shell
    for name in ("df", "pdf", "plf", "arrow_t", "out"):
        shell.user_ns.pop(name, None)


def query(ip, line, cell=None):
    if cell is None:
        return ip.run_line_magic("query", line)
    return ip.run_cell_magic("query", line, cell)


def test_cell_returns_result(ip):
    result = query(ip, "--no-monitor", "SELECT 1 AS one, 'a' AS s")
    assert isinstance(result, QueryResult)
    assert result.table.to_pylist() == [{"one": 1, "s": "a"}]
    assert result.to_pandas().shape == (1, 2)


def test_line_magic_returns_result(ip):
    assert query(ip, "--no-monitor SELECT 40 + 2 AS x").table.to_pylist() == [{"x": 42}]


def test_out_stores_arrow_pandas_polars(ip):
    query(ip, "-o out --no-monitor", "SELECT 1 AS x")
    assert isinstance(ip.user_ns["out"], pa.Table)
    assert isinstance(query(ip, "-o out --pandas --no-monitor", "SELECT 1 AS x"), pd.DataFrame)
    assert isinstance(ip.user_ns["out"], pd.DataFrame)
    query(ip, "--out=out --polars --no-monitor", "SELECT 1 AS x")
    assert isinstance(ip.user_ns["out"], pl.DataFrame)


def test_namespace_dataframes_are_tables(ip):
    ip.user_ns["pdf"] = pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]})
    ip.user_ns["plf"] = pl.DataFrame({"k": ["a", "b"], "w": [10, 20]})
    ip.user_ns["arrow_t"] = pa.table({"k": ["a"], "z": [True]})
    result = query(ip, "--no-monitor", """
        WITH sums AS (SELECT k, sum(v) AS s FROM pdf GROUP BY k)
        SELECT sums.k, s, w, z FROM sums JOIN plf ON sums.k = plf.k
        LEFT JOIN arrow_t ON sums.k = arrow_t.k ORDER BY sums.k""")
    assert result.table.to_pylist() == [{"k": "a", "s": 4, "w": 10, "z": True},
                                        {"k": "b", "s": 2, "w": 20, "z": None}]
    assert "pdf" not in get_session().tables()  # visible to the query only


def test_registered_table_wins_over_namespace(ip):
    get_session().register("df", pa.table({"x": [1]}))
    ip.user_ns["df"] = pd.DataFrame({"x": [1, 2, 3]})
    assert query(ip, "--no-monitor SELECT count(*) AS n FROM df").table.to_pylist() == [{"n": 1}]


def test_cell_options_apply_to_one_cell(ip, monkeypatch):
    session = get_session()
    before = (session.get_option("target_partitions"), session.get_option("memory_limit"),
              session.get_option("batch_size"))
    seen = []
    original = ps.Session.sql

    def spy(self, text, catalog=None, params=None, options=None):
        q = original(self, text, catalog, params, options)
        seen.append(q.config)
        return q

    monkeypatch.setattr(ps.Session, "sql", spy)
    query(ip, "--partitions 3 --memory-limit 512MB --batch-size 7 --no-monitor", "SELECT 1")
    config = seen[-1]
    assert (config.target_partitions, config.memory_limit, config.batch_size) == \
        (3, 512_000_000, 7)  # MB is decimal, as in DuckDB
    assert (session.get_option("target_partitions"), session.get_option("memory_limit"),
            session.get_option("batch_size")) == before


def test_batch_size_changes_execution(ip, capsys):
    ip.user_ns["arrow_t"] = pa.table({"x": list(range(100))})
    query(ip, "--analyze --batch-size 10 --no-monitor", "SELECT x FROM arrow_t")
    assert "output_batches=10" in capsys.readouterr().out


def test_explain_prints_plan_without_running(ip, capsys):
    assert query(ip, "--explain", "SELECT 1 AS x") is None
    assert "Exec" in capsys.readouterr().out


def run_cell(ip, source: str, capsys):
    """Run ``source`` as a notebook cell; (the ExecutionResult, what the cell printed)."""
    capsys.readouterr()
    result = ip.run_cell(source)
    captured = capsys.readouterr()
    return result, captured.out + captured.err


def test_syntax_error_fails_the_cell_with_a_caret_and_no_traceback(ip, capsys):
    result, shown = run_cell(ip, "%%query\nSELECT 1 +* FROM", capsys)
    assert isinstance(result.error_in_exec, ps.SqlSyntaxError) and not result.success
    assert "^" in shown and "SqlSyntaxError" in shown and "Traceback" not in shown
    assert query(ip, "--no-monitor SELECT 2 AS x").table.to_pylist() == [{"x": 2}]


def test_failing_cell_raises_the_plansight_error(ip):
    ip.user_ns["arrow_t"] = pa.table({"x": [1]})
    with pytest.raises(ps.PlanError, match="'y'"):
        query(ip, "--no-monitor SELECT y FROM arrow_t")
    with pytest.raises(ps.SqlSyntaxError):
        query(ip, "", "SELECT 1 +* FROM")


def test_plan_error_is_short(ip, capsys):
    ip.user_ns["arrow_t"] = pa.table({"x": [1]})
    result, shown = run_cell(ip, "%query --no-monitor SELECT y FROM arrow_t", capsys)
    assert isinstance(result.error_in_exec, ps.PlanError)
    assert "'y'" in shown and "Traceback" not in shown


def test_out_is_never_stale_after_a_failure(ip, capsys):
    query(ip, "-o out --no-monitor", "SELECT 1 AS x")
    assert "out" in ip.user_ns
    result, _ = run_cell(ip, "%%query -o out --no-monitor\nSELECT nope FROM nowhere", capsys)
    assert result.error_in_exec is not None and "out" not in ip.user_ns
    result, _ = run_cell(ip, "%%query -o out --no-monitor\nSELECT 1 +* FROM", capsys)
    assert result.error_in_exec is not None and "out" not in ip.user_ns


def test_bad_option_value_is_short(ip, capsys):
    result, shown = run_cell(ip, "%query --memory-limit lots --no-monitor SELECT 1", capsys)
    assert result.error_in_exec is not None and "Traceback" not in shown
    result, shown = run_cell(ip, "%query --no-such-option SELECT 1", capsys)
    assert result.error_in_exec is not None and "Traceback" not in shown
    assert query(ip, "--no-monitor SELECT 1 AS x").num_rows == 1


def test_internal_error_keeps_traceback(ip, monkeypatch):
    def broken(self, text, catalog=None, params=None, options=None):
        raise InternalError("boom")

    monkeypatch.setattr(ps.Session, "sql", broken)
    with pytest.raises(InternalError):
        query(ip, "--no-monitor SELECT 1")


def test_keyboard_interrupt_cancels(ip, monkeypatch, capsys):
    cancelled = []

    def interrupted(self, observer=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(ps.Query, "execute", interrupted)
    monkeypatch.setattr(ps.Query, "cancel", lambda self: cancelled.append(True))
    result, shown = run_cell(ip, "%query --no-monitor SELECT 1", capsys)
    assert isinstance(result.error_in_exec, ps.Cancelled) and cancelled
    assert "query cancelled" in shown and "Traceback" not in shown


def test_monitor_falls_back_to_text_summary(ip, capsys):
    result = query(ip, "", "SELECT 1 AS x")
    assert result.table.to_pylist() == [{"x": 1}]
    out = capsys.readouterr().out  # compact: headline, progress, the hottest operator
    assert out.startswith("finished") and "hottest: " in out and "Exec:" not in out
    query(ip, "--analyze", "SELECT 1 AS x")
    out = capsys.readouterr().out  # the full table once (the monitor's), no EXPLAIN text
    assert "ProjectionExec: rows=1" in out and "output_batches=" not in out
    ip.user_ns["arrow_t"] = pa.table({"x": list(range(50))})
    query(ip, "", "SELECT x FROM arrow_t LIMIT 5")
    # the limit reached the scan (5 rows a partition): the estimate says so, no "of ~50"
    assert re.search(r"rows scanned (\d+) of ~\1 \(100%\)", capsys.readouterr().out)


def test_help_lists_options(ip):
    doc = PlansightMagicsDoc()
    for option in ("--out", "--pandas", "--polars", "--explain", "--analyze", "--no-monitor",
                   "--partitions", "--memory-limit", "--batch-size", "--profile", "--trace"):
        assert option in doc
    assert ":name" in doc and "interrupt the kernel" in doc


def PlansightMagicsDoc():
    from plansight.magic.magic import PlansightMagics

    return PlansightMagics.query.__doc__


def test_result_rendering_is_bounded_and_escaped():
    table = pa.table({"x": list(range(1000)), "s": ["<i>"] * 1000})
    result = QueryResult(table)
    html = result._repr_html_()
    assert html.count("<tr>") <= 41 and "&lt;i&gt;" in html and "<i>" not in html
    assert "1,000 rows" in html and "999" in html and "int64" in html
    text = repr(result)
    assert len(text.splitlines()) < 30 and "..." in text


def test_unload(ip):
    ip.run_line_magic("unload_ext", "plansight")
    assert "query" not in ip.magics_manager.magics["cell"]
    ip.run_line_magic("load_ext", "plansight")
    assert "query" in ip.magics_manager.magics["cell"]


@pytest.mark.parametrize("name", ["plansight.magic.magic", "plansight.magic.result",
                                  "plansight.magic.extension"])
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_colon_parameters_bind_namespace_values_as_typed_literals(ip, capsys):
    ip.user_ns["arrow_t"] = pa.table({"x": [1, 5, 9], "s": ["a", "o'b", "c"]})
    ip.user_ns["low"] = 2
    ip.user_ns["who"] = "o'b"  # a quote that text substitution would break on
    result = query(ip, "--no-monitor",
                   "SELECT x FROM arrow_t WHERE x > :low AND s = :who")
    assert result.table.to_pylist() == [{"x": 5}]
    with pytest.raises(ps.PlanError, match="parameter :nowhere has no value"):
        query(ip, "--no-monitor", "SELECT 1 + :nowhere AS y")
    for name in ("low", "who"):
        ip.user_ns.pop(name)


def test_parameter_first_in_select_list(ip, capsys):
    ip.user_ns.update(x=41, y="o'b")
    ip.user_ns["arrow_t"] = pa.table({"a": [1, 41, 41]})
    assert query(ip, "--no-monitor SELECT :x").table.to_pylist()[0] == {"$x": 41}
    row = query(ip, "--no-monitor", "SELECT :x + 1, :y AS b").table.to_pylist()[0]
    assert list(row.values()) == [42, "o'b"] and "b" in row
    assert query(ip, "--no-monitor", "SELECT count(*) AS n FROM arrow_t WHERE a = :x"
                 ).table.to_pylist() == [{"n": 2}]
    # an unbound name: a short message with a caret under it, no traceback
    _, err = run_cell(ip, "%%query --no-monitor\nSELECT :x,\n       :missing", capsys)
    assert "parameter :missing has no value" in err and "Traceback" not in err
    lines = err.replace("\x1b[31m", "").replace("\x1b[0m", "").splitlines()  # no colour
    caret = next(i for i, line in enumerate(lines) if line.strip() == "^")
    assert lines[caret].index("^") == lines[caret - 1].index(":missing")
    for name in ("x", "y"):
        ip.user_ns.pop(name)


def test_config_sets_validated_kernel_defaults(ip, capsys):
    from traitlets import TraitError

    from plansight.magic import get_session
    from plansight.magic.extension import get_options

    ip.run_line_magic("config", "Query.batch_size = 1234")
    assert get_session().get_option("batch_size") == 1234
    ip.run_line_magic("config", "Query.memory_limit = '512MB'")
    assert get_session().get_option("memory_limit") == 512_000_000
    options = get_options()
    with pytest.raises(TraitError, match="memory limit"):
        options.memory_limit = "lots"
    assert get_session().get_option("memory_limit") == 512_000_000  # unchanged
    with pytest.raises(TraitError, match="default_null_order"):
        options.default_null_order = "sideways"
    options.memory_limit = None
    for value in (False, "auto", True):  # a switch with a third setting takes either kind
        options.dynamic_filter_through_joins = value
        assert get_session().get_option("dynamic_filter_through_joins") == value
    with pytest.raises(TraitError, match="dynamic_filter_through_joins"):
        options.dynamic_filter_through_joins = "sometimes"
    options.dynamic_filter_through_joins = "auto"


def test_jupysql_capture_stores_like_out(ip):
    result = query(ip, "--no-monitor", "out << SELECT 41 + 1 AS x")
    assert result.table.to_pylist() == [{"x": 42}]
    assert ip.user_ns["out"].to_pylist() == [{"x": 42}]
    query(ip, "--no-monitor out << SELECT 7 AS y")
    assert ip.user_ns["out"].to_pylist() == [{"y": 7}]
    shifted = query(ip, "--no-monitor", "SELECT 1 << 2 AS z")  # a shift, not a capture
    assert shifted.table.to_pylist() == [{"z": 4}]
    assert ip.user_ns["out"].to_pylist() == [{"y": 7}]


def test_save_and_with_make_a_view(ip, capsys):
    ip.user_ns["pdf"] = pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]})
    query(ip, "--save sums --no-execute --no-monitor",
          "SELECT k, sum(v) AS s FROM pdf GROUP BY k")
    assert "sums" in get_session().tables()
    result = query(ip, "--with sums --no-monitor", "SELECT * FROM sums ORDER BY k")
    assert result.table.to_pylist() == [{"k": "a", "s": 4}, {"k": "b", "s": 2}]
    saved = query(ip, "--save big --no-monitor", "SELECT k FROM sums WHERE s > 3")
    assert saved.table.to_pylist() == [{"k": "a"}]  # --save also runs the query
    result, shown = run_cell(ip, "%%query --with nothing --no-monitor\nSELECT 1", capsys)
    assert result.error_in_exec is not None and "nothing" in shown
    get_session().deregister("sums")
    get_session().deregister("big")


def test_file_option_reads_the_sql(ip, tmp_path, capsys):
    path = tmp_path / "q.sql"
    path.write_text("SELECT 6 * 7 AS answer")
    # a cell magic needs a body (IPython's rule): %query --file is the way to write it
    assert query(ip, f"--file {path} --no-monitor").table.to_pylist() == [{"answer": 42}]
    assert query(ip, f"-f {path} --no-monitor").table.to_pylist() == [{"answer": 42}]
    result, _ = run_cell(ip, f"%query --file {tmp_path}/missing.sql", capsys)
    assert result.error_in_exec is not None


def test_displaylimit_and_auto_dataframes(ip):
    from plansight.magic.extension import get_options

    ip.user_ns["arrow_t"] = pa.table({"x": list(range(100))})
    ip.run_line_magic("config", "Query.displaylimit = 4")
    text = repr(query(ip, "--no-monitor SELECT x FROM arrow_t"))
    assert "showing" not in text and len(text.splitlines()) == 3 + 4 + 2
    html = query(ip, "--no-monitor SELECT x FROM arrow_t")._repr_html_()
    assert "showing first 2 and last 2" in html and html.count("<tr>") == 1 + 4 + 1
    ip.run_line_magic("config", "Query.displaylimit = 0")
    assert query(ip, "--no-monitor SELECT x FROM arrow_t")._repr_html_().count("<tr>") == 101
    ip.run_line_magic("config", "Query.displaylimit = 20")
    ip.run_line_magic("config", "Query.autopandas = True")
    try:
        assert isinstance(query(ip, "--no-monitor -o out SELECT 1 AS x"), pd.DataFrame)
        assert isinstance(ip.user_ns["out"], pd.DataFrame)
        assert isinstance(query(ip, "--polars --no-monitor SELECT 1 AS x"), pl.DataFrame)
    finally:
        get_options().autopandas = False
    ip.run_line_magic("config", "Query.autopolars = True")
    try:
        assert isinstance(query(ip, "--no-monitor SELECT 1 AS x"), pl.DataFrame)
    finally:
        get_options().autopolars = False


def test_plot_shows_a_matplotlib_figure(ip, monkeypatch, capsys):
    from matplotlib.figure import Figure

    from plansight.magic import magic

    shown = []
    monkeypatch.setattr(magic, "_display", shown.append)
    ip.user_ns["arrow_t"] = pa.table({"k": ["a", "b", "c"], "v": [3, 1, 2]})
    query(ip, "--plot bar k v --no-monitor", "SELECT k, v FROM arrow_t")
    query(ip, "--no-monitor --plot hist v SELECT v FROM arrow_t")
    query(ip, "--plot line v k --no-monitor", "SELECT v, k FROM arrow_t ORDER BY v")
    assert len(shown) == 3 and all(isinstance(f, Figure) for f in shown)
    bars = shown[0].axes[0].patches
    assert [round(b.get_height()) for b in bars] == [3, 1, 2]
    assert shown[1].axes[0].get_xlabel() == "v"
    result, text = run_cell(ip, "%%query --plot pie k --no-monitor\nSELECT 1 AS k", capsys)
    assert result.error_in_exec is not None and "bar|line" in text
    result, text = run_cell(ip, "%%query --plot bar k nope --no-monitor\nSELECT 1 AS k", capsys)
    assert result.error_in_exec is not None and "'nope'" in text


def test_plot_imports_matplotlib_lazily():
    import subprocess
    import sys

    code = ("import sys, plansight, plansight.magic.magic, plansight.magic.plot; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False)
    assert out.stdout.strip() == "False", out.stderr


def test_show_tables_lists_notebook_dataframes(ip):
    ip.user_ns["pdf"] = pd.DataFrame({"k": ["a"]})
    ip.user_ns["arrow_t"] = pa.table({"x": [1]})
    get_session().register("registered", pa.table({"y": [2]}))
    names = query(ip, "--no-monitor SHOW TABLES").table.column("name").to_pylist()
    assert {"pdf", "arrow_t", "registered"} <= set(names)
    get_session().deregister("registered")
