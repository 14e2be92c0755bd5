"""Every notebook under docs/notebooks/ runs from top to bottom without an error.

The notebooks are jupytext percent-format ``.py`` files; each is converted to a
notebook and executed in a fresh ``python3`` kernel (ipykernel, this environment),
as mkdocs-jupyter does at build time with ``allow_errors: false``.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO_ROOT / "docs" / "notebooks").glob("*.py"))


def execute(notebook: nbformat.NotebookNode, cwd: Path) -> nbformat.NotebookNode:
    """Run every cell in a fresh python3 kernel; raise CellExecutionError on the first error."""
    client = NotebookClient(
        notebook, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(cwd)}}
    )
    return client.execute()


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 3, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_without_errors_and_draws_figures(path: Path) -> None:
    notebook = execute(jupytext.read(path), path.parent)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells, f"{path.name} has no code cells"
    outputs = [output for cell in code_cells for output in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, f"{path.name} draws no figure"


def test_notebooks_start_with_a_title() -> None:
    for path in NOTEBOOKS:
        first = jupytext.read(path).cells[0]
        assert first.cell_type == "markdown", path.name
        assert first.source.startswith("# "), path.name
