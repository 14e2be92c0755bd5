"""MkDocs hook: finishing touches for the notebook pages that mkdocs-jupyter renders.

* **Offline math.** mkdocs-jupyter's template puts a MathJax ``<script src=...>``
  (and a ``text/x-mathjax-config`` block) into every notebook page; with no
  ``custom_mathjax_url`` the ``src`` is empty, so the browser would fetch the page
  itself as a script. Both are removed. The notebook's ``$...$`` and ``$$...$$``
  math is rendered instead by ``docs/assets/javascripts/katex-init.js``, which runs
  KaTeX's auto-render on every ``.jupyter-wrapper`` element.
* **A cache that knows the package.** mkdocs-jupyter caches each executed notebook
  under a key made of the notebook and its options only, so a change to ``attnlab``
  would leave stale outputs. [`on_config`][] points its ``cache_dir`` at a
  subdirectory named by a digest of the package's sources and removes older ones:
  a notebook runs again whenever it or the package changes, and a build that
  changed neither (``mkdocs serve`` while writing prose) takes seconds.
* **Downloads.** Each ``docs/notebooks/<name>.py`` (jupytext percent format) is also
  published as ``notebooks/<name>.ipynb``, and the page gets two buttons: the
  notebook, and the ``.py`` source that mkdocs-jupyter copies next to the page
  (``include_source: true``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import posixpath
import re
import shutil
from pathlib import Path

import jupytext
import nbformat
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "attnlab"
NOTEBOOKS = "notebooks/*.py"  # the same glob as mkdocs-jupyter's `include`
MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.DOTALL)


def package_digest(package: Path = PACKAGE) -> str:
    """A digest of every file of the package: it changes whenever the package does."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Key mkdocs-jupyter's cache on the package too (see the module's docstring)."""
    plugin = config.plugins.get("mkdocs-jupyter")
    if plugin is None or not plugin.config["cache"]:
        return config
    root = Path(config.config_file_path).parent / ".cache" / "mkdocs-jupyter"
    current = root / package_digest()
    if root.is_dir():
        for stale in root.iterdir():
            if stale.is_dir() and stale != current:
                shutil.rmtree(stale, ignore_errors=True)
    plugin.config["cache_dir"] = str(current)
    return config


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
