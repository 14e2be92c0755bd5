"""Run every ``python`` block of Markdown pages and write what it prints into the page.

For maintainers while writing: the output fence after each printing block is
replaced by (or, if missing, given) the block's real stdout, under a
``<!--pytest-codeblocks:expected-output-->`` marker. The test suite then checks
those outputs exactly, so the page can only show numbers the code prints.

Blocks are found by pytest-codeblocks' own parser (via ``hooks/page_blocks.py``), and
each runs the way pytest-codeblocks runs it: ``exec`` in fresh globals, in this process;
a block its marks skip here keeps the output it has. Review the diff before committing:
this tool records, it does not judge.

Usage::

    python scripts/update_outputs.py docs/walkthrough/*.md
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
import traceback
from pathlib import Path

import pytest

from hooks.page_blocks import PageBlock, page_blocks

MARKER = "<!--pytest-codeblocks:expected-output-->"


def run_block(code: str) -> str:
    """Execute ``code`` in fresh globals and return what it printed."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(code, "<block>", "exec"), {"__MODULE__": "__main__"})
    return buffer.getvalue()


def skipped(page_block: PageBlock) -> bool:
    """Whether pytest would skip the block here (its marks, evaluated as the plugin does)."""
    block = page_block.block
    if block.importorskip is not None and importlib.util.find_spec(block.importorskip) is None:
        return True
    for text in block.marks:
        mark = eval(text, {"sys": sys, "pytest": pytest}).mark
        if mark.name == "skip":
            return True
        if mark.name == "skipif":
            condition = mark.args[0] if mark.args else True
            if isinstance(condition, str):
                condition = eval(condition, {"sys": sys, "os": os})
            if condition:
                return True
    return False


def output_lines(page_block: PageBlock, printed: str, lines: list[str]) -> list[str]:
    """The marker and output fence recording ``printed`` (none when nothing printed)."""
    if not printed:
        return []
    indent = page_block.indent
    info = "text"
    if page_block.output is not None:
        opening = lines[page_block.output.start - 1].strip()
        info = opening.lstrip("`").strip() or "text"
    # Blank lines keep the indent: pytest-codeblocks drops unindented ones inside
    # an indented fence (an admonition or a tab).
    recorded = [f"{indent}{line}" for line in printed.rstrip("\n").split("\n")]
    return [f"{indent}{MARKER}", f"{indent}```{info}", *recorded, f"{indent}```"]


def update_text(text: str) -> str:
    """Return ``text`` with every printing block's output fence filled in.

    Blocks are found by pytest-codeblocks' own parser (``hooks/page_blocks.py``); a
    block the tests would skip here keeps its recorded output.
    """
    lines = text.split("\n")
    for page_block in reversed(page_blocks(text)):
        if page_block.syntax != "python" or skipped(page_block):
            continue
        try:
            printed = run_block(page_block.block.code)
        except Exception:
            raise RuntimeError(
                f"block at line {page_block.fence.start} failed:\n{traceback.format_exc()}"
            ) from None
        new = output_lines(page_block, printed, lines)
        if page_block.marker is not None and page_block.output is not None:
            lines[page_block.marker - 1 : page_block.output.end] = new
        else:
            lines[page_block.fence.end : page_block.fence.end] = new
    return "\n".join(lines)


def main(paths: list[str]) -> int:
    """Update each Markdown file in ``paths`` in place."""
    for name in paths:
        path = Path(name)
        before = path.read_text(encoding="utf-8")
        after = update_text(before)
        if after != before:
            path.write_text(after, encoding="utf-8")
            print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
