"""The package's house rules: no import circles, no borrowed private names, small files,
no override that changes a signature behind mypy's back, no call packed past the formatter.
The site's JavaScript (docs/assets/javascripts, ES modules) keeps the first and the third."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from support import REPO_ROOT

PACKAGE = REPO_ROOT / "src" / "attnlab"
HOOKS = REPO_ROOT / "hooks"
SITE_JS = REPO_ROOT / "docs" / "assets" / "javascripts"
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every ``from attnlab... import ...`` in the file, wherever it
    sits (function bodies included), relative imports resolved."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target == "attnlab" or target.startswith("attnlab."):
                found.append((target, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.startswith("attnlab")]
    return found


FILES = sorted(PACKAGE.rglob("*.py"))
MODULES = {_module_name(path): path for path in FILES}


def _resolve(target: str, names: list[str]) -> set[str]:
    """The package modules an import reads: ``from attnlab import ring`` reads attnlab.ring."""
    submodules = {f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES}
    return submodules or ({target} if target in MODULES else set())


def test_no_module_imports_another_modules_private_names() -> None:
    """What two modules share is public in the package (no leading underscore)."""
    borrowed = [
        f"{_module_name(path)} imports {name} from {target}"
        for path in FILES
        for target, names in _imports(path)
        for name in names
        if name.startswith("_") and target != _module_name(path)
    ]
    assert borrowed == []


def test_no_import_circles_between_modules() -> None:
    """Package modules import each other in one direction only (the ``__init__`` files,
    which re-export, aside), counting imports inside functions too."""
    graph = {
        name: {
            dep
            for target, names in _imports(path)
            for dep in _resolve(target, names)
            if dep != name and MODULES[dep].name != "__init__.py"
        }
        for name, path in MODULES.items()
        if path.name != "__init__.py"
    }

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for dep in graph.get(start, set()):
            if dep == goal or (dep not in seen and reaches(dep, goal, seen | {dep})):
                return True
        return False

    circles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if reaches(b, a, {b}))
    assert circles == []


# A static ES import or re-export at the start of a line (a JSDoc `import("...")` type,
# inside a comment, is no import): `import x from "./a.js"`, `import "./a.js"`,
# `export { y } from "./a.js"`, over several lines if need be.
ES_IMPORT = re.compile(
    r"^\s*(?:import\s*|(?:import|export)\b[^;'\"]*?\bfrom\s*)[\"']([^\"']+)[\"']", re.MULTILINE
)
JS_FILES = sorted(SITE_JS.rglob("*.js"))


def _js_imports(path: Path) -> set[Path]:
    """The site's modules that ``path`` imports (relative specifiers, resolved)."""
    text = path.read_text(encoding="utf-8")
    return {
        (path.parent / spec).resolve() for spec in ES_IMPORT.findall(text) if spec.startswith(".")
    }


def test_no_import_circles_between_the_sites_modules() -> None:
    """The site's ES modules import each other in one direction only."""
    graph = {path.resolve(): _js_imports(path) for path in JS_FILES}
    missing = sorted(f"{a.name} -> {b}" for a in graph for b in graph[a] if b not in graph)
    assert missing == []

    def reaches(start: Path, goal: Path, seen: set[Path]) -> bool:
        for dep in graph.get(start, set()):
            if dep == goal or (dep not in seen and reaches(dep, goal, seen | {dep})):
                return True
        return False

    circles = sorted(
        f"{a.relative_to(SITE_JS)} <-> {b.relative_to(SITE_JS)}"
        for a in graph
        for b in graph[a]
        if reaches(b, a, {b})
    )
    assert circles == []


def test_the_import_reading_sees_every_form(tmp_path: Path) -> None:
    """The reader above finds imports and re-exports, one line or several, and no JSDoc."""
    (tmp_path / "a.js").write_text(
        'import { x,\n  y } from "./b.js";\nimport "./c.js";\nexport { z } from "./d.js";\n'
        '/** @typedef {import("./e.js").T} T */\nexport const w = "./f.js";\n',
        encoding="utf-8",
    )
    found = {path.name for path in _js_imports(tmp_path / "a.js")}
    assert found == {"b.js", "c.js", "d.js"}


def test_no_source_file_is_over_600_lines() -> None:
    """Every file of the package, of the site's hooks and of its JavaScript fits in 600 lines."""
    long = {
        str(path.relative_to(REPO_ROOT)): n
        for path in [*FILES, *sorted(HOOKS.rglob("*.py")), *JS_FILES]
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def _lines_with(marker: str) -> list[str]:
    """``path:line`` of every line of the package that contains ``marker``."""
    return [
        f"{path.relative_to(REPO_ROOT)}:{n}"
        for path in FILES
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if marker in line
    ]


def test_no_override_hides_a_changed_signature() -> None:
    """No ``type: ignore[override]`` in the package: a layer changes seams, not the
    forward's signature or return type (the one skeleton, attnlab.AttentionHeads)."""
    assert _lines_with("type: ignore[override]") == []


def test_no_call_is_packed_by_hand_past_the_formatter() -> None:
    """No ``# fmt: skip`` in the package: a call with many settings passes one frozen
    object (AttentionCall, FlashCall) or names its arguments, and the formatter lays it out."""
    assert _lines_with("fmt: " + "skip") == []
