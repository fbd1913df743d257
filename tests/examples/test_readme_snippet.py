"""The README's notebook snippet, run as written through nbclient: the fenced block after
"Notebook:" becomes cells (a new cell at each line starting with %%), after %load_ext."""

from __future__ import annotations

import re
from pathlib import Path

import nbclient
import nbformat

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def readme_snippet() -> str:
    after = README.split("Notebook:", 1)[1]
    return re.search(r"```[a-z]*\n(.*?)```", after, re.S).group(1)


def cells(snippet: str) -> list[str]:
    """Notebook cells: a cell magic starts a cell and takes the lines after it; other lines
    (line magics, Python) make cells of their own."""
    out: list[str] = []
    for line in snippet.strip().splitlines():
        if line.startswith("%%") or not out or not out[-1].startswith("%%"):
            if line.strip():
                out.append(line)
        else:
            out[-1] += "\n" + line
    return [cell for cell in out if cell.strip()]


def run(sources: list[str], folder) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}}).execute()
    return notebook


def check(notebook) -> None:
    result_cells = [c for c in notebook.cells if "-o result" in c.source]
    assert result_cells
    (output,) = [o for o in result_cells[-1].outputs if o.output_type == "execute_result"]
    assert "5 rows" in output.data["text/plain"] or "(5 rows)" in output.data["text/plain"]


def test_the_readme_snippet_runs_as_written(tmp_path):
    sources = cells(readme_snippet())
    if not any("load_ext" in source for source in sources):
        sources.insert(0, "%load_ext plansight")  # the README says it in the sentence above
    check(run(sources, tmp_path))
