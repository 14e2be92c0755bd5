"""MkDocs hook: finishing touches for the notebook pages that mkdocs-jupyter renders.

* **Offline math.** mkdocs-jupyter's template puts a MathJax ``<script src=...>``
  (and a ``text/x-mathjax-config`` block) into every notebook page; with no
  ``custom_mathjax_url`` the ``src`` is empty, so the browser would fetch the page
  itself as a script. Both are removed. The notebook's ``$...$`` and ``$$...$$``
  math is rendered instead by ``docs/assets/javascripts/katex-init.js``, which runs
  KaTeX's auto-render on every ``.jupyter-wrapper`` element.
* **Nothing from outside.** Any other ``<script src>``, ``<link href>``, ``<img src>``
  or ``<iframe src>`` that points off the site (``http://``, ``https://`` or ``//``),
  such as the MathJax loader that newer mkdocs-jupyter releases add, is removed from
  notebook pages too: the site works offline (tests/site/test_site_build.py checks
  every page).
* **A quiet build.** Notebooks run in kernels that mkdocs-jupyter starts through
  nbconvert, on loopback TCP; without keys each kernel warns that it "is running over
  TCP without encryption". [`on_config`][] puts ``hooks/jupyter/`` first on
  ``JUPYTER_CONFIG_PATH``; its ``jupyter_nbconvert_config.json`` sets
  ``KernelManager.transport_encryption = "auto"``, so the kernel manager provisions
  CurveZMQ keys for every kernel whose kernelspec supports them (ipykernel's does):
  the kernels' traffic is encrypted and nothing warns. (Kernels over IPC would be
  quiet too, but parallel builds in one directory can then share socket names.)
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
import os
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
#: Jupyter configuration for the notebooks' kernels (see the module's docstring).
JUPYTER_CONFIG = Path(__file__).resolve().parent / "jupyter"
#: A URL that leaves the site: ``http://``, ``https://`` or protocol-relative ``//``.
EXTERNAL_URL = r"""\s*(?:https?:)?//"""
#: A ``<script>`` element loading an external file, with its (empty) body.
EXTERNAL_SCRIPT = re.compile(
    rf"""<script\b[^>]*\bsrc\s*=\s*["']?{EXTERNAL_URL}[^>]*>.*?</script\s*>""",
    re.DOTALL | re.IGNORECASE,
)
#: A ``<link>``, ``<img>`` or ``<iframe>`` (with its body) pointing off the site.
EXTERNAL_TAG = re.compile(
    rf"""<link\b[^>]*\bhref\s*=\s*["']?{EXTERNAL_URL}[^>]*>"""
    rf"""|<img\b[^>]*\bsrc\s*=\s*["']?{EXTERNAL_URL}[^>]*>"""
    rf"""|<iframe\b[^>]*\bsrc\s*=\s*["']?{EXTERNAL_URL}[^>]*>.*?</iframe\s*>""",
    re.DOTALL | re.IGNORECASE,
)


def package_digest(package: Path = PACKAGE) -> str:
    """A digest of every file of the package: it changes whenever the package does."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def encrypted_kernels() -> None:
    """Put ``hooks/jupyter/`` first on ``JUPYTER_CONFIG_PATH``.

    nbconvert, which mkdocs-jupyter runs, reads ``jupyter_nbconvert_config.json`` from
    there and starts each kernel with CurveZMQ keys.
    """
    paths = [p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    if str(JUPYTER_CONFIG) not in paths:
        os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(JUPYTER_CONFIG), *paths])


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Quiet kernels; key mkdocs-jupyter's cache on the package too (see the docstring)."""
    plugin = config.plugins.get("mkdocs-jupyter")
    if plugin is not None:
        encrypted_kernels()
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


def strip_external(html: str) -> str:
    """Remove every script, stylesheet, image or frame that would load from off the site."""
    return EXTERNAL_TAG.sub("", EXTERNAL_SCRIPT.sub("", html))


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
    """On notebook pages: strip MathJax and anything external; add the download buttons."""
    if not is_notebook(page.file.src_uri):
        return html
    stem = posixpath.splitext(page.file.src_uri)[0]
    ipynb = files.get_file_from_path(stem + ".ipynb")
    if ipynb is None:
        raise PluginError(f"{page.file.src_uri}: its .ipynb was not generated")
    url = ipynb.url_relative_to(page.file)
    return download_buttons(posixpath.basename(stem), url) + strip_external(strip_mathjax(html))
