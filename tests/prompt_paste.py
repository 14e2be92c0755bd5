"""Run a docs block the way a reader pastes it at the Python prompt (imported as ``prompt_paste``).

The home page promises that a block pasted into Python prints the output shown under
it. pytest-codeblocks ``exec``s a block whole, as a script would; the interactive
``python`` prompt reads it line by line, where a blank line ends an indented block and
a statement straight after an indented block is a ``SyntaxError``. ``paste`` feeds a
block to ``code.InteractiveConsole``, the standard interactive interpreter, that way.

``tests/conftest.py`` calls ``use_the_prompt()``: pytest-codeblocks then runs every
``python`` block of the docs through ``paste`` instead of ``exec``, so the suite's one
run of each block is the reader's paste (no block runs twice). The echo of a bare
expression's value (``sys.displayhook``) is left out of the comparison, as the prompt's
own echo aside; what a block prints must equal its expected-output fence.
"""

from __future__ import annotations

import code
import contextlib
import functools
import io
import itertools
import re
import sys
import traceback
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_codeblocks import plugin as codeblocks

from hooks.page_blocks import page_blocks

_CONSOLES = itertools.count(1)


class Prompt(code.InteractiveConsole):
    """The standard console, keeping the first error instead of printing it.

    Its namespace is a module's, as the real prompt's is ``__main__``'s, under a name of
    its own per console: ``torch.compile`` imports a traced function's module by name
    to read its globals (and caches the import by name), so each paste registers its
    module in ``sys.modules`` while it runs (``paste``).
    """

    def __init__(self) -> None:
        self.module = types.ModuleType(f"__console_{next(_CONSOLES)}__")
        super().__init__(locals=self.module.__dict__, filename="<stdin>")
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
    """Feed ``body`` line by line to a fresh console, then Enter: what it printed, the error.

    Stops at the first error, as a reader would.
    """
    prompt = Prompt()
    printed = io.StringIO()
    name = prompt.module.__name__
    sys.modules[name] = prompt.module
    try:
        with contextlib.redirect_stdout(printed), _no_echo():
            for line in [*body.split("\n"), ""]:
                prompt.push(line)
                if prompt.error is not None:
                    break
    finally:
        del sys.modules[name]
    return printed.getvalue(), prompt.error


def same_output(expected: str, printed: str, ignore_whitespace: bool) -> bool:
    """pytest-codeblocks' comparison: exact, or with all whitespace removed."""
    if ignore_whitespace:
        return re.sub(r"\s+", "", expected) == re.sub(r"\s+", "", printed)
    return expected == printed


@functools.cache
def _bodies(path: Path) -> dict[int, str]:
    """Each python block of a page as the page shows it (blank lines kept), by fence line.

    pytest-codeblocks drops a blank line that lacks an indented fence's indentation;
    a reader copying the block from the page gets it, and at the prompt it matters.
    """
    text = path.read_text(encoding="utf-8")
    return {b.fence.start: b.body for b in page_blocks(text) if b.syntax == "python"}


_exec_runtest = codeblocks.TestBlock.runtest


def _paste_runtest(self: Any) -> None:
    """``TestBlock.runtest`` for ``python`` blocks: paste, then compare what was printed."""
    block = self.obj
    if block.syntax != "python":
        _exec_runtest(self)
        return
    if block.importorskip is not None:
        pytest.importorskip(block.importorskip)
    body = _bodies(Path(self.path)).get(block.lineno, block.code)
    printed, error = paste(body)
    if error is not None:
        raise RuntimeError(
            f"{self.name}: fails pasted line by line at the Python prompt:\n```\n{body}\n```\n\n"
            f"{error}"
        )
    expected = block.expected_output
    if expected is not None and not same_output(
        expected, printed, block.expected_output_ignore_whitespace
    ):
        raise RuntimeError(
            f"{self.name}, line {block.lineno}:\n```\nExpected output\n```\n{expected}```\n"
            f"but got\n```\n{printed}```"
        )


def use_the_prompt() -> None:
    """Make pytest-codeblocks run every ``python`` block through ``paste``."""
    codeblocks.TestBlock.runtest = _paste_runtest


def runs_at_the_prompt() -> bool:
    """Whether pytest-codeblocks' blocks run through ``paste`` in this process."""
    return codeblocks.TestBlock.runtest is _paste_runtest
