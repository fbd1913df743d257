"""The Cancel button against a real ipykernel, with this test as the front end.

The test speaks the Jupyter protocol the way JupyterLab >= 4.4 does for widgets: it opens a
kernel subshell on the control channel and sends the button's click as a ``comm_msg`` on that
subshell, while the ``%%query`` cell keeps the main shell busy. The cell must end cancelled
and the next cell must work. Without a subshell (older front ends) no button is shown, the
monitor says to interrupt the kernel, and the interrupt cancels the query.
"""

from __future__ import annotations

import queue
import time

import pytest

jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")

SETUP = '''
import threading
import pyarrow as pa
import plansight as ps
from plansight.engine.catalog import ScanUnit, TableSource
from plansight.magic import set_session

class Endless(TableSource):
    """Batches until the query is cancelled (bounded, so a broken cancel cannot hang)."""
    def __init__(self):
        self.schema = pa.schema([("x", pa.int64())])
    def units(self, partitions=1):
        return [ScanUnit(rows=10**9)]
    def read(self, unit, columns, batch_size):
        batch = pa.record_batch([pa.array(range(10), pa.int64())], schema=self.schema)
        for _ in range(60_000):
            time.sleep(0.001)
            yield batch

import time
session = ps.Session(target_partitions=1)
session.register("endless", Endless())
set_session(session)
%load_ext plansight
'''
QUERY = "%%query\nSELECT count(*) AS n FROM endless"


@pytest.fixture
def kernel():
    manager, client = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        reply = client.execute(SETUP, reply=True, timeout=120)
        assert reply["content"]["status"] == "ok", reply["content"]
        client.manager = manager
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def create_subshell(client) -> str:
    request = client.session.msg("create_subshell_request", {})
    client.control_channel.send(request)
    while True:
        reply = client.control_channel.get_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
            return reply["content"]["subshell_id"]


def watch_cell(client, cell_id: str, on_message, timeout: float = 120) -> dict:
    """Read iopub until the cell is idle; ``on_message`` sees every message meanwhile.
    A cell's error (a cancelled query fails its cell) is shown as IPython renders it."""
    outputs = {"stderr": "", "stdout": "", "html": [], "error": ""}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            message = client.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        on_message(message)
        if message["parent_header"].get("msg_id") != cell_id:
            continue
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            outputs[content["name"]] += content["text"]
        elif kind == "error":
            outputs["error"] += "\n".join([content["ename"], *content["traceback"]])
        elif kind in ("display_data", "update_display_data", "execute_result"):
            outputs["html"].append(content.get("data", {}).get("text/html", ""))
        elif kind == "status" and content["execution_state"] == "idle":
            return outputs
    raise TimeoutError("the cell did not end")


def test_click_on_a_subshell_cancels_the_busy_cell(kernel):
    subshell = create_subshell(kernel)  # what JupyterLab does for the widget comm target
    cell_id = kernel.execute(QUERY)
    state = {"button": None, "layout": None, "shown": False, "clicked": False}

    def on_message(message):
        kind, content = message["msg_type"], message["content"]
        if kind == "comm_open" and content["data"].get("state", {}).get(
                "_model_name") == "ButtonModel":
            state["button"] = content["comm_id"]
            state["layout"] = content["data"]["state"]["layout"].removeprefix("IPY_MODEL_")
        elif kind == "comm_msg" and content["comm_id"] == state["layout"] and \
                content["data"].get("state", {}).get("display", "none") is None:
            state["shown"] = True
        if state["shown"] and not state["clicked"]:
            click = kernel.session.msg("comm_msg", {
                "comm_id": state["button"],
                "data": {"method": "custom", "content": {"event": "click"}}})
            click["header"]["subshell_id"] = subshell
            kernel.shell_channel.send(click)
            state["clicked"] = True

    outputs = watch_cell(kernel, cell_id, on_message)
    assert state["clicked"], "the Cancel button was never shown"
    assert "Cancelled" in outputs["error"] and "query cancelled" in outputs["error"]
    final = outputs["html"][-1]
    assert "plansight-monitor" in final and "cancelled" in final
    reply = kernel.execute("%%query --no-monitor\nSELECT 41 + 1 AS x", reply=True, timeout=60)
    assert reply["content"]["status"] == "ok"


def test_without_a_subshell_the_monitor_says_interrupt(kernel):
    cell_id = kernel.execute(QUERY)
    state = {"shown": False, "hint": False, "interrupted": False}

    def on_message(message):
        content = message["content"]
        if message["msg_type"] != "comm_msg":
            return
        data_state = content["data"].get("state", {})
        if "display" in data_state and data_state["display"] is None:
            state["shown"] = True
        if "running" in data_state.get("value", "") and \
                "interrupt the kernel" in data_state["value"] and not state["interrupted"]:
            state["hint"] = state["interrupted"] = True
            kernel.manager.interrupt_kernel()

    outputs = watch_cell(kernel, cell_id, on_message)
    assert state["hint"] and not state["shown"]
    assert "query cancelled" in outputs["error"] and "Traceback" not in outputs["error"]
    assert "cancelled" in outputs["html"][-1]
    reply = kernel.execute("%%query --no-monitor\nSELECT 41 + 1 AS x", reply=True, timeout=60)
    assert reply["content"]["status"] == "ok"
