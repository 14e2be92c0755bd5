"""Fence lint: no code block in the docs or README may silently escape testing.

pytest-codeblocks (``--codeblocks``) only collects fences whose info string is exactly
``python``, ``sh`` or ``bash``; every other fence is ignored without a word. This lint
fails on fences that hold Python but would be ignored, on shell fences that would be
*executed*, on printed output that is not compared against an expected-output fence,
on an ``if __name__ == "__main__":`` guard (pytest-codeblocks runs each block under
another module name, so the guarded body would silently never run), and on the two
shapes that break when a block is pasted line by line at the standard Python prompt:
a blank line inside an indented block (the prompt ends the block there), and a statement
right after an indented block with no blank line between (a ``SyntaxError`` there).

The blocks are read by ``hooks/page_blocks.py``, which runs pytest-codeblocks' own
``extract_from_buffer``: the lint sees exactly the blocks the suite collects.
"""

from __future__ import annotations

import ast
import codeop
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import REPO_ROOT
from update_outputs import update_text

from hooks.page_blocks import OUTPUT_MARKER, PageBlock, page_blocks

PYTHON_ALIASES = {"py", "py3", "python2", "python3", "pycon", "pyi", "ipython", "ipython3"}
SHELLS = {"sh", "bash", "shell", "zsh"}
PRINT_CALL = re.compile(r"\bprint\(")


@dataclass(frozen=True)
class Problem:
    line: int
    message: str


def fence_language(info: str) -> str:
    """The language word of an info string: ``{ .python title="x" }`` gives ``python``."""
    words = info.strip().lstrip("{").split()
    return words[0].lstrip(".").lower().rstrip("}") if words else ""


def check_info_string(page_block: PageBlock) -> Problem | None:
    """Flag fences that hold Python or shell code but are not collected as intended."""
    info = page_block.syntax
    if info == "python":
        return None
    language = fence_language(info)
    line = page_block.fence.start
    if language in SHELLS:
        return Problem(line, f"`{info}` fence: pytest-codeblocks would execute it; use `console`")
    if language.startswith("python") or language in PYTHON_ALIASES:
        return Problem(
            line, f"`{info}` fence is skipped by pytest-codeblocks; write exactly `python`"
        )
    return None


def check_output(page_block: PageBlock) -> Problem | None:
    """A printing python block has an expected-output fence; no other block has one."""
    has_output = page_block.block.expected_output is not None
    if page_block.syntax != "python":
        if has_output:
            return Problem(
                page_block.marker or page_block.fence.start,
                "expected-output marker not preceded by a python block",
            )
        return None
    if PRINT_CALL.search(page_block.code) and not has_output:
        return Problem(
            page_block.fence.start,
            "python block prints but is not followed by "
            "<!--pytest-codeblocks:expected-output--> and an output fence",
        )
    return None


MAIN_GUARD = re.compile(
    r"""^\s*if\s+(?:__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__)""",
    re.MULTILINE,
)


