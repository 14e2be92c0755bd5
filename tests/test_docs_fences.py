"""Fence lint: no code block in the docs or README may silently escape testing.

pytest-codeblocks (``--codeblocks``) only collects fences whose info string is exactly
``python``, ``sh`` or ``bash``; every other fence is ignored without a word. This lint
fails on fences that hold Python but would be ignored, on shell fences that would be
*executed*, and on printed output that is not compared against an expected-output fence.

The scanner mirrors ``pytest_codeblocks.main.extract_from_buffer``: a fence line is one
whose left-stripped text starts with backticks (so fences indented inside admonitions
and content tabs count), and it closes at the next line that starts with as many.
"""

from __future__ import annotations

import io
import itertools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_codeblocks.main import extract_from_buffer

REPO_ROOT = Path(__file__).resolve().parent.parent  # same as conftest.REPO_ROOT

MARKER = re.compile(r"<!--[-\s]*pytest-codeblocks:(.*)-->")
EXPECTED_OUTPUT = {"expected-output", "expected-output-ignore-whitespace"}
PYTHON_ALIASES = {"py", "py3", "python2", "python3", "pycon", "pyi", "ipython", "ipython3"}
SHELLS = {"sh", "bash", "shell", "zsh"}
PRINT_CALL = re.compile(r"\bprint\(")


@dataclass(frozen=True)
class Fence:
    """A fenced code block; ``info`` is the raw info string after the backticks."""

    line: int
    info: str
    code: str


@dataclass(frozen=True)
class Marker:
    """A ``<!--pytest-codeblocks:KEYWORD-->`` comment on a line of its own."""

    line: int
    keyword: str


@dataclass(frozen=True)
class Problem:
    line: int
    message: str


def scan(text: str) -> tuple[list[Fence | Marker], list[Problem]]:
    """Split Markdown into fences and markers, as pytest-codeblocks reads them."""
    items: list[Fence | Marker] = []
    problems: list[Problem] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        lineno = i + 1
        i += 1
        marker = MARKER.fullmatch(stripped)
        if marker:
            items.append(Marker(lineno, marker.group(1).strip("- ")))
        elif stripped.startswith("~~~"):
            problems.append(
                Problem(lineno, "`~~~` fence: pytest-codeblocks ignores it; use ``` fences")
            )
        elif stripped.startswith("```"):
            ticks = len(stripped) - len(stripped.lstrip("`"))
            info = stripped[ticks:]
            body: list[str] = []
            while i < len(lines) and not lines[i].lstrip().startswith("`" * ticks):
                body.append(lines[i])
                i += 1
            if i == len(lines):
                problems.append(Problem(lineno, "unterminated fence"))
            i += 1
            items.append(Fence(lineno, info, "\n".join(body)))
    return items, problems


def fence_language(info: str) -> str:
    """The language word of an info string: ``{ .python title="x" }`` gives ``python``."""
    words = info.strip().lstrip("{").split()
    return words[0].lstrip(".").lower().rstrip("}") if words else ""


def check_info_string(fence: Fence) -> Problem | None:
    """Flag fences that hold Python or shell code but are not collected as intended."""
    if fence.info == "python":
        return None
    language = fence_language(fence.info)
    if language in SHELLS:
        return Problem(
            fence.line,
            f"`{fence.info}` fence: pytest-codeblocks would execute it; use `console`",
        )
    if language.startswith("python") or language in PYTHON_ALIASES:
        return Problem(
            fence.line,
            f"`{fence.info}` fence is skipped by pytest-codeblocks; write exactly `python`",
        )
    return None


