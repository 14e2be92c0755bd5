"""The axe-core engine every accessibility check of the browser tests runs.

axe-core 4.14.1, vendored in ``vendor/axe-core/`` (why, and how to update it: its
README). The file is checked against the hash axe-core publishes for it before any
page runs it. ``run_axe`` puts it into a page once per page load (the script is over
half a megabyte: parsing it again before every run cost a tenth of a second each
time) and runs it there.
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
def axe_source() -> str:
    """The text of the vendored ``axe.min.js``, once its hash is checked."""
    found = integrity(AXE_MIN_JS)
    if found != INTEGRITY:
        raise RuntimeError(f"{AXE_MIN_JS} is not axe-core {VERSION}: {found} != {INTEGRITY}")
    return AXE_MIN_JS.read_text(encoding="utf-8")


def ensure_axe(page: Any) -> None:
    """Put axe-core into ``page`` (a Playwright page) unless this page load has it."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source())


def run_axe(
    page: Any,
    rules: tuple[str, ...] = (),
    context: Any = None,
) -> list[dict[str, Any]]:
    """axe-core's violations on ``page``: the given ``rules`` (all by default), on
    ``context`` (axe's include/exclude; the whole document by default)."""
    ensure_axe(page)
    options: dict[str, Any] = {"resultTypes": ["violations"]}
    if rules:
        options["runOnly"] = {"type": "rule", "values": list(rules)}
    violations: list[dict[str, Any]] = page.evaluate(
        "([context, options]) => axe.run(context ?? document, options)"
        ".then((results) => results.violations)",
        [context, options],
    )
    return violations
