"""The fenced blocks of a Markdown page as pytest-codeblocks reads them, with their lines.

One parser for all the docs tooling: the chapter-notebook hook
(``hooks/chapter_notebooks.py``), the output recorder (``scripts/update_outputs.py``)
and the fence lint (``tests/site/test_docs_fences.py``) read pages through
[`page_blocks`][], which runs ``pytest_codeblocks.main.extract_from_buffer`` (the very
code that collects the blocks the test suite executes) and adds where each block, its
expected-output marker and its output fence sit in the page.

This module is not a MkDocs hook itself (``mkdocs.yml`` does not list it); the hooks,
the script and the tests import it as ``hooks.page_blocks`` (``hooks/__init__.py``).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from pytest_codeblocks.main import CodeBlock, extract_from_buffer

OUTPUT_MARKER = re.compile(r"<!--[-\s]*pytest-codeblocks:expected-output(?:-ignore-whitespace)?-->")
CONT_MARKER = re.compile(r"<!--[-\s]*pytest-codeblocks:cont[-\s]*-->")


@dataclass(frozen=True)
class Span:
    """Lines ``start`` to ``end`` of a page, 1-based and inclusive."""

    start: int
    end: int

    def __contains__(self, line: object) -> bool:
        return isinstance(line, int) and self.start <= line <= self.end


@dataclass(frozen=True)
class PageBlock:
    """One fenced block of a page.

    Attributes:
        block: What pytest-codeblocks collected: code (dedented), syntax (the info
            string after the backticks), expected output and marks.
        fence: The opening fence line to the closing fence line.
        indent: The whitespace before the opening fence.
        body: The lines between the fences as the page shows them, dedented like
            ``block.code`` but keeping every blank line (pytest-codeblocks drops a blank
            line that lacks the fence's indentation).
        ticks: How many backticks open (and close) the fence.
        marker: The line of its expected-output marker, if it has one.
        output: The lines of its expected-output fence, if it has one.
    """

    block: CodeBlock
    fence: Span
    indent: str
    body: str
    ticks: int
    marker: int | None = None
    output: Span | None = None

    @property
    def syntax(self) -> str:
        """The fence's info string (``python``, ``text``, ``console``, ...)."""
        return self.block.syntax or ""

    @property
    def code(self) -> str:
        """The block's body as pytest-codeblocks runs it (dedented by the fence's indent)."""
        code: str = self.block.code
        return code

    @property
    def lines(self) -> Span:
        """Every line the block occupies: its fence, marker and output fence."""
        return Span(self.fence.start, self.output.end if self.output else self.fence.end)


def _closing_line(lines: list[str], opening: int, ticks: int) -> int:
    """The line closing the fence opened at line ``opening``, by pytest-codeblocks' rule.

    Its rule: the first later line that starts, after leading whitespace, with as many
    backticks. (Counting the body's lines would not do: pytest-codeblocks drops a
    blank line inside an indented fence when the line lacks the indentation.)
    """
    for number in range(opening + 1, len(lines) + 1):
        if lines[number - 1].lstrip().startswith("`" * ticks):
            return number
    raise ValueError(f"line {opening}: this fence never closes")


def _dedent(line: str, width: int) -> str:
    """Remove up to ``width`` leading whitespace characters, as pytest-codeblocks does."""
    return line[min(width, len(line) - len(line.lstrip())) :]


def _next_line(lines: list[str], after: int, pattern: re.Pattern[str]) -> int:
    """The first line after line ``after`` whose stripped text matches ``pattern``."""
    for number in range(after + 1, len(lines) + 1):
        if pattern.fullmatch(lines[number - 1].strip()):
            return number
    raise ValueError(f"line {after}: no {pattern.pattern!r} follows")


def page_blocks(text: str) -> list[PageBlock]:
    """Every fenced block of a Markdown page, in order, with the lines it occupies.

    Fences absorbed as expected output are part of the block they belong to.

    Args:
        text: The page's Markdown.

    Returns:
        One [`PageBlock`][] per block pytest-codeblocks extracts (of any syntax).

    Raises:
        RuntimeError: pytest-codeblocks cannot read the page (an unterminated fence,
            a marker with no block before it, two outputs for one block, ...).
        ValueError: The page continues a block with ``pytest-codeblocks:cont``: every
            block on the site must run on its own.
    """
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if CONT_MARKER.fullmatch(line.strip()):
            raise ValueError(
                f"line {number}: pytest-codeblocks:cont joins blocks; "
                "every block must run on its own"
            )
    found: list[PageBlock] = []
    for block in extract_from_buffer(io.StringIO(text)):
        opening = lines[block.lineno - 1]
        stripped = opening.lstrip()
        ticks = len(stripped) - len(stripped.lstrip("`"))
        indent = opening[: len(opening) - len(stripped)]
        closing = _closing_line(lines, block.lineno, ticks)
        marker = output = None
        if block.expected_output is not None:
            marker = _next_line(lines, closing, OUTPUT_MARKER)
            start = _next_line(lines, marker, re.compile("`{3,}.*"))
            fence_line = lines[start - 1].strip()
            output_ticks = len(fence_line) - len(fence_line.lstrip("`"))
            output = Span(start, _closing_line(lines, start, output_ticks))
        body = "\n".join(_dedent(row, len(indent)) for row in lines[block.lineno : closing - 1])
        found.append(
            PageBlock(block, Span(block.lineno, closing), indent, body, ticks, marker, output)
        )
    return found