def check_outputs(items: list[Fence | Marker]) -> list[Problem]:
    """Every printing python block has an expected-output fence, and only they do."""
    problems: list[Problem] = []
    block: Fence | None = None  # the block an expected-output marker would attach to
    prints = False  # whether `block` (with its continuations) calls print()
    has_output = False
    pending: Marker | None = None  # a marker waiting for its fence

    def close_block() -> None:
        if block is not None and prints and not has_output:
            problems.append(
                Problem(
                    block.line,
                    "python block prints but is not followed by "
                    "<!--pytest-codeblocks:expected-output--> and an output fence",
                )
            )

    for item in items:
        if isinstance(item, Marker):
            if item.keyword in EXPECTED_OUTPUT:
                if block is None or block.info != "python" or has_output:
                    problems.append(
                        Problem(item.line, "expected-output marker not preceded by a python block")
                    )
                pending = item
            elif item.keyword == "cont":
                pending = item
            continue
        if pending is not None and pending.keyword in EXPECTED_OUTPUT:
            has_output = True
        elif pending is not None and pending.keyword == "cont":
            prints = prints or bool(PRINT_CALL.search(item.code))
        else:
            close_block()
            block = item
            prints = item.info == "python" and bool(PRINT_CALL.search(item.code))
            has_output = False
        pending = None
    if pending is not None:
        problems.append(Problem(pending.line, "pytest-codeblocks marker not followed by a fence"))
    close_block()
    return problems


def lint_markdown(text: str) -> list[Problem]:
    """All fence problems in one Markdown document, sorted by line."""
    items, problems = scan(text)
    problems += [p for p in map(check_info_string, _fences(items)) if p is not None]
    problems += check_outputs(items)
    return sorted(problems, key=lambda p: p.line)


def _fences(items: list[Fence | Marker]) -> list[Fence]:
    return [item for item in items if isinstance(item, Fence)]


def markdown_files() -> list[Path]:
    files = sorted((REPO_ROOT / "docs").rglob("*.md"))
    readme = REPO_ROOT / "README.md"
    return [*files, readme] if readme.exists() else files


# --- the lint itself ---------------------------------------------------------------


def test_docs_and_readme_fences_are_tested() -> None:
    report = [
        f"{path.relative_to(REPO_ROOT)}:{problem.line}: {problem.message}"
        for path in markdown_files()
        for problem in lint_markdown(path.read_text(encoding="utf-8"))
    ]
    assert not report, "fence lint failed:\n" + "\n".join(report)


def test_lint_scans_the_docs() -> None:
    assert (REPO_ROOT / "docs" / "index.md") in markdown_files()


# --- the lint's own tests, on synthetic Markdown --------------------------------------

GOOD = {
    "plain python with checked output": """
```python
print(1 + 1)
```
<!--pytest-codeblocks:expected-output-->
```text
2
```
""",
    "output fence with a title, blank lines between": """
```python
print("hi")
```

<!--pytest-codeblocks:expected-output-->

```text title="Output"
hi
```
""",
    "python that prints nothing": """
```python
x = 1 + 1
```
""",
    "console and text fences": """
```console
$ make test
```

```text
(B, T, d_out)
```
""",
    "indented inside an admonition and tabs": """
??? success "Solution"
    ```python
    print(3)
    ```
    <!--pytest-codeblocks:expected-output-->
    ```text
    3
    ```

=== "Loop"

    ```python
    total = sum(range(4))
    ```
""",
    "four backticks around a markdown example": """
````markdown
```py
print(1)
```
````
""",
    "continued block": """
```python
x = 2
```
<!--pytest-codeblocks:cont-->
```python
print(x)
```
<!--pytest-codeblocks:expected-output-->
```text
2
```
""",
    "ignore-whitespace output": """
```python
print( 1 )
```
<!--pytest-codeblocks:expected-output-ignore-whitespace-->
```text
1
```
""",
}

