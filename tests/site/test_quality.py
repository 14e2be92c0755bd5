"""Static quality gates: ruff lint and strict mypy (configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import REPO_ROOT

LINTED = [name for name in ("src", "tests", "hooks", "scripts") if (REPO_ROOT / name).exists()]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_ruff_check() -> None:
    result = _run("ruff", "check", *LINTED)
    if result.returncode != 0:
        pytest.fail(f"ruff check failed:\n{result.stdout}{result.stderr}", pytrace=False)


@pytest.mark.long
def test_mypy_strict() -> None:
    result = _run("mypy")  # files and `strict = true` come from [tool.mypy]
    if result.returncode != 0:
        pytest.fail(f"mypy failed:\n{result.stdout}{result.stderr}", pytrace=False)
