"""The documentation site builds strictly and loads nothing from the network.

Every page is scanned, the notebook pages by name as well: mkdocs-jupyter's template
has put MathJax loaders into them (an empty ``src`` up to 0.26, a CDN script from
0.27), which hooks/notebook_pages.py strips.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support import REPO_ROOT

from hooks import notebook_pages

EXTERNAL = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
# A <link> whose every rel is one of these is a plain reference, never fetched, and may
# point off the site; any other (stylesheet, icon, preload, preconnect, dns-prefetch,
# an unknown or missing rel) counts as loading from where it points.
REFERENCE_RELS = {"canonical", "alternate", "author", "license", "help", "next", "prev"}
NOTEBOOKS = sorted((REPO_ROOT / "docs" / "notebooks").glob("*.py"))
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)""", re.IGNORECASE)
# `@import url(...)` is caught by CSS_URL; this catches the bare-string form.
CSS_IMPORT = re.compile(r"""@import\s+['"]([^'"]+)""", re.IGNORECASE)


class _ResourceCollector(HTMLParser):
    """Collect the URLs a page would fetch when a browser renders it."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        if tag in {"script", "img", "iframe", "audio", "video", "source", "embed"}:
            self.urls.extend(attr[name] for name in ("src", "data-src") if name in attr)
        if tag == "object" and "data" in attr:
            self.urls.append(attr["data"])
        if tag == "link":
            rels = set(attr.get("rel", "").lower().split())
            if not rels or not rels <= REFERENCE_RELS or attr.get("as"):
                self.urls.append(attr.get("href", ""))
        if "style" in attr:
            self.urls.extend(css_urls(attr["style"]))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.urls.extend(css_urls(data))


def css_urls(css: str) -> list[str]:
    """Return every URL referenced by ``url()`` or ``@import`` in a style sheet."""
    return CSS_URL.findall(css) + CSS_IMPORT.findall(css)


def page_resource_urls(html: str) -> list[str]:
    """Return the URLs of the scripts, style sheets, fonts and images a page loads."""
    collector = _ResourceCollector()
    collector.feed(html)
    return collector.urls


def external(urls: list[str]) -> list[str]:
    return [url for url in urls if EXTERNAL.match(url)]


def test_strict_build_succeeds(built_site: Path) -> None:
    assert (built_site / "index.html").is_file()
    assert (built_site / "notation.html").is_file()
    assert (built_site / "reference.html").is_file()


def test_site_loads_nothing_from_the_network(built_site: Path) -> None:
    offenders: list[str] = []
    for page in sorted(built_site.rglob("*.html")):
        for url in external(page_resource_urls(page.read_text(encoding="utf-8"))):
            offenders.append(f"{page.relative_to(built_site)}: {url}")
    for sheet in sorted(built_site.rglob("*.css")):
        for url in external(css_urls(sheet.read_text(encoding="utf-8"))):
            offenders.append(f"{sheet.relative_to(built_site)}: {url}")
    assert not offenders, "external resources in the built site:\n" + "\n".join(offenders)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_page_loads_nothing_from_outside(path: Path, built_site: Path) -> None:
    """The executed notebook page: no external resource, no MathJax loader at all."""
    html = (built_site / "notebooks" / f"{path.stem}.html").read_text(encoding="utf-8")
    assert 'class="jp-Cell' in html, f"{path.name}: not a rendered notebook"
    assert not external(page_resource_urls(html))
    assert not re.search(r"<script[^>]*mathjax", html, re.IGNORECASE)
    assert "text/x-mathjax-config" not in html


# What mkdocs-jupyter 0.27's template adds (MathJax 4 from a CDN), and other external tags.
NOTEBOOK_HTML = """<!-- Load mathjax -->
<script src=""></script>
<script type="text/x-mathjax-config">MathJax.Hub.Config({});</script>
<!-- End of mathjax configuration -->
<script id="MathJax-script" async
  src="https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js"></script>
<script src='//cdn.example/require.min.js' defer></script>
<link rel="stylesheet" href="HTTPS://cdn.example/jupyter.css">
<img alt="logo" src="http://example.org/logo.png">
<iframe src="https://widgets.example/embed"></iframe>
<script src="clipboard.js"></script>
<script>document.title = "kept";</script>
<link rel="stylesheet" href="../assets/local.css">
<img alt="a plot" src="data:image/png;base64,AAAA">
<a href="https://pytorch.org/">a link stays</a>
<div class="jp-Cell jp-CodeCell">cell</div>"""


def test_notebook_hook_strips_every_external_tag() -> None:
    assert external(page_resource_urls(NOTEBOOK_HTML))  # the sample does load from outside
    html = notebook_pages.strip_external(notebook_pages.strip_mathjax(NOTEBOOK_HTML))
    assert external(page_resource_urls(html)) == []
    assert "mathjax" not in html.lower()
    for kept in (
        '<script src="clipboard.js"></script>',
        '<script>document.title = "kept";</script>',
        'href="../assets/local.css"',
        'src="data:image/png;base64,AAAA"',
        '<a href="https://pytorch.org/">a link stays</a>',
        '<div class="jp-Cell jp-CodeCell">cell</div>',
    ):
        assert kept in html, kept


def test_katex_is_vendored_and_wired_up(built_site: Path) -> None:
    katex = built_site / "assets" / "vendor" / "katex"
    assert (katex / "katex.min.js").is_file()
    assert (katex / "contrib" / "auto-render.min.js").is_file()
    assert list((katex / "fonts").glob("*.woff2"))
    html = (built_site / "notation.html").read_text(encoding="utf-8")
    assert 'class="arithmatex"' in html
    for asset in ("katex.min.css", "katex.min.js", "auto-render.min.js", "katex-init.js"):
        assert asset in html, asset


def test_resource_scanner_catches_external_assets() -> None:
    page = """
    <link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">
    <link rel="preload" as="font" href="//cdn.example/f.woff2">
    <link rel="canonical" href="https://example.org/page/">
    <link rel="preconnect" href="https://fonts.gstatic.com">
    <script src="https://cdn.jsdelivr.net/npm/katex/dist/katex.min.js"></script>
    <script src="assets/local.js"></script>
    <img src="http://example.org/a.png">
    <a href="https://pytorch.org/">fine: a link, not a resource</a>
    <style>@import url("https://fonts.example/x.css"); b { background: url(img/ok.png) }</style>
    """
    assert external(page_resource_urls(page)) == [
        "https://fonts.googleapis.com/css?family=Roboto",
        "//cdn.example/f.woff2",
        "https://fonts.gstatic.com",
        "https://cdn.jsdelivr.net/npm/katex/dist/katex.min.js",
        "http://example.org/a.png",
        "https://fonts.example/x.css",
    ]
    css = "@import 'https://x.example/a.css'; a { src: url('fonts/a.woff2') }"
    assert external(css_urls(css)) == ["https://x.example/a.css"]
