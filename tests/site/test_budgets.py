"""The main line stays short: budgets of prose words (issue 22: say each thing once).

Prose is what a reader reads as sentences: code fences, HTML comments, images and
display math are left out. The main line and its sections are the roadmap's steps
(``hooks/roadmap.py``, read from the nav), from Home to "Where next"; Home and the
Notation legend, which sit before the first step, are counted with it.
"""

from __future__ import annotations

import re

from support import DOCS, main_line_steps

MAIN_LINE_BUDGET = 21_000
#: Foundations plus "Toward the transformer", the chapters every reader goes through.
CORE_SECTIONS = ("Foundations", "Toward the transformer")
CORE_BUDGET = 8_000
BEFORE_THE_PATH = ("index.md", "notation.md")
#: Home and Notation with the core sections: the part of the main line every reader reads.
FIRST_PART_BUDGET = 8_700

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,}).*?^\1\2\s*$", re.S | re.M)
_NOT_PROSE = re.compile(r"<!--.*?-->|!\[[^\]]*\]\([^)]*\)|\\\[.*?\\\]", re.S)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def prose_words(markdown: str) -> int:
    """Words of prose in a page: fences, comments, images and display math left out."""
    return len(_WORD.findall(_NOT_PROSE.sub(" ", _FENCE.sub("", markdown))))


def words_by_section() -> dict[str, dict[str, int]]:
    """Prose words of every page before and on the main line, by section."""
    sections = {"Before the path": dict.fromkeys(BEFORE_THE_PATH, 0)}
    sections.update({step.title: dict.fromkeys(step.pages, 0) for step in main_line_steps()})
    for pages in sections.values():
        for page in pages:
            pages[page] = prose_words((DOCS / page).read_text(encoding="utf-8"))
    return sections


def _table(sections: dict[str, dict[str, int]]) -> str:
    return "\n".join(f"{n:6d}  {p}" for pages in sections.values() for p, n in pages.items())


def test_prose_words_leave_code_comments_math_and_images_out() -> None:
    page = "One two.\n\n```python\nx = 1\n```\n<!-- three -->\n\\[ a + b \\]\n![four](f.svg)\n"
    assert prose_words(page) == 2


def test_the_counted_path_runs_from_foundations_to_where_next() -> None:
    titles = list(words_by_section())
    assert titles[1] == "Foundations"
    assert titles[-1] == "Where next"
    assert set(CORE_SECTIONS) <= set(titles)


def test_main_line_stays_within_its_budget() -> None:
    sections = words_by_section()
    total = sum(sum(pages.values()) for pages in sections.values())
    assert total <= MAIN_LINE_BUDGET, f"{total} words > {MAIN_LINE_BUDGET}:\n{_table(sections)}"


def test_foundations_and_toward_the_transformer_stay_within_their_budget() -> None:
    sections = words_by_section()
    core = sum(sum(sections[title].values()) for title in CORE_SECTIONS)
    assert core <= CORE_BUDGET, f"{core} words > {CORE_BUDGET}:\n{_table(sections)}"


def test_home_notation_and_the_core_stay_within_their_budget() -> None:
    sections = words_by_section()
    first = sum(sum(sections[title].values()) for title in ("Before the path", *CORE_SECTIONS))
    assert first <= FIRST_PART_BUDGET, f"{first} words > {FIRST_PART_BUDGET}:\n{_table(sections)}"


#: Efficient attention, Inside today's LLMs and Where next: the part after the core.
ADVANCED_SECTIONS = ("Efficient attention", "Inside today's LLMs", "Where next")
ADVANCED_BUDGET = 12_300


def test_the_advanced_sections_stay_within_their_budget() -> None:
    sections = words_by_section()
    advanced = sum(sum(sections[title].values()) for title in ADVANCED_SECTIONS)
    assert advanced <= ADVANCED_BUDGET, f"{advanced} words > {ADVANCED_BUDGET}:\n{_table(sections)}"