def _is_main_guard(node: ast.AST) -> bool:
    """``if __name__ == "__main__":`` (either way round)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, *test.comparators]
    names = [side.id for side in sides if isinstance(side, ast.Name)]
    strings = [side.value for side in sides if isinstance(side, ast.Constant)]
    return names == ["__name__"] and strings == ["__main__"]


def check_main_guard(page_block: PageBlock) -> Problem | None:
    """A python block has no ``if __name__ == "__main__":`` guard: its body would not run."""
    if page_block.syntax != "python":
        return None
    try:
        found = any(_is_main_guard(node) for node in ast.walk(ast.parse(page_block.code)))
    except SyntaxError:  # the block fails when it runs; still flag a guard it shows
        found = MAIN_GUARD.search(page_block.code) is not None
    if not found:
        return None
    return Problem(
        page_block.fence.start,
        'python block has an `if __name__ == "__main__":` guard; pytest-codeblocks runs '
        "blocks under another module name, so its body would never run: drop the guard",
    )


def prompt_break(body: str) -> tuple[int, str] | None:
    """Where ``body``, pasted line by line at the Python prompt, fails to compile.

    Feeds the lines to ``codeop.compile_command`` exactly as ``code.InteractiveConsole``
    buffers them (a statement runs once it is complete; a blank line completes an
    indented block), then one blank line, as the user presses Enter at the end.
    Nothing is executed. Returns the 1-based line of the body that fails and the
    compiler's message, or ``None`` when every line compiles.
    """
    buffer: list[str] = []
    for number, line in enumerate([*body.split("\n"), ""], start=1):
        buffer.append(line)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SyntaxWarnings surface when the block runs
                compiled = codeop.compile_command("\n".join(buffer), "<stdin>", "single")
        except (SyntaxError, OverflowError, ValueError) as err:
            return number, str(getattr(err, "msg", err))
        if compiled is not None:
            buffer = []
    return None


def check_prompt_paste(page_block: PageBlock) -> Problem | None:
    """A python block pastes into the standard prompt: no blank line inside an indented
    block, a blank line after each indented block that a statement follows."""
    if page_block.syntax != "python":
        return None
    found = prompt_break(page_block.body)
    if found is None:
        return None
    number, message = found
    lines = page_block.body.split("\n")
    line, before = lines[number - 1], lines[number - 2] if number >= 2 else ""
    if line[:1].isspace() and not before.strip():
        why = "a blank line inside an indented block ends it at the Python prompt; remove it"
    elif before[:1].isspace() and not line[:1].isspace():
        why = (
            "a statement right after an indented block is a SyntaxError at the Python "
            "prompt; put a blank line before it"
        )
    else:
        why = f"pasted at the Python prompt this line fails: {message}"
    return Problem(page_block.fence.start + number, why)


def check_loose_lines(text: str, blocks: list[PageBlock]) -> list[Problem]:
    """``~~~`` fences (which pytest-codeblocks ignores) and markers with no output fence."""
    inside = {line for b in blocks for line in range(b.lines.start, b.lines.end + 1)}
    problems: list[Problem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if number in inside:
            continue
        if line.strip().startswith("~~~"):
            problems.append(
                Problem(number, "`~~~` fence: pytest-codeblocks ignores it; use ``` fences")
            )
        elif OUTPUT_MARKER.fullmatch(line.strip()):
            problems.append(Problem(number, "expected-output marker not followed by a fence"))
    return problems


def lint_markdown(text: str) -> list[Problem]:
    """All fence problems in one Markdown document, sorted by line."""
    try:
        blocks = page_blocks(text)
    except (RuntimeError, ValueError) as err:
        # pytest-codeblocks itself cannot read the page (or it joins blocks with `cont`).
        match = re.match(r"line (\d+): ", str(err))
        return [Problem(int(match[1]) if match else 0, f"unreadable: {err}")]
    problems = [p for p in map(check_info_string, blocks) if p is not None]
    problems += [p for p in map(check_output, blocks) if p is not None]
    problems += [p for p in map(check_main_guard, blocks) if p is not None]
    problems += [p for p in map(check_prompt_paste, blocks) if p is not None]
    problems += check_loose_lines(text, blocks)
    return sorted(problems, key=lambda p: p.line)


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
    "__name__ used, but no main guard": """
```python
# not `if __name__ == "__main__":`, which would never run here
module_name = __name__
if module_name == "attnlab":
    raise SystemExit("unexpected")
```
""",
    "pastes at the prompt: blank line after each indented block": """
```python
total = 0
for i in range(3):
    total += i

print(total)
```
<!--pytest-codeblocks:expected-output-->
```text
3
```
""",
    "pastes at the prompt: brackets and strings span lines": """
```python
values = [
    1,

    2,
]
text = \"\"\"two

paragraphs\"\"\"
if values:
    size = len(values)
else:
    size = 0
```
""",
    "pastes at the prompt: a class with no blank line inside": """
