"""Build the documentation site strictly into a directory; record how it went.

``python tests/site_build.py SITE_DIR`` runs ``mkdocs build --strict`` into
``SITE_DIR`` and then writes ``SITE_DIR.log`` (mkdocs' output) and, last,
``SITE_DIR.rc`` (its exit status). ``tests/conftest.py`` starts this in the
background at the start of a parallel run, so the build overlaps the tests that do
not need the site; the ``built_site`` fixture waits for the ``.rc`` file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def build(site_dir: Path) -> int:
    """Build into ``site_dir``; write ``.log`` then ``.rc`` beside it; return the status."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    log = site_dir.with_suffix(".log")
    log.write_text(result.stdout + result.stderr, encoding="utf-8")
    rc = site_dir.with_suffix(".rc")
    partial = rc.with_suffix(".rc.partial")
    partial.write_text(str(result.returncode), encoding="utf-8")
    partial.replace(rc)  # atomic: a reader sees no .rc or a complete one
    return result.returncode


if __name__ == "__main__":
    sys.exit(build(Path(sys.argv[1])))
