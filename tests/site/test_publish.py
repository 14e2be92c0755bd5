"""The site is set up and built one way everywhere, and reading it needs no test tooling.

The suite's one build of the site (``built_site``, tests/site_build.py) *is* the Pages
workflow's build job (``make site``), run in a fresh environment that holds what the
package's ``docs`` extra declares: these tests check that it was built so, what that
environment lacked, and what publishing under a project subpath needs (``site_url``:
sitemap, 404 page). ``scripts/install.py`` chooses where PyTorch comes from.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import site_build
from support import REPO_ROOT

spec = importlib.util.spec_from_file_location("install", REPO_ROOT / "scripts" / "install.py")
assert spec is not None and spec.loader is not None
install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(install)

# What reading the site must not need (the `test`, `tf` and `hf` extras' heavy tooling).
TEST_TOOLING = ("playwright", "mypy", "ruff", "transformers", "tensorflow", "xdist", "hypothesis")
SUBPATH = "/attention-step-by-step/"


def test_the_suite_built_the_site_with_the_workflows_own_steps(built_site: Path) -> None:
    """The build log shows the workflow's run steps, the site-level setup and the strict build."""
    log = built_site.with_suffix(".log").read_text(encoding="utf-8")
    steps = site_build.workflow_steps()
    assert [command for command, _ in steps] == ["make site"]
    for command, _ in steps:
        assert f"$ {command}\n" in log
    assert "scripts/install.py site" in log
    assert "==> Installing the package (editable) with the `docs` extra" in log
    assert f"-m mkdocs build --strict --site-dir {built_site}" in log
    assert "install.py test" not in log


def test_the_build_environment_had_no_test_tooling(built_site: Path) -> None:
    """The environment the site was built in (what the docs extra declares) lacks every
    piece of test tooling, and imported the package from this checkout."""
    python = built_site.with_suffix(".venv") / "bin" / "python"
    probe = (
        "import importlib.util, attnlab; "
        f"print([n for n in {TEST_TOOLING!r} if importlib.util.find_spec(n)]); "
        "print(attnlab.__file__)"
    )
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    result = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, env=env, cwd="/", check=True
    )
    found, package = result.stdout.splitlines()
    assert found == "[]"
    assert Path(package).is_relative_to(REPO_ROOT / "src")
    assert all(importlib.util.find_spec(name) for name in ("playwright", "mypy", "ruff"))


def _dry_run(target: str, tmp_path: Path) -> str:
    env = {**os.environ, "MAKEFLAGS": f"VENV={tmp_path / 'venv'}"}
    result = subprocess.run(
        ["make", "-n", target], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
    )
    return result.stdout


def test_make_serve_sets_up_the_site_level_and_make_test_everything(tmp_path: Path) -> None:
    """In a new environment, `make serve` and `make site` install the site's level only;
    `make test` installs that, then the test level."""
    for target in ("serve", "site"):
        commands = _dry_run(target, tmp_path)
        assert "scripts/install.py site" in commands, target
        assert "install.py test" not in commands, target
    commands = _dry_run("test", tmp_path)
    assert commands.index("install.py site") < commands.index("install.py test")
    assert commands.index("install.py test") < commands.index("-m pytest")


def test_sitemap_lists_every_page_under_the_site_url(built_site: Path) -> None:
    namespace = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    tree = ET.parse(built_site / "sitemap.xml")
    listed = {loc.text for loc in tree.getroot().iterfind("s:url/s:loc", namespace)}
    pages = {
        page.relative_to(built_site).as_posix()
        for page in built_site.rglob("*.html")
        if page.name != "404.html"
    }
    assert pages and listed == {site_build.SITE_URL + page for page in pages}


def test_404_page_links_everything_from_the_site_root(built_site: Path) -> None:
    """The 404 page is served at any depth, so its links and resources are absolute
    paths under the site's subpath (the browser test loads them)."""
    assert site_build.SITE_URL.endswith(SUBPATH)
    html = (built_site / "404.html").read_text(encoding="utf-8")
    local = [
        url
        for url in re.findall(r'(?:src|href)="([^"#]+)', html)
        if not re.match(r"(?:https?:)?//|data:|mailto:", url)
    ]
    assert len(local) >= 10
    outside = [url for url in local if not url.startswith(SUBPATH)]
    assert not outside, outside
    missing = [url for url in local if not (built_site / url.removeprefix(SUBPATH)).exists()]
    assert not missing, missing


# --- where PyTorch comes from (scripts/install.py) ----------------------------------------


class _Index(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/whl/cpu/torch/" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def index_url() -> Iterator[str]:
    """A package index on 127.0.0.1 that has torch."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
    server.shutdown()
    server.server_close()


def test_torch_comes_from_the_cpu_index_when_it_answers(index_url: str) -> None:
    assert install.index_answers(index_url)
    command = install.torch_command("torch==2.13.0", index_url, reachable=True)
    assert command == ["install", "torch==2.13.0", "--index-url", index_url]


def test_torch_comes_from_pips_sources_when_the_index_is_out_of_reach() -> None:
    """A closed port, and a server that accepts but never answers: no index, and quickly."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        closed_url = f"http://127.0.0.1:{closed.getsockname()[1]}/whl/cpu"
    assert not install.index_answers(closed_url)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        start = time.monotonic()
        assert not install.index_answers(f"http://127.0.0.1:{silent.getsockname()[1]}", 0.5)
        assert time.monotonic() - start < 5
    assert install.torch_command("torch==2.13.0", closed_url, reachable=False) == [
        "install",
        "torch==2.13.0",
    ]


def test_the_torch_pin_is_the_installed_release() -> None:
    """pyproject's [tool.attnlab] torch (what make installs) is what this suite runs on."""
    pinned = install.settings()["torch"]
    assert pinned == f"torch=={install.installed_version('torch')}"
    assert install.installed_version("no-such-distribution-here") is None