```python
class Box:
    def __init__(self) -> None:
        self.size = 1
    def area(self) -> int:
        return self.size**2

box = Box()
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
    "continued block": (
        "```python\nx = 1\n```\n<!--pytest-codeblocks:cont-->\n```python\nprint(x)\n```\n",
        "every block must run on its own",
    ),
    "marker after a text fence": (
        "```text\nhi\n```\n<!--pytest-codeblocks:expected-output-->\n```text\nhi\n```\n",
        "not preceded",
    ),
    "marker at the top": (
        "<!--pytest-codeblocks:expected-output-->\n```text\nhi\n```\n",
        "no previous code block",
    ),
    "two markers for one block": (
        "```python\nprint(1)\n```\n<!--pytest-codeblocks:expected-output-->\n```text\n1\n```\n"
        "<!--pytest-codeblocks:expected-output-->\n```text\n1\n```\n",
        "already has expected_output",
    ),
    "marker at the end": (
        "```python\nprint(1)\n```\n<!--pytest-codeblocks:expected-output-->\n",
        "not followed",
    ),
    "unterminated fence": ("```python\nx = 1\n", "end-of-file"),
    "main guard": ('```python\nif __name__ == "__main__":\n    x = 1\n```\n', "__main__"),
    "main guard, single quotes, reversed": (
        "```python\nif '__main__' == __name__:\n    x = 1\n```\n",
        "would never run",
    ),
    "main guard after a function": (
        '```python\ndef main() -> None:\n    pass\n\n\nif __name__ == "__main__":\n'
        "    main()\n```\n",
        "would never run",
    ),
    "main guard in a block that does not parse": (
        '```python\nx = (\nif __name__ == "__main__":\n    x = 1\n```\n',
        "would never run",
    ),
    "main guard inside an admonition": (
        '!!! note\n    ```python\n    if __name__ == "__main__":\n        x = 1\n    ```\n',
        "would never run",
    ),
    "statement right after a for body": (
        "```python\nfor i in range(2):\n    x = i\nprint(x)\n```\n"
        "<!--pytest-codeblocks:expected-output-->\n```text\n1\n```\n",
        "put a blank line before it",
    ),
    "statement right after a with body, in an admonition": (
        "!!! note\n    ```python\n    with open(__file__) as f:\n        x = 1\n"
        "    y = 2\n    ```\n",
        "put a blank line before it",
    ),
    "blank line between methods": (
        "```python\nclass A:\n    def f(self) -> None:\n        pass\n\n"
        "    def g(self) -> None:\n        pass\n```\n",
        "blank line inside an indented block",
    ),
    "blank line inside a function body": (
        "```python\ndef f() -> int:\n    x = 1\n\n    return x\n```\n",
        "blank line inside an indented block",
    ),
    "marker with no block after a python block": (
        "```python\nx = 1\n```\n\n<!--pytest-codeblocks:expected-output-->\n",
        "not followed",
    ),
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


def test_prompt_problems_name_the_line_that_breaks() -> None:
    """The reported line is the page line the prompt rejects, inside admonitions too."""
    markdown = "# T\n\n```python\nfor i in range(2):\n    x = i\nprint(x)\n```\n"
    assert [problem.line for problem in lint_markdown(markdown)] == [3, 6]  # print, prompt
    nested = "!!! note\n    ```python\n    class A:\n        x = 1\n\n        y = 2\n    ```\n"
    assert [problem.line for problem in lint_markdown(nested)] == [6]


def test_blocks_sit_where_page_blocks_says() -> None:
    """Every block's fence, marker and output lines hold what pytest-codeblocks extracted."""
    for path in markdown_files():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for page_block in page_blocks(text):
            opening = lines[page_block.fence.start - 1]
            assert opening == f"{page_block.indent}{'`' * page_block.ticks}{page_block.syntax}"
            assert lines[page_block.fence.end - 1].strip() == "`" * page_block.ticks
            shown = [line for line in page_block.body.split("\n") if line.strip()]
            assert shown == [line for line in page_block.code.split("\n") if line.strip()]
            if page_block.output is not None:
                assert page_block.marker is not None
                assert OUTPUT_MARKER.fullmatch(lines[page_block.marker - 1].strip())
                recorded = lines[page_block.output.start : page_block.output.end - 1]
                expected = page_block.block.expected_output
                assert [r.strip() for r in recorded] == [e.strip() for e in expected.splitlines()]


UPDATE_BEFORE = """# Page

```python
print(1 + 1)
```

!!! note
    ```python
    print("a\\n\\nb")
    ```
    <!--pytest-codeblocks:expected-output-->
    ```text
    stale
    ```

```python
x = 1
```
<!--pytest-codeblocks:expected-output-->
```text
printed once, no longer
```
<!--pytest.mark.skip(reason="not here")-->
```python
print(2)
```
<!--pytest-codeblocks:expected-output-->
```text
kept
```
"""

UPDATE_AFTER = """# Page

```python
print(1 + 1)
```
<!--pytest-codeblocks:expected-output-->
```text
2
```

!!! note
    ```python
    print("a\\n\\nb")
    ```
    <!--pytest-codeblocks:expected-output-->
    ```text
    a
\x20\x20\x20\x20
    b
    ```

```python
x = 1
```
<!--pytest.mark.skip(reason="not here")-->
```python
print(2)
```
<!--pytest-codeblocks:expected-output-->
```text
kept
```
"""


def test_update_outputs_records_what_blocks_print() -> None:
    """New outputs are added, stale ones replaced or dropped, skipped blocks left alone."""
    assert update_text(UPDATE_BEFORE) == UPDATE_AFTER
    assert lint_markdown(UPDATE_AFTER) == []
    assert update_text(UPDATE_AFTER) == UPDATE_AFTER
