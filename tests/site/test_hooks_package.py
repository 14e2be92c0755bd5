"""hooks/ is a package, `hooks`, installed editable: imported with no sys.path edit."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib

from support import HOOKS, REPO_ROOT, mkdocs_hooks

# An insert, append or extend call on sys.path, `+=` on it, or an assignment to a slice.
SYS_PATH_EDIT = re.compile(r"sys\.path\s*(?:\.\s*(?:insert|append|extend)\s*\(|\+=|\[)")


def test_no_file_of_the_tooling_edits_sys_path() -> None:
    files = [
        path
        for folder in ("hooks", "scripts", "tests")
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
    ]
    assert len(files) > 50
    edits = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SYS_PATH_EDIT.search(line)
    ]
    assert edits == []


def test_hooks_import_from_the_environment_alone() -> None:
    """From a directory that is not the checkout, with no PYTHONPATH: the installed package."""
    code = "import hooks.figure_registry as r, hooks.page_blocks; print(r.__file__)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT.parent,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(HOOKS / "figure_registry.py")


def test_the_hooks_import_each_other_as_the_package_never_an_entry_file() -> None:
    """MkDocs loads each entry file by path under its stem (`figures`); were any module to
    import it as `hooks.figures` too, it would run twice with two states. So modules
    share state only through `hooks.<module>`, and nothing imports an entry file."""
    entries = {path.stem for path in mkdocs_hooks()}
    assert {"figures", "roadmap"} <= entries
    siblings = {path.stem for path in HOOKS.glob("*.py")}
    for path in sorted(HOOKS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
                if node.module == "hooks":
                    names = [f"hooks.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                top, _, rest = name.partition(".")
                assert top not in siblings, f"{path.name}: `{name}`, not `hooks.{name}`"
                if top == "hooks":
                    assert rest not in entries, f"{path.name} imports the entry file {rest}"


def test_the_published_wheel_leaves_the_hooks_out() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["tool"]["setuptools"]["packages"]["find"]["where"] == ["src"]
    hooks_project = tomllib.loads((HOOKS / "pyproject.toml").read_text(encoding="utf-8"))
    assert hooks_project["tool"]["setuptools"]["package-dir"] == {"hooks": "."}
    assert hooks_project["project"]["name"] != project["project"]["name"]
