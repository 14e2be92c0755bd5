r"""MkDocs hook: every chapter can be downloaded as a Jupyter notebook.

At build time each chapter's Markdown source is converted by
[`markdown_to_notebook`][] into an ``.ipynb`` (nbformat 4) placed next to the page
(``walkthrough/scaling.md`` gives ``walkthrough/scaling.ipynb``), and a download
button is inserted under the page's title.

The conversion:

* every ```` ```python ```` block becomes a code cell (blocks inside content tabs and
  admonitions are dedented; Material's ``# (1)!`` code annotations are removed);
* the prose between code blocks becomes markdown cells;
* expected-output fences (``<!--pytest-codeblocks:expected-output-->`` and the fence
  after it) and all HTML comments are dropped: the notebook prints its own output;
* Material-only syntax is made readable in Jupyter: admonition and tab markers become
  bold lines, attribute lists ``{ .md-button }`` go, links to other pages keep only
  their text, figures become a one-line note, and ``\( \)``/``\[ \]`` math
  becomes ``$ $``/``$$ $$``.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re

import nbformat
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.utils.meta import get_data

CHAPTERS = ("walkthrough/*.md", "transformer/*.md", "efficient/*.md")
NOT_CHAPTERS = ("*/index.md",)

OUTPUT_MARKER = re.compile(r"<!--[-\s]*pytest-codeblocks:expected-output(-ignore-whitespace)?-->")
SKIP_MARKER = re.compile(r"<!--[-\s]*pytest-codeblocks:skip[-\s]*-->")
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
    line = line.replace("\\(", "$").replace("\\)", "$")
    return line.replace("\\[", "$$").replace("\\]", "$$")


def markdown_to_notebook(text: str, title: str | None = None) -> nbformat.NotebookNode:
    """Convert a chapter's Markdown into a notebook: prose as markdown, code as code cells.

    Args:
        text: The page's Markdown source (front matter is ignored).
        title: A heading for the first cell when the text has no ``# Title`` of its own.

    Returns:
        An nbformat 4 notebook with a ``python3`` kernelspec.
    """
    text, _ = get_data(text)
    text = SKIP_MARKER.sub("<!--skip-->", text)
    cells: list[nbformat.NotebookNode] = []
    prose: list[str] = []

    def flush() -> None:
        body = COMMENT.sub("", "\n".join(prose))
        body = re.sub(r"\n{3,}", "\n\n", body).strip()
        if body:
            cells.append(nbformat.v4.new_markdown_cell(body))
        prose.clear()

    lines = text.splitlines()
    containers: list[int] = []  # the body indentation of each open admonition or tab
    drop_next_fence = skip_next_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped:
            while containers and indent < containers[-1]:
                containers.pop()
        dedent = containers[-1] if containers else 0
        if OUTPUT_MARKER.fullmatch(stripped):
            drop_next_fence = True
            continue
        if stripped == "<!--skip-->":
            skip_next_fence = True
            continue
        if stripped.startswith("```"):
            ticks = len(stripped) - len(stripped.lstrip("`"))
            info = stripped[ticks:].strip()
            body: list[str] = []
            while i < len(lines) and not lines[i].lstrip().startswith("`" * ticks):
                body.append(_dedent(lines[i], indent))
                i += 1
            i += 1  # the closing fence
            if drop_next_fence:
                pass
            elif info == "python" and not skip_next_fence:
                flush()
                code = "\n".join(ANNOTATION.sub("", row) for row in body).strip("\n")
                cells.append(nbformat.v4.new_code_cell(code))
            else:
                fence = "`" * ticks
                prose.extend([f"{fence}{info}", *body, fence])
            drop_next_fence = skip_next_fence = False
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
    notebook = nbformat.v4.new_notebook(cells=cells)
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


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add ``<chapter>.ipynb`` next to every chapter page."""
    for file in list(files.documentation_pages()):
        if is_chapter(file.src_uri):
            text = file.content_string
            notebook = markdown_to_notebook(text, _title(text))
            content = nbformat.writes(notebook) + "\n"
            files.append(File.generated(config, notebook_name(file.src_uri), content=content))
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