BAD = {
    "py": ("```py\nx = 1\n```\n", "skipped"),
    "python3": ("```python3\nx = 1\n```\n", "skipped"),
    "pycon": ("```pycon\n>>> 1\n1\n```\n", "skipped"),
    "attr python": ("```{.python}\nx = 1\n```\n", "skipped"),
    "spaced attr python": ("``` { .python }\nx = 1\n```\n", "skipped"),
    "space before python": ("``` python\nx = 1\n```\n", "skipped"),
    "python title": ('```python title="demo.py"\nx = 1\n```\n', "skipped"),
    "python hl_lines": ('```python hl_lines="1"\nx = 1\n```\n', "skipped"),
    "python linenums": ('```python linenums="1"\nx = 1\n```\n', "skipped"),
    "tilde fence": ("~~~python\nx = 1\n~~~\n", "`~~~` fence"),
    "tilde text fence": ("~~~\nplain\n~~~\n", "`~~~` fence"),
    "sh": ("```sh\nls\n```\n", "execute"),
    "bash": ("```bash\nls\n```\n", "execute"),
    "shell": ("```shell\nls\n```\n", "execute"),
    "zsh": ("```zsh\nls\n```\n", "execute"),
    "print without output": ("```python\nprint(1)\n```\n", "prints but"),
    "print, then an unmarked text fence": (
        "```python\nprint(1)\n```\n\n```text\n1\n```\n",
        "prints but",
    ),
    "print inside an admonition": (
        "!!! note\n    ```python\n    print(1)\n    ```\n",
        "prints but",
    ),
    "print in a continuation": (
        "```python\nx = 1\n```\n<!--pytest-codeblocks:cont-->\n```python\nprint(x)\n```\n",
        "prints but",
    ),
    "marker after a text fence": (
        "```text\nhi\n```\n<!--pytest-codeblocks:expected-output-->\n```text\nhi\n```\n",
        "not preceded",
    ),
    "marker at the top": (
        "<!--pytest-codeblocks:expected-output-->\n```text\nhi\n```\n",
        "not preceded",
    ),
    "two markers for one block": (
        "```python\nprint(1)\n```\n<!--pytest-codeblocks:expected-output-->\n```text\n1\n```\n"
        "<!--pytest-codeblocks:expected-output-->\n```text\n1\n```\n",
        "not preceded",
    ),
    "marker at the end": (
        "```python\nprint(1)\n```\n<!--pytest-codeblocks:expected-output-->\n",
        "not followed",
    ),
    "unterminated fence": ("```python\nx = 1\n", "unterminated"),
}


@pytest.mark.parametrize("markdown", GOOD.values(), ids=GOOD.keys())
def test_lint_accepts(markdown: str) -> None:
    assert lint_markdown(markdown) == []


@pytest.mark.parametrize(("markdown", "expected"), BAD.values(), ids=BAD.keys())
def test_lint_rejects(markdown: str, expected: str) -> None:
    problems = lint_markdown(markdown)
    assert problems, "lint missed it"
    assert any(expected in p.message for p in problems), problems


def test_lint_reports_line_numbers() -> None:
    markdown = "# Title\n\ntext\n\n```py\nx = 1\n```\n"
    assert [problem.line for problem in lint_markdown(markdown)] == [5]


def test_scanner_agrees_with_pytest_codeblocks() -> None:
    """The python blocks we see are the ones pytest-codeblocks collects, at the same lines."""
    markdown = "\n\n".join([*GOOD.values(), BAD["py"][0], BAD["bash"][0]])
    theirs = [
        (block.lineno, block.syntax, block.expected_output is not None)
        for block in extract_from_buffer(io.StringIO(markdown))
        if block.syntax in {"python", "sh", "bash"}
    ]
    items, _ = scan(markdown)
    # Fences right after a `cont` or expected-output marker are not blocks of their own.
    absorbed = {
        after.line
        for before, after in itertools.pairwise(items)
        if isinstance(before, Marker)
        and (before.keyword == "cont" or before.keyword in EXPECTED_OUTPUT)
    }
    ours = [
        (f.line, f.info)
        for f in _fences(items)
        if f.info in {"python", "sh", "bash"} and f.line not in absorbed
    ]
    assert [(line, syntax) for line, syntax, _ in theirs] == ours
