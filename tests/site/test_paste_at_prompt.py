"""Every python block on the site, pasted at the Python prompt, prints what the page says.

The suite runs each block of ``docs/`` and ``README.md`` once, and that run is the
paste: ``tests/conftest.py`` switches pytest-codeblocks' runner to
``prompt_paste.paste`` (``tests/prompt_paste.py``), which feeds the block line by line
to ``code.InteractiveConsole``, the standard interactive interpreter (Python 3.11 here,
the oldest the project supports), and compares what it printed with the block's
expected output, the echo of bare expression values aside. A block that works as a
script but not at the prompt fails where it is collected (``docs/<page>.md::line N``).

This file checks that runner: that it is the one in use, that it fails where the prompt
fails, and that it compares the output. The fence lint (``test_docs_fences.py``) refuses
the shapes that break at the prompt without running anything.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from prompt_paste import _paste_runtest, paste, runs_at_the_prompt
from pytest_codeblocks.main import extract_from_buffer


def test_pytest_codeblocks_runs_every_python_block_at_the_prompt() -> None:
    """The suite's block runner is the paste (set up by tests/conftest.py)."""
    assert runs_at_the_prompt()


def test_paste_fails_where_the_prompt_does() -> None:
    """A statement right after a for body, a blank line in a class body: both break."""
    printed, error = paste("for i in range(2):\n    x = i\nprint(x)")
    assert error is not None and "SyntaxError" in error
    printed, error = paste("class A:\n    x = 1\n\n    y = 2")
    assert error is not None and "IndentationError" in error
    printed, error = paste("print(1)\nraise ValueError('late')\nprint(2)")
    assert printed == "1\n" and error is not None and "ValueError: late" in error


def test_paste_prints_what_the_block_prints_not_the_echo() -> None:
    printed, error = paste("total = 0\nfor i in range(3):\n    total += i\n\nprint(total)\ntotal")
    assert (printed, error) == ("3\n", None)  # the bare `total` is not echoed


def test_the_prompts_namespace_is_an_importable_module_while_it_runs() -> None:
    """As the real prompt's ``__main__``: torch.compile imports a function's module by name."""
    block = "import importlib\nprint(importlib.import_module(__name__).__dict__ is globals())"
    first, second = paste(block), paste(block)
    assert first == second == ("True\n", None)
    printed, error = paste("import sys\nname = __name__\nprint(name in sys.modules)")
    assert (printed, error) == ("True\n", None)
    assert not [name for name in sys.modules if name.startswith("__console")]


def _block_item(tmp_path: Path, markdown: str) -> SimpleNamespace:
    """A stand-in for pytest-codeblocks' item of the first block of a page."""
    page = tmp_path / "page.md"
    page.write_text(markdown, encoding="utf-8")
    with page.open(encoding="utf-8") as handle:
        block = extract_from_buffer(handle)[0]
    return SimpleNamespace(obj=block, path=page, name=f"line {block.lineno}")


OUTPUT = "<!--pytest-codeblocks:expected-output-->\n```text\n{}\n```\n"


def test_runner_passes_a_block_that_pastes_and_prints_its_output(tmp_path: Path) -> None:
    item = _block_item(
        tmp_path, "```python\nfor i in range(2):\n    x = i\n\nprint(x)\n```\n" + OUTPUT.format(1)
    )
    _paste_runtest(item)


def test_runner_fails_a_block_that_breaks_at_the_prompt(tmp_path: Path) -> None:
    item = _block_item(
        tmp_path, "```python\nfor i in range(2):\n    x = i\nprint(x)\n```\n" + OUTPUT.format(1)
    )
    with pytest.raises(RuntimeError, match="fails pasted line by line at the Python prompt"):
        _paste_runtest(item)


def test_runner_fails_on_other_output(tmp_path: Path) -> None:
    item = _block_item(tmp_path, "```python\nprint(2)\n```\n" + OUTPUT.format(1))
    with pytest.raises(RuntimeError, match="but got"):
        _paste_runtest(item)


def test_runner_keeps_the_blank_lines_an_indented_fence_shows(tmp_path: Path) -> None:
    """pytest-codeblocks drops an unindented blank line inside an admonition's fence;
    the page shows it, a reader pastes it, and the prompt needs it."""
    markdown = (
        "!!! note\n    ```python\n    for i in range(2):\n        x = i\n\n    print(x)\n"
        "    ```\n    " + OUTPUT.format(1).replace("\n", "\n    ").rstrip() + "\n"
    )
    item = _block_item(tmp_path, markdown)
    assert "\n\n" not in item.obj.code  # what pytest-codeblocks would have run
    _paste_runtest(item)
