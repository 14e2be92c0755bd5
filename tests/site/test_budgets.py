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
#: Issue 32's chapters on today's models, counted apart: each within TODAYS_CHAPTER_BUDGET,
#: and the main line with them within TODAYS_MAIN_LINE_BUDGET (the budgets above count the
#: rest). Whoever adds such a chapter appends it here.
TODAYS_MODELS_PAGES = (
    "llm/longer-contexts.md",
    "llm/compressed-and-paged-caches.md",
    "llm/latent-attention.md",
)
TODAYS_CHAPTER_BUDGET = 1_800
TODAYS_MAIN_LINE_BUDGET = 25_000
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


def words_by_section(todays: bool = False) -> dict[str, dict[str, int]]:
    """Prose words of every page before and on the main line, by section.

    Issue 32's chapters (``TODAYS_MODELS_PAGES``) are left out unless ``todays``.
    """
    sections = {"Before the path": dict.fromkeys(BEFORE_THE_PATH, 0)}
    sections.update({step.title: dict.fromkeys(step.pages, 0) for step in main_line_steps()})
    for pages in sections.values():
        for page in list(pages):
            if page in TODAYS_MODELS_PAGES and not todays:
                del pages[page]
            else:
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


def test_todays_models_chapters_are_on_the_main_line_each_within_its_budget() -> None:
    on_the_path = {page for pages in words_by_section(todays=True).values() for page in pages}
    assert set(TODAYS_MODELS_PAGES) <= on_the_path
    over = {
        page: words
        for page in TODAYS_MODELS_PAGES
        if (words := prose_words((DOCS / page).read_text(encoding="utf-8"))) > TODAYS_CHAPTER_BUDGET
    }
    assert not over, f"over {TODAYS_CHAPTER_BUDGET} words: {over}"


def test_main_line_with_todays_models_stays_within_its_budget() -> None:
    sections = words_by_section(todays=True)
    total = sum(sum(pages.values()) for pages in sections.values())
    assert total <= TODAYS_MAIN_LINE_BUDGET, (
        f"{total} words > {TODAYS_MAIN_LINE_BUDGET}:\n{_table(sections)}"
    )


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


# --- Reading times on Home ----------------------------------------------------------------

#: Reading speeds behind Home's times: prose words, and non-blank lines of Python, a minute.
WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 20
#: A stated time may be off by this many minutes (pages change a little between updates).
MINUTES_SLACK = 1
_PYTHON_FENCE = re.compile(r"^(\s*)```python[^\n]*\n(.*?)^\1```\s*$", re.S | re.M)
#: ``[title](page.md) · N min`` on Home; a bold link, ``**[title](page.md)** · N min``,
#: is a whole section of the main line, timed as the sum of its pages.
_TIMED_LINK = re.compile(r"(\*\*)?\[[^\]]+\]\(([^)#]+\.md)\)(?:\*\*)?\s*·\s*(\d+)\s+min")


def code_lines(markdown: str) -> int:
    """Non-blank lines inside the page's Python fences (solutions included)."""
    return sum(
        1 for m in _PYTHON_FENCE.finditer(markdown) for line in m[2].splitlines() if line.strip()
    )


def reading_minutes(page: str) -> float:
    """A page's reading time: prose at 200 words a minute plus code at 20 lines a minute."""
    markdown = (DOCS / page).read_text(encoding="utf-8")
    return prose_words(markdown) / WORDS_PER_MINUTE + code_lines(markdown) / CODE_LINES_PER_MINUTE


def stated_reading_times() -> list[tuple[str, bool, int]]:
    """Home's timed links: (page, whether it stands for its whole section, minutes)."""
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    return [(m[2], m[1] is not None, int(m[3])) for m in _TIMED_LINK.finditer(home)]


def test_code_lines_count_python_lines_only() -> None:
    page = "Text.\n\n```python\nx = 1\n\ny = 2\n```\n\n```text\nout\n```\n"
    assert code_lines(page) == 2


def test_home_states_a_time_for_every_core_page() -> None:
    timed = {page for page, _, _ in stated_reading_times()}
    core = {p for step in main_line_steps() if step.title in CORE_SECTIONS for p in step.pages}
    missing = core - timed - {"walkthrough/index.md"}  # the section's contents page
    assert not missing, f"Home's shortest path gives no reading time for {sorted(missing)}"


def test_home_reading_times_match_the_pages() -> None:
    """Each time on Home is the page's (or section's) words and code lines, rounded."""
    sections = {step.pages[0]: step.pages for step in main_line_steps()}
    wrong = []
    for page, whole_section, stated in stated_reading_times():
        pages = sections[page] if whole_section else (page,)
        minutes = sum(reading_minutes(p) for p in pages)
        if abs(stated - minutes) > MINUTES_SLACK:
            wrong.append(f"{page}: Home says {stated} min, the page reads in {minutes:.1f}")
    assert stated_reading_times() and not wrong, "\n".join(wrong)


# The times Home should state: PYTHONPATH=tests python tests/site/test_budgets.py
if __name__ == "__main__":
    for step in main_line_steps():
        for page in step.pages:
            print(f"{reading_minutes(page):5.1f} min  {page}")
        print(f"{sum(reading_minutes(p) for p in step.pages):5.1f} min  = {step.title}")
