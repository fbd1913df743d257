"""%%query cells in a real kernel through nbclient: a failing cell fails the run, as in
JupyterLab's Run All, papermill and nbval; the error shows without a Python traceback."""

from __future__ import annotations

import nbclient
import nbformat
import pytest
from nbclient.exceptions import CellExecutionError


def notebook(*sources: str, tags: dict[int, list[str]] | None = None):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    for index, cell_tags in (tags or {}).items():
        nb.cells[index].metadata["tags"] = cell_tags
    return nb


def run(nb, tmp_path, allow_errors: bool = False):
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     allow_errors=allow_errors,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    return nb


def outputs_text(cell) -> str:
    parts = []
    for output in cell.outputs:
        if output.output_type == "error":
            parts += [output.ename, output.evalue, *output.traceback]
        else:
            parts.append(output.get("text", "") or str(output.get("data", "")))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("kernel")


def test_a_failing_cell_stops_the_run(kernel_dir):
    nb = notebook("%load_ext plansight",
                  "%%query -o out --no-monitor\nSELECT 1 AS x",
                  "%%query -o out --no-monitor\nSELECT x FROM\nWHERE",
                  "print('still running')")
    with pytest.raises(CellExecutionError) as info:
        run(nb, kernel_dir)
    assert "SqlSyntaxError" in str(info.value)
    failed = nb.cells[2]
    (error,) = [o for o in failed.outputs if o.output_type == "error"]
    assert error.ename == "SqlSyntaxError"
    shown = "\n".join(error.traceback)
    assert "^" in shown and "Traceback" not in shown and ".py" not in shown
    assert not nb.cells[3].get("outputs")  # never ran


def test_out_is_not_stale_and_the_kernel_carries_on(kernel_dir):
    nb = notebook("%load_ext plansight",
                  "%%query -o out --no-monitor\nSELECT 1 AS x",
                  "%%query -o out --no-monitor\nSELECT y FROM no_such_table",
                  "print('out' in globals())",
                  "%%query --no-monitor\nSELECT 2 AS x",
                  tags={2: ["raises-exception"]})
    run(nb, kernel_dir, allow_errors=True)
    (error,) = [o for o in nb.cells[2].outputs if o.output_type == "error"]
    assert error.ename == "PlanError" and "no_such_table" in error.evalue
    assert outputs_text(nb.cells[3]).strip() == "False"
    assert "2" in outputs_text(nb.cells[4])
