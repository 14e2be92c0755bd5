"""Every notebook under docs/notebooks/ runs from top to bottom and draws a figure.

The notebooks are jupytext percent-format ``.py`` files. The site build executes each
one in a fresh ``python3`` kernel (mkdocs-jupyter, ``execute: true`` and
``allow_errors: false``, so any error fails the build that ``built_site`` checks);
these tests read the executed pages of that one build instead of running the
notebooks a second time.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest
from support import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "docs" / "notebooks").glob("*.py"))
PNG = re.compile(r'<img[^>]*src="data:image/png;base64,')
CODE_CELL = 'class="jp-Cell jp-CodeCell'


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 3, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executed_without_errors_and_drew_figures(path: Path, built_site: Path) -> None:
    html = (built_site / "notebooks" / f"{path.stem}.html").read_text(encoding="utf-8")
    code_cells = [cell for cell in jupytext.read(path).cells if cell.cell_type == "code"]
    assert code_cells, f"{path.name} has no code cells"
    assert html.count(CODE_CELL) >= len(code_cells), f"{path.name}: cells missing"
    assert PNG.search(html), f"{path.name} draws no figure"


def test_notebooks_start_with_a_title() -> None:
    for path in NOTEBOOKS:
        first = jupytext.read(path).cells[0]
        assert first.cell_type == "markdown", path.name
        assert first.source.startswith("# "), path.name
