"""The tour notebook in a real JupyterLab, driven in headless Chromium (opt-in: -m browser).

JupyterLab is served on 127.0.0.1 with a random token from a temporary root folder (its
own config, settings, workspaces and runtime folders, so the user's are never touched).
Debian's ``chromium`` runs headless under Playwright. The test runs all cells, takes a
screenshot while the monitor widget updates live and one at the end, and checks that the
monitor and the result tables rendered. A second notebook starts an endless query and
clicks the monitor's Cancel button while the cell is busy (JupyterLab sends widget messages
on a kernel subshell). Screenshots land in ``PLANSIGHT_SCREENSHOTS`` if
set, else in the test's temporary folder (printed at the end).

    pip install -e '.[test,browser]' && apt-get install chromium
    pytest -m browser tests/browser -s
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("PLANSIGHT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MONITOR = ".plansight-monitor"
RESULT = ".plansight-result"
# the live monitor is an ipywidgets HTML view; the final snapshot is plain output HTML
LIVE_MONITOR = f".widget-html {MONITOR}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_server(url: str, process: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"jupyter lab did not answer at {url}")


def _widget_data_path() -> str:
    """JUPYTER_PATH with the data folder of the environment that holds jupyterlab_widgets.

    A virtualenv that borrows another environment's packages (system site packages, a .pth)
    has their Python modules but not their ``share/jupyter/labextensions``: without this the
    widget front end is missing and every widget shows as text.
    """
    paths = [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    try:
        import jupyterlab_widgets
    except ImportError:
        return os.pathsep.join(paths)
    # <prefix>/lib/pythonX.Y/site-packages/jupyterlab_widgets/__init__.py -> <prefix>/share
    data = Path(jupyterlab_widgets.__file__).resolve().parents[4] / "share" / "jupyter"
    if data.is_dir() and str(data) not in paths:
        paths.append(str(data))
    return os.pathsep.join(paths)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 serving a temporary copy of the examples."""
    pytest.importorskip("jupyterlab")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    shutil.copy(EXAMPLES / "01_tour.ipynb", root / "01_tour.ipynb")
    _write_cancel_notebook(root / "cancel.ipynb")
    _write_monitor_notebook(root / "monitor.ipynb")
    settings = base / "settings" / "@jupyterlab"
    (settings / "apputils-extension").mkdir(parents=True)
    (settings / "notebook-extension").mkdir(parents=True)
    # no "receive Jupyter news?" toast over the notebook
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    # every cell in the DOM (no virtual scrolling), so the test can see all outputs
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"}))
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_PATH=_widget_data_path(),
               JUPYTER_CONFIG_DIR=str(base / "config"),
               JUPYTER_RUNTIME_DIR=str(base / "runtime"), JUPYTERLAB_SETTINGS_DIR=str(
                   base / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"))
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
               f"--LabApp.user_settings_dir={base / 'settings'}",
               f"--LabApp.workspaces_dir={base / 'workspaces'}",
               "--ServerApp.terminals_enabled=False", "--LabApp.extension_manager=readonly"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI containers run as root
        command.append("--allow-root")
    log = open(base / "jupyter.log", "w")  # noqa: SIM115 -- closed after the server stops
    process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(f"{url}/api/status?token={token}", process)
        yield {"url": url, "token": token, "root": root, "log": base / "jupyter.log"}
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory):
    folder = os.environ.get("PLANSIGHT_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    yield path
    print(f"\nscreenshots: {path}")


def test_tour_runs_in_jupyterlab(lab, screenshots):
    with _chromium_page(screenshots, "failure.png", 1400, 1000) as page:
        page.goto(f"{lab['url']}/lab/tree/01_tour.ipynb?token={lab['token']}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", state="visible")
        _accept_kernel_dialog(page)
        _wait_idle(page)
        page.screenshot(path=str(screenshots / "01_opened.png"))

        _run_all_cells(page)
        # mid-run: the live widget of the tour's longer query, caught while it updates
        # the widget is created showing "pending"; "running" can only come from an update
        # sent while the query ran
        updates = _watch_live_monitor(page, screenshots / "02_mid_run.png")
        assert updates, "the live monitor never showed a running query"

        _wait_all_executed(page)
        _wait_idle(page)
        page.screenshot(path=str(screenshots / "03_end_last_cell.png"))
        page.locator(".jp-Cell").first.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots / "04_end_top.png"))
        # each query cell at the end: its monitor snapshot and its result
        page.set_viewport_size({"width": 1400, "height": 2400})  # tall cells fit whole
        cells = page.locator(".jp-CodeCell").filter(has=page.locator(MONITOR))
        for i in range(cells.count()):
            cells.nth(i).screenshot(path=str(screenshots / f"05_cell_{i + 1}.png"))

        monitors = page.locator(MONITOR)
        results = page.locator(RESULT)
        # every %%query cell with a monitor ends with a finished snapshot: open, or
        # (a query under half a second) folded into its one-line summary
        assert monitors.count() >= 5
        folded = page.locator("details.plansight-collapsed > summary")
        shown = page.locator(f"{MONITOR}:visible")
        assert folded.count() + shown.count() == monitors.count()
        for views in (folded, shown):
            for i in range(views.count()):
                assert "finished" in views.nth(i).inner_text()
        # results render as tables with their row count line
        assert results.count() >= 4
        assert page.locator(".dataframe").count() >= 1  # the --pandas result
        first = results.first.inner_text()
        assert "n_name" in first and "25 rows" in first
        assert "ALGERIA" in first
        # the deliberate syntax error is a short message, not a traceback
        errors = page.locator(".jp-OutputArea-output[data-mime-type="
                              "'application/vnd.jupyter.stderr']")
        assert errors.count() >= 1
        assert page.locator(".jp-OutputArea-output .ansi-red-fg").count() >= 1 or \
            "Traceback" not in errors.first.inner_text()
        # no output area shows a Python traceback
        assert page.locator("text=Traceback (most recent call last)").count() == 0


