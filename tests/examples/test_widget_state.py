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


def monitor_rows(html: str) -> list[tuple[str, int]]:
    return [(unescape(label), int(rows.replace(",", "")))
            for label, _, _, rows in MONITOR_ROW.findall(html)]


def analyze_rows(text: str) -> list[tuple[str, int]]:
    return [(label, int(rows)) for _, label, rows in ANALYZE_LINE.findall(text)]


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


def test_monitor_row_counts_equal_explain_analyze(tour):
    (cell,) = [cell for cell in query_cells(tour) if "--analyze" in cell.source.splitlines()[0]]
    printed = "".join(o.text for o in cell.outputs if o.output_type == "stream"
                      and o.name == "stdout")
    expected = analyze_rows(printed)
    assert expected and monitor_rows(monitor_html(cell)) == expected


def test_monitor_row_counts_equal_a_fresh_run(tour):
    """Each operator's final row count in the saved snapshot is what the engine reports."""
    (cell,) = [cell for cell in query_cells(tour) if "count_order" in cell.source]
    options, _ = split_options(cell.source.splitlines()[0][len("%%query"):])
    assert "--partitions" not in options  # the kernel's session default: one per CPU
    sql = cell.source.split("\n", 1)[1]
    session = ps.Session(target_partitions=os.cpu_count())
    load_sample(session, "tpch", 0.01)
    run = session.sql(sql).execute()
    assert monitor_rows(monitor_html(cell)) == analyze_rows(run.explain_analyze())
