"""Every python block on the site, pasted at the Python prompt, prints what the page says.

The home page promises that a block pasted into Python prints the output shown under
it. The suite's block runner (pytest-codeblocks) ``exec``s each block whole, as a
script would; this test feeds each block line by line to ``code.InteractiveConsole``,
the standard interactive interpreter, as a reader pasting it at the ``>>>`` prompt
(there a blank line ends an indented block, and a statement straight after an indented
block is a ``SyntaxError``). Each block gets a fresh console (fresh globals), as on a new
prompt. The echo of a bare expression's value (``sys.displayhook``) is left out, as the
issue asks: the comparison is with what the block prints.

The fence lint (``test_docs_fences.py``) refuses the two shapes that break at the
prompt without running anything; this test proves the whole paste, output included.
It runs every block a second time, so each page is one test, scheduled on the worker
that runs that page's blocks (``SHARED_WORK`` in ``tests/conftest.py``): a page that
loads the real model or trains the recall model finds it already in that process.
"""

from __future__ import annotations

import code
import contextlib
import io
import re
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import REPO_ROOT, hooks_importable

hooks_importable()
from page_blocks import PageBlock, page_blocks  # noqa: E402


class Prompt(code.InteractiveConsole):
    """The standard console, keeping the first error instead of printing it."""

    def __init__(self) -> None:
        super().__init__(locals={"__name__": "__console__", "__doc__": None}, filename="<stdin>")
        self.error: str | None = None

    def showtraceback(self) -> None:
        self.error = self.error or traceback.format_exc()

    def showsyntaxerror(self, filename: str | None = None, **kwargs: Any) -> None:
        self.error = self.error or traceback.format_exc()


@contextlib.contextmanager
def _no_echo() -> Iterator[None]:
    """The prompt's echo of bare expression values switched off."""
    saved = sys.displayhook
    sys.displayhook = lambda value: None
    try:
        yield
    finally:
        sys.displayhook = saved


def paste(body: str) -> tuple[str, str | None]:
    """Feed ``body`` line by line to a fresh console, then Enter; what it printed, the error.

    Stops at the first error, as a reader would.
    """
    prompt = Prompt()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), _no_echo():
        for line in [*body.split("\n"), ""]:
            prompt.push(line)
            if prompt.error is not None:
                break
    return printed.getvalue(), prompt.error


def _skipped(page_block: PageBlock) -> bool:
    """Whether pytest-codeblocks skips the block here (its marks, its importorskip)."""
    block = page_block.block
    if block.importorskip is not None:
        try:
            __import__(block.importorskip)
        except ImportError:
            return True
    for text in block.marks:
        mark = eval(text, {"sys": sys, "pytest": pytest}).mark  # as pytest-codeblocks does
        if mark.name == "skip" or (mark.name == "skipif" and bool(mark.args[0])):
            return True
    return False


def _same(expected: str, printed: str, ignore_whitespace: bool) -> bool:
    if ignore_whitespace:
        return re.sub(r"\s+", "", expected) == re.sub(r"\s+", "", printed)
    return expected == printed


def _python_blocks(path: Path) -> list[PageBlock]:
    return [b for b in page_blocks(path.read_text(encoding="utf-8")) if b.syntax == "python"]


def _shared_work(config: pytest.Config) -> dict[str, str]:
    """``GROUP_OF_FILE`` of ``tests/conftest.py``: a page -> its worker group.

    Read from the registered conftest module (several ``conftest`` modules share that
    name, so importing it by name could find another one).
    """
    root_conftest = REPO_ROOT / "tests" / "conftest.py"
    for plugin in config.pluginmanager.get_plugins():
        if Path(str(getattr(plugin, "__file__", ""))).resolve() == root_conftest:
            groups: dict[str, str] = plugin.GROUP_OF_FILE
            return groups
    return {}


def _pages(groups: dict[str, str]) -> list[Any]:
    """Every page with a python block, in its block runner's worker group if it has one."""
    paths = [*sorted((REPO_ROOT / "docs").rglob("*.md")), REPO_ROOT / "README.md"]
    params = []
    for path in paths:
        if not _python_blocks(path):
            continue
        name = path.relative_to(REPO_ROOT).as_posix()
        group = groups.get(name)
        # a page with costly shared work runs early, beside the site build, on its group's worker
        marks = [pytest.mark.xdist_group(group), pytest.mark.long] if group else []
        params.append(pytest.param(path, id=name, marks=marks))
    return params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One ``test_every_block_pastes_at_the_prompt`` per page."""
    if metafunc.function.__name__ == "test_every_block_pastes_at_the_prompt":
        metafunc.parametrize("path", _pages(_shared_work(metafunc.config)))


def test_paste_reports_what_the_prompt_rejects() -> None:
    """The console in this test fails where the real prompt does (it can fail)."""
    printed, error = paste("for i in range(2):\n    x = i\nprint(x)")
    assert error is not None and "SyntaxError" in error
    printed, error = paste("class A:\n    x = 1\n\n    y = 2")
    assert error is not None and "IndentationError" in error
    printed, error = paste("total = 0\nfor i in range(3):\n    total += i\n\nprint(total)\ntotal")
    assert (printed, error) == ("3\n", None)  # the bare `total` is not echoed


def test_every_block_pastes_at_the_prompt(path: Path) -> None:
    """Each block, pasted line by line, runs without error and prints its expected output."""
    failures = []
    for page_block in _python_blocks(path):
        if _skipped(page_block):
            continue
        printed, error = paste(page_block.body)
        where = f"line {page_block.fence.start}"
        if error is not None:
            failures.append(f"{where}: fails at the prompt:\n{error}")
            continue
        expected = page_block.block.expected_output
        ignore_whitespace = page_block.block.expected_output_ignore_whitespace
        if expected is not None and not _same(expected, printed, ignore_whitespace):
            failures.append(f"{where}: printed\n{printed}instead of\n{expected}")
    assert not failures, "\n".join(failures)