CANCEL_SETUP = """\
import time
import pyarrow as pa
import plansight as ps
from plansight.engine.catalog import ScanUnit, TableSource
from plansight.magic import set_session

class Endless(TableSource):
    # batches for about ten minutes: the query runs until it is cancelled
    def __init__(self):
        self.schema = pa.schema([("x", pa.int64())])
    def units(self, partitions=1):
        return [ScanUnit(rows=10**9)]
    def read(self, unit, columns, batch_size):
        batch = pa.record_batch([pa.array(range(10), pa.int64())], schema=self.schema)
        for _ in range(600_000):
            time.sleep(0.001)
            yield batch

session = ps.Session(target_partitions=1)
session.register("endless", Endless())
set_session(session)
%load_ext plansight"""


def _write_cancel_notebook(path: Path) -> None:
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(CANCEL_SETUP),
                      nbformat.v4.new_code_cell("%%query\nSELECT count(*) AS n FROM endless"),
                      nbformat.v4.new_code_cell("%%query --no-monitor\nSELECT 41 + 1 AS answer")]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, path)


def test_cancel_button_stops_a_running_query(lab, screenshots):
    """JupyterLab >= 4.4 sends widget clicks on a kernel subshell: the Cancel button works
    while the cell is busy, the cell ends cancelled (Run All stops there, as on an
    interrupt) and the next cell runs when asked."""
    with _chromium_page(screenshots, "cancel_failure.png", 1400, 1000) as page:
        _open_and_run_all(page, lab, "cancel")
        button = page.locator(".plansight-cancel")
        button.wait_for(state="visible", timeout=120_000)
        page.locator(f"{LIVE_MONITOR}", has_text="running").first.wait_for()
        page.screenshot(path=str(screenshots / "10_cancel_button.png"))
        button.click()
        cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell")
        cells.nth(1).locator("text=query cancelled").first.wait_for(timeout=60_000)
        _wait_idle(page)
        page.screenshot(path=str(screenshots / "11_cancelled.png"))
        assert cells.count() == 3
        query_cell = cells.nth(1)
        assert "query cancelled" in query_cell.inner_text()
        assert "cancelled" in query_cell.locator(MONITOR).first.inner_text()
        # a cancelled cell fails, so Run All stops there (as an interrupt does) ...
        assert cells.nth(2).locator(".jp-InputArea-prompt").inner_text().strip() == "[ ]:"
        # ... and the kernel runs the next cell when asked
        cells.nth(2).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Control+Enter")  # run in place: no new cell below
        _wait_all_executed(page)
        _wait_idle(page)
        assert "42" in cells.nth(2).inner_text()
        assert page.locator("text=Traceback (most recent call last)").count() == 0


