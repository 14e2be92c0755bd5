"""The site's JavaScript passes its checks: TypeScript's over the JSDoc types, and eslint.

No build step: tsc only checks (``noEmit``; tsconfig.json for the site, and
tsconfig.tests.json for the Node tests in tests/js, with Node's types) and eslint lints
(eslint.config.js); both are pinned in package.json and installed by ``npm ci``
(scripts/install.py's test level). ``make lint`` runs the same two commands.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import REPO_ROOT, node_or_skip

MODULES = REPO_ROOT / "node_modules"
# Both remember what they checked (tsconfig.json's `incremental`, which tsconfig.tests.json
# extends; eslint's cache, by file content), in node_modules/.cache: a second run checks
# only what changed.
ESLINT_CACHE = [
    "--cache",
    "--cache-strategy",
    "content",
    "--cache-location",
    "node_modules/.cache/eslint/",
]
TSC = MODULES / "typescript" / "bin" / "tsc"
TOOLS = {
    "tsc": (TSC, ["--noEmit", "-p", "tsconfig.json"]),
    "tsc-tests": (TSC, ["--noEmit", "-p", "tsconfig.tests.json"]),  # with Node's types
    "eslint": (
        MODULES / "eslint" / "bin" / "eslint.js",
        [*ESLINT_CACHE, "docs/assets/javascripts", "tests/js"],
    ),
}


def run_tool(name: str) -> subprocess.CompletedProcess[str]:
    """Run one pinned tool from node_modules on the repository, as `make lint` does."""
    script, arguments = TOOLS[name]
    if not script.is_file():
        pytest.fail(f"{script.relative_to(REPO_ROOT)} is missing: run `npm ci` (make setup does)")
    return subprocess.run(
        [node_or_skip(), str(script), *arguments],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_the_sites_javascript_has_no_findings(name: str) -> None:
    """tsc (strict, over the JSDoc types: the site, and the Node tests) and eslint report
    nothing."""
    result = run_tool(name)
    assert result.returncode == 0, f"{name} found:\n{result.stdout}{result.stderr}"


def test_every_site_module_asks_for_type_checks() -> None:
    """Each file under docs/assets/javascripts starts with ``// @ts-check``, as the
    conventions say (tsconfig checks them all anyway; the line says so to an editor)."""
    missing = [
        str(path.relative_to(REPO_ROOT))
        for path in sorted(Path(REPO_ROOT / "docs" / "assets" / "javascripts").rglob("*.js"))
        if not path.read_text(encoding="utf-8").startswith("// @ts-check\n")
    ]
    assert missing == []
