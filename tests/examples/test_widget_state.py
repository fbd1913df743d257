"""The tour notebook executed by nbclient: the monitor's saved widget state and final HTML.

nbclient records the ipywidgets state into the notebook's metadata (as JupyterLab's "save
widget state" does) and applies ``update_display_data``, so the executed notebook holds what
a reader sees without a kernel: the final monitor snapshot of every query cell.
"""

from __future__ import annotations

import os
import re
import shutil
from html import unescape
from pathlib import Path

import nbclient
import nbformat
import pytest

import plansight as ps
from plansight.datasets import load_sample
from plansight.magic.magic import split_options

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# one row of the monitor's plan table: the full operator label, then partitions, output rows
MONITOR_ROW = re.compile(r"<tr[^>]*><td[^>]*title='([^']*)'><code[^>]*>.*?</code>[^<]*</td>"
                         r"<td[^>]*>(\d+)/(\d+)</td><td[^>]*>([\d,]+)</td>")
ANALYZE_LINE = re.compile(r"^( *)(.*), metrics=\[output_rows=(\d+),", re.MULTILINE)


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tour")
    path = folder / "01_tour.ipynb"
    shutil.copy(EXAMPLES / "01_tour.ipynb", path)
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    client.execute()
    return notebook


def monitor_html(cell) -> str | None:
    """The monitor's final HTML snapshot in a cell's outputs, if the cell ran a monitor."""
    for output in cell.get("outputs", []):
        html = output.get("data", {}).get("text/html", "")
        if "plansight-monitor" in html:
            return html
    return None


# what differs between two runs of one query: the planner's estimate and operator ids
RUN_SPECIFIC = re.compile(r"[,:] rows≈\d+(?:,\d{3})*|, id=\d+|(?<=HashJoin)\[\d+\]")


def monitor_rows(html: str) -> list[tuple[str, int]]:
    return [(RUN_SPECIFIC.sub("", unescape(label)), int(rows.replace(",", "")))
            for label, _, _, rows in MONITOR_ROW.findall(html)]


def analyze_rows(text: str) -> list[tuple[str, int]]:
    return [(RUN_SPECIFIC.sub("", label), int(rows))
            for _, label, rows in ANALYZE_LINE.findall(text)]


def fresh_run_rows(cell) -> list[tuple[str, int]]:
    """(operator, output rows) of the cell's query run again on the tutorial's data, with
    the cell's --partitions (else one per CPU, the kernel session's default)."""
    options, _ = split_options(cell.source.splitlines()[0][len("%%query"):])
    partitions = re.search(r"--partitions (\d+)", options)
    session = ps.Session(target_partitions=int(partitions.group(1)) if partitions
                         else os.cpu_count())
    load_sample(session, "tpch", 0.01)
    return analyze_rows(session.sql(cell.source.split("\n", 1)[1]).execute().explain_analyze())


def query_cells(notebook):
    return [cell for cell in notebook.cells
            if cell.cell_type == "code" and cell.source.startswith("%%query")]


def test_every_monitored_cell_keeps_a_final_snapshot(tour):
    monitored = [cell for cell in query_cells(tour) if monitor_html(cell)]
    assert len(monitored) >= 4
    for cell in monitored:
        html = monitor_html(cell)
        assert "finished" in html and "running" not in html
        assert monitor_rows(html), cell.source
        # the result table follows the monitor (a pandas DataFrame with --pandas)
        (result,) = [o for o in cell.outputs if o.output_type == "execute_result"]
        assert re.search(r"class='plansight-result'|class=\"dataframe\"", result.data["text/html"])


def test_saved_widget_state_holds_the_final_snapshots(tour):
    state = tour.metadata["widgets"][WIDGET_STATE]["state"]
    values = [model["state"]["value"] for model in state.values()
              if model["model_name"] == "HTMLModel"
              and "plansight-monitor" in model["state"].get("value", "")]
    snapshots = [monitor_html(cell) for cell in query_cells(tour) if monitor_html(cell)]
    assert len(values) == len(snapshots)
    # the widget's last value is the static snapshot left in the output (same rows, finished)
    assert sorted(map(monitor_rows, values)) == sorted(map(monitor_rows, snapshots))
    assert all("finished" in value for value in values)


def test_analyze_shows_the_plan_once_with_every_metric(tour):
    """--analyze: the monitor keeps the metrics column and no EXPLAIN ANALYZE text is
    printed again; its row counts are what the engine reports."""
    (cell,) = [cell for cell in query_cells(tour) if "--analyze" in cell.source.splitlines()[0]]
    printed = "".join(o.text for o in cell.outputs if o.output_type == "stream"
                      and o.name == "stdout")
    assert "metrics=[" not in printed
    html = monitor_html(cell)
    assert "class='plansight-metrics'" in html and "elapsed_compute" not in html
    expected = fresh_run_rows(cell)
    assert expected and monitor_rows(html) == expected


def test_monitor_row_counts_equal_a_fresh_run(tour):
    """Each operator's final row count in the saved snapshot is what the engine reports."""
    (cell,) = [cell for cell in query_cells(tour) if "count_order" in cell.source]
    assert monitor_rows(monitor_html(cell)) == fresh_run_rows(cell)