MONITOR_SETUP = """\
import time
import numpy as np
import pyarrow as pa
import plansight as ps
from plansight.engine.catalog import ScanUnit, TableSource
from plansight.magic import set_session

class Slow(TableSource):
    # a table read slowly (a pause a batch), so that the monitor can be watched mid-run
    def __init__(self, table, pause):
        self.table, self.pause, self.schema = table, pause, table.schema
    def num_rows(self):
        return self.table.num_rows
    def units(self, partitions=1):
        step = -(-self.table.num_rows // partitions)
        return [ScanUnit(offset=o, rows=min(step, self.table.num_rows - o))
                for o in range(0, self.table.num_rows, step)]
    def read(self, unit, columns, batch_size):
        piece = self.table.slice(unit.offset, unit.rows).select(columns)
        for batch in piece.to_batches(max_chunksize=2000):
            time.sleep(self.pause)
            yield batch

rng = np.random.default_rng(7)
n = 600_000
big = pa.table({"k": rng.integers(0, 10**9, n),
                "payload": pa.array([f"row-{i:012d}" for i in range(n)])})
keys = np.where(rng.random(200_000) < 0.9, 0, rng.integers(1, 1000, 200_000))
hot = pa.table({"k": keys, "v": rng.integers(0, 10**6, 200_000)})
session = ps.Session(target_partitions=4)
session.register("big", Slow(big, 0.06))
session.register("hot", Slow(hot, 0.06))
set_session(session)
%load_ext plansight"""

MONITOR_CELLS = [
    MONITOR_SETUP,
    "%%query\nSELECT 1 AS quick",
    "%%query --memory-limit 8MB\nSELECT k, payload FROM big ORDER BY payload DESC",
    "%%query\nSELECT k, count(DISTINCT v) AS d FROM hot GROUP BY k ORDER BY d DESC, k LIMIT 3",
    "ps.history()",
]


# the facts of a live monitor of a running query with a spill feed, or null
LIVE_SPILLING_SORT = """() => {
  for (const m of document.querySelectorAll('.widget-html .plansight-monitor')) {
    const head = m.querySelector('div').innerText;
    if (!head.includes('running') || !m.querySelector('.plansight-spill-feed')) continue;
    const bar = m.querySelector('.plansight-progress-bar');
    return {head: head,
            feed: m.querySelectorAll('.plansight-spill-feed tbody tr').length,
            bars: m.querySelectorAll('.plansight-self-bar').length,
            hot: m.querySelectorAll('.plansight-hot').length,
            memory: [...m.querySelectorAll('.plansight-memory')].map(e => e.innerText)
                      .filter(t => t.trim()),
            nodes: m.querySelectorAll('svg.plansight-graph .plansight-node').length,
            progress: bar ? parseFloat(bar.style.width) : 100};
  }
  return null;
}"""


def _write_monitor_notebook(path: Path) -> None:
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in MONITOR_CELLS]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, path)


