"""Run every ``python`` block of Markdown pages and write what it prints into the page.

For maintainers while writing: the output fence after each printing block is
replaced by (or, if missing, given) the block's real stdout, under a
``<!--pytest-codeblocks:expected-output-->`` marker. The test suite then checks
those outputs exactly, so the page can only show numbers the code prints.

Each block runs the way pytest-codeblocks runs it: ``exec`` in fresh globals, in
this process. Review the diff before committing: this tool records, it does not judge.

Usage::

    python scripts/update_outputs.py docs/walkthrough/*.md
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import traceback
from pathlib import Path

MARKER = "<!--pytest-codeblocks:expected-output-->"
FENCE = re.compile(r"^(?P<indent>\s*)(?P<ticks>`{3,})(?P<info>.*)$")


def run_block(code: str) -> str:
    """Execute ``code`` in fresh globals and return what it printed."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(code, "<block>", "exec"), {"__MODULE__": "__main__"})
    return buffer.getvalue()


def _fence_end(lines: list[str], start: int, ticks: str) -> int:
    """Index of the line closing the fence opened at ``start``."""
    for j in range(start + 1, len(lines)):
        if lines[j].lstrip().startswith(ticks):
            return j
    raise ValueError(f"fence opened at line {start + 1} never closes")


def update_text(text: str) -> str:
    """Return ``text`` with every printing block's output fence filled in."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match or match["info"].strip() != "python":
            out.append(lines[i])
            i += 1
            continue
        indent, ticks = match["indent"], match["ticks"]
        end = _fence_end(lines, i, ticks)
        body = [
            line[len(indent) :] if line.startswith(indent) else line.lstrip()
            for line in lines[i + 1 : end]
        ]
        out.extend(lines[i : end + 1])
        i = end + 1
        try:
            printed = run_block("\n".join(body) + "\n")
        except Exception:
            raise RuntimeError(
                f"block at line {end - len(body)} failed:\n{traceback.format_exc()}"
            ) from None
        # Skip an existing marker and its fence; they are rewritten below.
        k = i
        while k < len(lines) and not lines[k].strip():
            k += 1
        has_marker = k < len(lines) and lines[k].strip() == MARKER
        info = "text"
        if has_marker:
            old = FENCE.match(lines[k + 1])
            if old is None:
                raise ValueError(f"marker at line {k + 1} is not followed by a fence")
            info = old["info"].strip() or "text"
            i = _fence_end(lines, k + 1, old["ticks"]) + 1
        if not printed:
            continue
        out.extend([f"{indent}{MARKER}", f"{indent}```{info}"])
        # Blank lines keep the indent: pytest-codeblocks drops unindented ones inside
        # an indented fence (an admonition or a tab).
        out.extend(f"{indent}{line}" for line in printed.rstrip("\n").split("\n"))
        out.append(f"{indent}```")
    return "\n".join(out)


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
