"""The package says a thing once: its docstrings stay a fraction of its code (issue 35.5)."""

from __future__ import annotations

import ast
from pathlib import Path

from support import REPO_ROOT

SOURCE = REPO_ROOT / "src"
MAX_DOC_RATIO = 0.45


def doc_and_code_lines(path: Path) -> tuple[int, int]:
    """Non-blank docstring lines (every string-expression statement: module, class and
    function docstrings and attribute docstrings) and non-blank, non-comment code lines."""
    text = path.read_text(encoding="utf-8")
    docstring_lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docstring_lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    doc = code = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if number in docstring_lines:
            doc += 1
        elif not line.strip().startswith("#"):
            code += 1
    return doc, code


def test_docstrings_are_at_most_45_percent_of_the_code() -> None:
    """Conventions live in the package docstring and the Notation page, not in every
    module; docstrings say what names and types do not."""
    counts = {path: doc_and_code_lines(path) for path in sorted(SOURCE.rglob("*.py"))}
    doc = sum(d for d, _ in counts.values())
    code = sum(c for _, c in counts.values())
    worst = sorted(counts.items(), key=lambda item: -item[1][0] / max(item[1][1], 1))[:5]
    report = ", ".join(f"{p.relative_to(SOURCE)} {d}/{c}" for p, (d, c) in worst)
    assert doc / code <= MAX_DOC_RATIO, f"{doc} docstring lines / {code} code lines; {report}"


def test_the_counting_sees_docstrings_and_skips_comments(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text('"""One.\n\nTwo."""\n\n# a comment\nx = 1\n"""x\'s docstring."""\n')
    assert doc_and_code_lines(path) == (3, 1)  # the blank docstring line is not counted
