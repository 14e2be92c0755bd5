"""MkDocs hook: finishing touches for the notebook pages that mkdocs-jupyter renders.

* **Offline math.** mkdocs-jupyter's template puts a MathJax ``<script src=...>``
  (and a ``text/x-mathjax-config`` block) into every notebook page; with no
  ``custom_mathjax_url`` the ``src`` is empty, so the browser would fetch the page
  itself as a script. Both are removed. The notebook's ``$...$`` and ``$$...$$``
  math is rendered instead by ``docs/assets/javascripts/katex-init.js``, which runs
  KaTeX's auto-render on every ``.jupyter-wrapper`` element.
* **Downloads.** Each ``docs/notebooks/<name>.py`` (jupytext percent format) is also
  published as ``notebooks/<name>.ipynb``, and the page gets two buttons: the
  notebook, and the ``.py`` source that mkdocs-jupyter copies next to the page
  (``include_source: true``).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re

import jupytext
import nbformat
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

NOTEBOOKS = "notebooks/*.py"  # the same glob as mkdocs-jupyter's `include`
MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.DOTALL)


def strip_mathjax(html: str) -> str:
    """Remove the MathJax loader and configuration that nbconvert's template emits."""
    return MATHJAX.sub("", html)


def is_notebook(src_uri: str) -> bool:
    """Whether ``src_uri`` (relative to docs/) is a notebook page."""
    return fnmatch.fnmatch(src_uri, NOTEBOOKS)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Publish ``notebooks/<name>.ipynb`` (unexecuted) beside each jupytext source."""
    for file in list(files):
        if file.abs_src_path is not None and is_notebook(file.src_uri):
            notebook = jupytext.read(file.abs_src_path)
            notebook.metadata["kernelspec"] = {
                "name": "python3",
                "display_name": "Python 3",
                "language": "python",
            }
            name = posixpath.splitext(file.src_uri)[0] + ".ipynb"
            content = nbformat.writes(notebook) + "\n"
            files.append(File.generated(config, name, content=content))
    return files


def download_buttons(stem: str, ipynb_url: str) -> str:
    """HTML for the download buttons of notebook ``stem``; URLs relative to its page."""
    return (
        '<p class="notebook-downloads">'
        f'<a class="md-button" href="{ipynb_url}" download="{stem}.ipynb">'
        "Download as notebook (.ipynb)</a> "
        f'<a class="md-button" href="{stem}.py" download="{stem}.py">'
        "Download the source (.py)</a></p>"
    )


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """On notebook pages: strip MathJax and add the download buttons."""
    if not is_notebook(page.file.src_uri):
        return html
    stem = posixpath.splitext(page.file.src_uri)[0]
    ipynb = files.get_file_from_path(stem + ".ipynb")
    if ipynb is None:
        raise PluginError(f"{page.file.src_uri}: its .ipynb was not generated")
    url = ipynb.url_relative_to(page.file)
    return download_buttons(posixpath.basename(stem), url) + strip_mathjax(html)
