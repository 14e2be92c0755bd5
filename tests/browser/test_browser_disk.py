"""The copy on disk works like the served site, and the published site works under a subpath.

From ``file://`` (the built ``site/`` opened in a browser, no server): a reader clicks
from page to page (links land on pages, not on folders), searches, and saves a chapter's
notebook as a file. Served under a project subpath as GitHub Pages serves it, a missing
page gets the 404 page with all of its resources, and its home link leads home.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import site_build

pytestmark = pytest.mark.browser

CHAPTER = "walkthrough/scaling.html"


@pytest.fixture
def disk(new_context: Any) -> Iterator[Any]:
    """A fresh tab for pages opened from disk; fails the test on a JavaScript error."""
    page = new_context("light").new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    page.close()
    assert not errors, f"uncaught JavaScript errors: {errors}"


def _on_page(page: Any, site: Path) -> Path:
    """The file the tab shows, checked to be a rendered page of the site."""
    url = page.url.split("#")[0].split("?")[0]  # search adds ?h=<terms> to highlight
    assert url.startswith("file://") and url.endswith(".html"), page.url
    page.locator("article.md-content__inner h1").first.wait_for()
    path = Path(url.removeprefix("file://"))
    assert path.is_file() and path.is_relative_to(site), path
    return path


def test_the_copy_on_disk_navigates_by_clicking(disk: Any, built_site: Path) -> None:
    """Every nav link names a page file; clicking the nav, a Next link and the logo lands
    on pages (a folder would show a directory listing)."""
    disk.goto((built_site / "index.html").as_uri())
    hrefs = disk.eval_on_selector_all(
        "nav.md-nav--primary a.md-nav__link[href]", "links => links.map(a => a.href)"
    )
    targets = {Path(href.removeprefix("file://").split("#")[0]) for href in hrefs}
    assert len(targets) >= 30
    assert all(target.is_file() and target.suffix == ".html" for target in targets)

    disk.locator("nav.md-nav--primary a.md-nav__link", has_text="Notation").first.click()
    assert _on_page(disk, built_site) == built_site / "notation.html"
    disk.locator("a.md-footer__link--next").click()
    assert _on_page(disk, built_site).parent == built_site / "walkthrough"
    disk.locator('nav.md-nav--primary a.md-nav__link[href$="scaling.html"]:visible').first.click()
    assert _on_page(disk, built_site) == built_site / CHAPTER
    disk.locator("a.md-header__button.md-logo").click()
    assert _on_page(disk, built_site) == built_site / "index.html"


def test_search_works_from_disk(disk: Any, built_site: Path) -> None:
    """The search index is read from a script and the worker runs in an iframe."""
    disk.goto((built_site / "notation.html").as_uri())
    search = disk.locator("input.md-search__input")
    search.click()  # from file://, the index is loaded when the search opens
    disk.wait_for_function(
        """() => {
          const meta = document.querySelector('.md-search-result__meta');
          return meta && meta.textContent.trim() && !/initializing/i.test(meta.textContent);
        }"""
    )
    search.press_sequentially("softmax")
    results = disk.locator(".md-search-result__item")
    results.first.wait_for(state="visible")
    assert "softmax" in results.first.inner_text().lower()
    results.first.locator("a").first.click()
    _on_page(disk, built_site)


def test_a_chapter_notebook_downloads_as_a_file_from_disk(disk: Any, built_site: Path) -> None:
    disk.goto((built_site / CHAPTER).as_uri())
    with disk.expect_download() as download:
        disk.get_by_role("link", name="Download as notebook").click()
    assert download.value.suggested_filename == "scaling.ipynb"
    saved = Path(download.value.path()).read_bytes()
    assert saved == (built_site / "walkthrough" / "scaling.ipynb").read_bytes()


class _Pages(SimpleHTTPRequestHandler):
    """GitHub Pages for a project site: the site under SUBPATH, 404.html for anything missing."""

    prefix = "/" + site_build.SITE_URL.split("/", 3)[3]  # /attention-step-by-step/

    def send_head(self) -> Any:
        path = self.path.split("?")[0]
        local = Path(self.translate_path("/" + path.removeprefix(self.prefix)))
        if not path.startswith(self.prefix) or not (local.is_file() or local.is_dir()):
            body = (Path(self.directory) / "404.html").read_bytes()
            self.send_response(404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return None
        self.path = "/" + path.removeprefix(self.prefix)
        return super().send_head()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def project_site(built_site: Path) -> Iterator[str]:
    """The built site served as a project site under its subpath; the site's URL."""
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Pages, directory=str(built_site))
    )
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}{_Pages.prefix}"
    server.shutdown()
    server.server_close()


def test_404_page_under_a_subpath_loads_everything_and_links_home(
    new_context: Any, project_site: str
) -> None:
    page = new_context("light").new_page()
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    missing = project_site + "missing/page.html"

    def on_response(response: Any) -> None:
        if response.status >= 400 and response.url != missing:
            failed.append(response.url)

    page.on("response", on_response)
    response = page.goto(missing, wait_until="networkidle")
    assert response is not None and response.status == 404
    assert page.locator("h1").first.inner_text().strip() == "404 - Not found"
    assert not failed, f"resources of the 404 page that did not load: {failed}"
    assert page.evaluate("getComputedStyle(document.querySelector('.md-header')).position") in {
        "sticky",
        "fixed",
    }  # Material's style sheet applied
    page.locator("a.md-header__button.md-logo").click()
    page.wait_for_load_state()
    assert page.url in {project_site, project_site + "index.html"}
    assert page.locator("article.md-content__inner h1").first.is_visible()
    page.close()
