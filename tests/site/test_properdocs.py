"""A way off Material for MkDocs' stack, proven: ProperDocs builds this site too.

ProperDocs is a drop-in fork of MkDocs 1.x (on PyPI; it reads mkdocs.yml and runs the
same plugins, theme and hooks). Building with it is one changed command, so a move
when MkDocs or Material ends is one line. It reuses the build cache the suite's
build filled (``.cache/``), so it computes no figure and runs no notebook again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import site_build
from support import REPO_ROOT


def _files(site: Path) -> set[str]:
    return {path.relative_to(site).as_posix() for path in site.rglob("*") if path.is_file()}


@pytest.mark.long
def test_properdocs_builds_this_site_strictly(built_site: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "SITE_URL": site_build.SITE_URL, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "properdocs", "build", "--strict", "-f", "mkdocs.yml", "-d", site],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert _files(site) == _files(built_site)
    for page in ("index.html", "walkthrough/scaling.html", "reference.html"):
        assert 'class="md-content"' in (site / page).read_text(encoding="utf-8"), page
