"""Each chapter converts to a notebook that runs from top to bottom.

The conversion lives in ``hooks/chapter_notebooks.py`` (the MkDocs hook that
publishes ``<chapter>.ipynb`` next to every chapter page); it is tested here on
synthetic Markdown, then on every chapter, whose notebook is executed in a fresh
``python3`` kernel. Executing them also proves each code block works without the
test harness around it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import nbformat
import pytest
from nbclient import NotebookClient

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"


def _load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "chapter_notebooks", REPO_ROOT / "hooks" / "chapter_notebooks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("chapter_notebooks", module)
    spec.loader.exec_module(module)
    return module


hook = _load_hook()
CHAPTERS = sorted(
    path for path in DOCS.rglob("*.md") if hook.is_chapter(path.relative_to(DOCS).as_posix())
)


def convert(markdown: str) -> nbformat.NotebookNode:
    notebook = hook.markdown_to_notebook(markdown, "Title")
    nbformat.validate(notebook)
    return notebook


def cells(notebook: nbformat.NotebookNode, kind: str) -> list[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == kind]


SAMPLE = """# Scaling

Prose with math \\(x^{(2)}\\) and a [link to a page](../notation.md#shapes).

```python
import torch
print(torch.tensor([1.0]))
```
<!--pytest-codeblocks:expected-output-->
```text
tensor([1.])
```

<!-- a comment for authors -->

=== "Loop"

    ```python
    total = 0
    for i in range(3):
        total += i
    print(total)
    ```
    <!--pytest-codeblocks:expected-output-->
    ```text
    3
    ```

=== "Vectorised"

    ```python
    print(sum(range(3)))  # (1)!
    ```

    1. An annotation.

??? success "Solution"
    Some prose inside.

    ```python
    x = 2
    ```

!!! note
    A note.

$$
\\frac{a}{b}
$$

```console
$ make test
```

![A heatmap](../figures/journey-weights.svg "The weights")

[:material-download: A button](x.ipynb){ .md-button }
"""


def test_each_python_block_becomes_one_code_cell() -> None:
    code = cells(convert(SAMPLE), "code")
    assert len(code) == SAMPLE.count("```python")
    assert code[0] == "import torch\nprint(torch.tensor([1.0]))"


def test_blocks_in_tabs_and_admonitions_are_dedented() -> None:
    code = cells(convert(SAMPLE), "code")
    assert code[1] == "total = 0\nfor i in range(3):\n    total += i\nprint(total)"
    assert code[3] == "x = 2"


def test_output_fences_markers_and_comments_are_dropped() -> None:
    notebook = convert(SAMPLE)
    text = "\n".join(cell.source for cell in notebook.cells)
    assert "tensor([1.])" not in text
    assert "pytest-codeblocks" not in text
    assert "<!--" not in text
    assert "```text" not in text


def test_code_annotations_are_removed() -> None:
    assert cells(convert(SAMPLE), "code")[2] == "print(sum(range(3)))"


def test_material_syntax_becomes_plain_markdown() -> None:
    prose = "\n".join(cells(convert(SAMPLE), "markdown"))
    assert "**Loop**" in prose and "**Vectorised**" in prose
    assert "**Solution**" in prose and "**Note**" in prose
    assert "===" not in prose and "???" not in prose and "!!!" not in prose
    assert "\n    Some prose inside." not in prose and "Some prose inside." in prose
    assert "$x^{(2)}$" in prose and "\\(" not in prose
    assert "\\frac{a}{b}" in prose  # braces of math are not mistaken for attribute lists
    assert "link to a page" in prose and "notation.md" not in prose
    assert "{ .md-button }" not in prose and ":material-download:" not in prose
    assert "*(Figure on the website: The weights)*" in prose
    assert "```console\n$ make test\n```" in prose


def test_title_and_kernel() -> None:
    notebook = convert(SAMPLE)
    assert notebook.cells[0].source.startswith("# Scaling")
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    untitled = hook.markdown_to_notebook("Just prose.", "Given title")
    assert untitled.cells[0].source == "# Given title"


def test_skipped_blocks_stay_as_text() -> None:
    notebook = convert("<!--pytest-codeblocks:skip-->\n```python\nraise SystemExit\n```\n")
    assert cells(notebook, "code") == []
    assert "raise SystemExit" in "\n".join(cells(notebook, "markdown"))


def test_chapter_selection() -> None:
    assert hook.is_chapter("walkthrough/scaling.md")
    assert hook.is_chapter("transformer/causal-attention.md")
    assert hook.is_chapter("efficient/flash-attention.md")
    assert not hook.is_chapter("walkthrough/index.md")
    assert not hook.is_chapter("notation.md")
    assert hook.notebook_name("walkthrough/scaling.md") == "walkthrough/scaling.ipynb"


def test_there_are_chapters() -> None:
    assert len(CHAPTERS) >= 5, CHAPTERS


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_notebook_runs_top_to_bottom(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    notebook = convert(text)
    assert len(cells(notebook, "code")) == text.count("```python")
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=300,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on failure


def test_built_site_offers_every_chapter_notebook(built_site: Path) -> None:
    for path in CHAPTERS:
        rel = path.relative_to(DOCS).with_suffix("")
        notebook = nbformat.reads(
            (built_site / rel.with_suffix(".ipynb")).read_text(encoding="utf-8"), as_version=4
        )
        assert cells(notebook, "code")
        html = (built_site / rel / "index.html").read_text(encoding="utf-8")
        assert f'href="../{rel.name}.ipynb"' in html, rel
