"""The axe-core engine every accessibility check of the browser tests runs.

axe-core 4.14.1, vendored in ``vendor/axe-core/`` (why, and how to update it: its
README), driven by ``axe_playwright_python``. The file is checked against the hash
axe-core publishes for it before anything runs it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from pathlib import Path
from typing import Any

AXE_MIN_JS = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
VERSION = "4.14.1"
# From axe-core's own sri-history.json, for axe.min.js of this version.
INTEGRITY = "sha256-KTSJmUUM3yhJqOcLeRL8LahahJ2jnA0NU5T1HUqe2Vw="


def integrity(path: Path) -> str:
    """The subresource-integrity string (sha256) of a file."""
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


@functools.cache
def load_axe() -> Any:
    """An ``axe_playwright_python`` runner of the vendored axe-core, after checking the
    file's hash (imported here, not at collection: without Playwright the browser tests
    skip, or fail under ``CI=true``, through the ``browser`` fixture)."""
    from axe_playwright_python.sync_playwright import Axe

    found = integrity(AXE_MIN_JS)
    if found != INTEGRITY:
        raise RuntimeError(f"{AXE_MIN_JS} is not axe-core {VERSION}: {found} != {INTEGRITY}")
    return Axe(axe_script=AXE_MIN_JS.read_text(encoding="utf-8"))
