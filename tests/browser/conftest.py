"""Fixtures for the browser tests: the built site served on 127.0.0.1, and one Chromium.

The site is the session's ``built_site`` (built once, in ``tests/conftest.py``),
served by a threaded ``http.server`` on a free port. The browser is Debian's
Chromium (``/usr/bin/chromium``, or ``$CHROMIUM``) driven by Playwright; the tests
never run ``playwright install``. Without a browser the tests skip with the reason,
except under ``CI=true``, where a missing browser is a failure.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# No sandbox (tests run as root in containers) and no GPU (there is none). V8 stops at
# its baseline compiler (`--max-opt=1`): each page runs axe-core's half a megabyte of
# JavaScript once, too briefly for the optimising compilers to win back what they
# spend; measured over every page of the site, the renderer does about a tenth less
# work. Only how fast the JavaScript runs changes, not what it computes.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--js-flags=--max-opt=1"]
VIEWPORT = {"width": 1280, "height": 900}


def no_browser(reason: str) -> None:
    """Skip loudly; under ``CI=true`` fail instead, since CI must run these tests."""
    message = f"BROWSER TESTS NOT RUN: {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI=true: a browser is required)", pytrace=False)
    pytest.skip(message)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    """Says nothing when the browser drops a connection (it does, leaving a page)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture(scope="session")
def site_url(built_site: Path) -> Iterator[str]:
    """Serve the built site on 127.0.0.1 (a free port); yield its base URL, ending in /."""
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    server = _Server(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the whole session."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError as err:  # pragma: no cover - depends on the environment
        no_browser(f"the playwright package is not installed ({err})")
    if not Path(CHROMIUM).is_file():
        no_browser(
            f"no Chromium at {CHROMIUM} (install Debian's `chromium` package, "
            "as `make setup` does, or point $CHROMIUM at one)"
        )
    manager = sync_playwright().start()
    try:
        try:
            chromium = manager.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        except Error as err:
            no_browser(f"Chromium at {CHROMIUM} did not start: {err}")
        yield chromium
        chromium.close()
    finally:
        manager.stop()


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    """``artifacts/screenshots`` under the repository root (gitignored)."""
    directory = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture(scope="session")
def new_context(browser: Any) -> Iterator[Any]:
    """A factory for fresh browser contexts (own storage; light scheme unless asked;
    reduced motion).

    Every context made is closed at the end of the session.
    """
    contexts: list[Any] = []

    def make(color_scheme: str = "light", service_workers: str = "block") -> Any:
        # A reader who asked for reduced motion: Material then turns its colour
        # transitions off, so colours read right after the palette toggle are final.
        # Service workers are blocked unless a test asks for them: the explorer's
        # (docs/coi-serviceworker.js) reloads the page once to make it cross-origin
        # isolated, which tests of everything else need not wait for.
        context = browser.new_context(
            viewport=VIEWPORT,
            color_scheme=color_scheme,
            reduced_motion="reduce",
            service_workers=service_workers,
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        return context

    yield make
    for context in contexts:
        context.close()
