"""``%%query --profile`` / ``--trace`` through a real IPython shell."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from IPython import get_ipython
from IPython.testing.globalipapp import start_ipython
from IPython.utils.capture import capture_output

import plansight as ps
from plansight.magic import QueryResult, set_session
from plansight.profiling import Profile


@pytest.fixture
def ip():
    start_ipython()
    shell = get_ipython()
    if "query" not in shell.magics_manager.magics["cell"]:
        shell.run_line_magic("load_ext", "plansight")
    session = ps.Session(target_partitions=2)
    session.register("t", pa.Table.from_batches(
        pa.table({"k": [i % 7 for i in range(5000)], "v": list(range(5000))}).to_batches(500)))
    set_session(session)
    return shell


SQL = "SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY k"


@pytest.mark.parametrize("monitor", ["--no-monitor", ""])
def test_profile_shows_plots_and_keeps_profile(ip, monitor):
    with capture_output() as captured:
        result = ip.run_cell_magic("query", f"--profile {monitor}", SQL)
    assert isinstance(result, QueryResult) and result.num_rows == 7
    assert isinstance(result.profile, Profile)
    assert result.profile.run.result.num_rows == 7
    assert result.profile.samples and result.profile.timeline.spans
    # the profile is displayed: text in a terminal shell, SVG plots in a notebook
    shown = captured.stdout + "".join(o.data.get("text/plain", "") for o in captured.outputs)
    assert "profile:" in shown
    assert "plansight-gantt" in result.profile._repr_html_()


def test_trace_writes_chrome_json(ip, tmp_path):
    path = tmp_path / "run.json"
    with capture_output() as captured:
        result = ip.run_line_magic("query", f"--no-monitor --trace {path} {SQL}")
    assert result.profile is not None
    assert f"trace written to {path}" in captured.stdout
    trace = json.loads(path.read_text())
    assert any(e["ph"] == "X" for e in trace["traceEvents"])


def test_trace_to_a_bad_path_is_a_short_error(ip, tmp_path):
    with capture_output() as captured:
        result = ip.run_cell_magic("query", f"--no-monitor --trace {tmp_path}/missing/x.json",
                                   SQL)
    assert "could not write the trace" in captured.stderr
    assert result.num_rows == 7  # the query itself succeeded


def test_without_profile_no_profile(ip):
    result = ip.run_cell_magic("query", "--no-monitor", SQL)
    assert result.profile is None