def test_monitor_shows_where_time_and_memory_go(lab, screenshots):
    """Mid-run, in the live widget: self-time bars with the hot operator marked, memory per
    operator under the limit, spill-feed rows while a sort spills, progress below 100%
    while it works, the plan graph; skew bars while the repartition still routes. At the
    end: a short query folded into one line, and the history listing the queries."""
    with _chromium_page(screenshots, "monitor_failure.png", 1600, 1400) as page:
        _open_and_run_all(page, lab, "monitor")

        # the spilling sort, live: read in one step in the page, since the live view
        # is replaced by the frozen one at any moment
        facts = page.wait_for_function(LIVE_SPILLING_SORT, timeout=180_000).json_value()
        try:  # README's image: the live monitor alone
            page.locator(LIVE_MONITOR).filter(has_text="running").first.screenshot(
                path=str(screenshots / "monitor_mid_run.png"), timeout=5_000)
        except Exception:  # noqa: BLE001 -- finished meanwhile: the page screenshot below remains
            pass
        page.screenshot(path=str(screenshots / "20_spilling_sort_live.png"))
        assert facts["feed"] >= 1, facts  # spill-feed rows while the sort runs
        assert facts["bars"] >= 3 and facts["hot"] == 1, facts
        assert "/ 7.6 MiB" in facts["head"], facts  # pool / limit
        assert facts["memory"], facts  # some operator shows memory now / peak
        assert facts["nodes"] >= 3, facts  # the plan graph
        assert facts["progress"] < 100, facts  # below 100% while the sort works

        # the hot-key aggregate: skew bars while the repartition still routes
        page.wait_for_function(
            "() => !!document.querySelector('.widget-html .plansight-skew-live')",
            timeout=180_000)
        page.screenshot(path=str(screenshots / "21_skew_live.png"))

        _wait_all_executed(page, timeout=300)
        _wait_idle(page)
        cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell")
        quick = cells.nth(1).locator("details.plansight-collapsed")
        assert quick.count() == 1 and "finished" in quick.locator("summary").inner_text()
        assert cells.nth(1).locator("table").first.is_visible() is False  # folded
        quick.locator("summary").click()
        assert cells.nth(1).locator("svg.plansight-graph").first.is_visible()
        sort_cell = cells.nth(2)
        assert sort_cell.locator("details.plansight-collapsed").count() == 0
        assert "spills" in sort_cell.locator(MONITOR).first.inner_text()
        assert sort_cell.locator(".plansight-spilled").count() >= 1
        assert cells.nth(3).locator(".plansight-skewed").count() >= 1
        listing = cells.nth(4).locator(".plansight-history")
        assert listing.locator("details.plansight-history-row").count() >= 3
        cells.nth(2).scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots / "22_monitor_end.png"))
        assert page.locator("text=Traceback (most recent call last)").count() == 0


@contextlib.contextmanager
def _chromium_page(screenshots: Path, failure: str, width: int, height: int):
    """A page in headless Debian chromium (never a downloaded browser); on a failure, a
    full-page screenshot named ``failure`` before the error propagates."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(60_000)
            try:
                yield page
            except Exception:
                page.screenshot(path=str(screenshots / failure), full_page=True)
                raise
        finally:
            browser.close()


def _open_and_run_all(page, lab, name: str) -> None:
    """Open ``name``.ipynb in a workspace of its own (another test's tabs and cells are not
    restored there), wait for its kernel, and run all cells."""
    page.set_default_timeout(60_000)
    page.goto(f"{lab['url']}/lab/workspaces/{name}/tree/{name}.ipynb?token={lab['token']}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", state="visible")
    _accept_kernel_dialog(page)
    _wait_idle(page)
    _run_all_cells(page)


def _accept_kernel_dialog(page, timeout: float = 10) -> None:
    """JupyterLab may ask which kernel to start; take the preselected Python 3 kernel."""
    dialog = page.locator(".jp-Dialog", has_text="Select Kernel")
    try:
        dialog.wait_for(state="visible", timeout=timeout * 1000)
    except Exception:  # noqa: BLE001 -- no dialog: the kernel started on its own
        return
    dialog.locator("button", has_text="Select").click()
    dialog.wait_for(state="hidden")


def _watch_live_monitor(page, screenshot: Path, timeout: float = 180) -> list[str]:
    """Poll for a live (widget) monitor that says "running"; screenshot it the first time.

    Returns the distinct headlines seen while running (each one a live update: the widget
    starts as "pending", and the final update says "finished").
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    live = page.locator(LIVE_MONITOR).filter(has_text="running")
    headlines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if live.count():
            try:
                headline = live.first.locator("div").first.inner_text(timeout=1000)
            except (PlaywrightTimeout, PlaywrightError):  # replaced by the final snapshot
                continue
            if not headlines:
                try:
                    live.first.scroll_into_view_if_needed(timeout=1000)
                except PlaywrightError:  # just replaced by the final snapshot: shoot anyway
                    pass
                page.screenshot(path=str(screenshot))
            if "running" in headline and headline not in headlines:
                headlines.append(headline)
        elif headlines:
            break  # the query finished: its monitor became a static snapshot
        time.sleep(0.05)
    return headlines


def _run_all_cells(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def _wait_idle(page, timeout: float = 120) -> None:
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                           state="attached", timeout=timeout * 1000)


def _wait_all_executed(page, timeout: float = 180) -> None:
    """Every code cell shows an execution count (not ``[*]`` nor blank)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        prompts = page.locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
        if prompts and all(p.strip().startswith("[") and p.strip()[1:-2].strip().isdigit()
                           for p in prompts):
            return
        time.sleep(0.5)
    raise TimeoutError(f"cells still running or not run: {prompts}")
