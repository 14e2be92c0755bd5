"""The main line stays short, and the first pass fits a newcomer's hour (issues 22 and 39).

Prose is what a reader reads as sentences: code fences, HTML comments, images and
display math are left out. The main line and its sections are the roadmap's steps
(``hooks/roadmap.py``, read from the nav), from the first pass to "Where next"; Home,
which sits before the first step, is counted with it. The word budgets count the main
line after the first pass; the first pass has a budget of its own, in minutes.

The first pass (issue 39) is timed as a newcomer reads: prose at ``WORDS_PER_MINUTE``
and code at ``CODE_LINES_PER_MINUTE``, the pace blind newcomers were measured at; it
must read within ``FIRST_PASS_MINUTES``, and its first computed attention weights must
come within ``FIRST_WEIGHTS_WORDS`` words of prose from its start.
"""

from __future__ import annotations

import re

from support import DOCS, main_line_steps

#: Home and the main line after the first pass (the first pass is budgeted in minutes).
#: 21,000 until issue 39, whose corrections (dynamic NTK's exponent, paging's baseline, the
#: libraries' causal alignments, ablations) and FlashAttention-4's column added about 1,000.
MAIN_LINE_BUDGET = 22_300
#: Chapters counted apart, each within CHAPTER_BUDGET, and the main line with them within
#: MAIN_LINE_WITH_CHAPTERS_BUDGET (the budgets above count the rest): issue 32's chapters on
#: today's models, issue 40's on the attention of 2026's open models, issue 41's kernels.
#: Whoever adds such a chapter appends it here.
CHAPTERS_COUNTED_APART = (
    "llm/longer-contexts.md",
    "llm/compressed-and-paged-caches.md",
    "llm/quantized-caches.md",
    "llm/latent-attention.md",
    "efficient/triton-kernel.md",
    "efficient/flex-attention.md",
    "llm/linear-attention.md",
    "llm/hybrid-recall.md",
    "llm/gates-and-sinks.md",
    "llm/sparse-attention.md",
)
CHAPTER_BUDGET = 1_800
MAIN_LINE_WITH_CHAPTERS_BUDGET = 37_000
#: The newcomer's first hour (issue 39): the nav's first section.
FIRST_PASS = "First pass"
FIRST_PASS_MINUTES = 60
#: Prose words from the start of the first pass to the first block that computes and
#: prints attention weights (issue 39: the Illustrated Transformer's are about 700 in).
FIRST_WEIGHTS_WORDS = 700
#: The deeper track's two sections, the first pass taken apart (the old core chapters).
CORE_SECTIONS = ("Deeper: foundations", "Deeper: toward the transformer")
CORE_BUDGET = 8_100  # 8,000 until issue 39's first-half corrections
BEFORE_THE_PATH = ("index.md",)
#: Home with the deeper track's core sections.
FIRST_PART_BUDGET = 8_750  # 8,700 until Home listed Beyond softmax

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,}).*?^\1\2\s*$", re.S | re.M)
_NOT_PROSE = re.compile(r"<!--.*?-->|!\[[^\]]*\]\([^)]*\)|\\\[.*?\\\]", re.S)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def prose_words(markdown: str) -> int:
    """Words of prose in a page: fences, comments, images and display math left out."""
    return len(_WORD.findall(_NOT_PROSE.sub(" ", _FENCE.sub("", markdown))))


def words_by_section(apart: bool = False) -> dict[str, dict[str, int]]:
    """Prose words of every page before and on the main line, by section.

    The chapters counted apart (``CHAPTERS_COUNTED_APART``) are left out unless ``apart``.
    """
    sections = {"Before the path": dict.fromkeys(BEFORE_THE_PATH, 0)}
    sections.update({step.title: dict.fromkeys(step.pages, 0) for step in main_line_steps()})
    for pages in sections.values():
        for page in list(pages):
            if page in CHAPTERS_COUNTED_APART and not apart:
                del pages[page]
            else:
                pages[page] = prose_words((DOCS / page).read_text(encoding="utf-8"))
    return sections


def _table(sections: dict[str, dict[str, int]]) -> str:
    return "\n".join(f"{n:6d}  {p}" for pages in sections.values() for p, n in pages.items())


def test_prose_words_leave_code_comments_math_and_images_out() -> None:
    page = "One two.\n\n```python\nx = 1\n```\n<!-- three -->\n\\[ a + b \\]\n![four](f.svg)\n"
    assert prose_words(page) == 2


def test_the_counted_path_runs_from_the_first_pass_to_where_next() -> None:
    titles = list(words_by_section())
    assert titles[1] == FIRST_PASS
    assert titles[-1] == "Where next"
    assert set(CORE_SECTIONS) <= set(titles)


def _beyond_the_first_pass(sections: dict[str, dict[str, int]]) -> int:
    """Words of Home and of every section but the first pass, which is timed instead."""
    return sum(sum(pages.values()) for title, pages in sections.items() if title != FIRST_PASS)


def test_main_line_stays_within_its_budget() -> None:
    sections = words_by_section()
    total = _beyond_the_first_pass(sections)
    assert total <= MAIN_LINE_BUDGET, f"{total} words > {MAIN_LINE_BUDGET}:\n{_table(sections)}"


def test_chapters_counted_apart_are_on_the_main_line_each_within_its_budget() -> None:
    on_the_path = {page for pages in words_by_section(apart=True).values() for page in pages}
    assert set(CHAPTERS_COUNTED_APART) <= on_the_path
    over = {
        page: words
        for page in CHAPTERS_COUNTED_APART
        if (words := prose_words((DOCS / page).read_text(encoding="utf-8"))) > CHAPTER_BUDGET
    }
    assert not over, f"over {CHAPTER_BUDGET} words: {over}"


def test_main_line_with_the_chapters_counted_apart_stays_within_its_budget() -> None:
    sections = words_by_section(apart=True)
    total = _beyond_the_first_pass(sections)
    assert total <= MAIN_LINE_WITH_CHAPTERS_BUDGET, (
        f"{total} words > {MAIN_LINE_WITH_CHAPTERS_BUDGET}:\n{_table(sections)}"
    )


def test_the_deeper_core_sections_stay_within_their_budget() -> None:
    sections = words_by_section()
    core = sum(sum(sections[title].values()) for title in CORE_SECTIONS)
    assert core <= CORE_BUDGET, f"{core} words > {CORE_BUDGET}:\n{_table(sections)}"


def test_home_and_the_deeper_core_stay_within_their_budget() -> None:
    sections = words_by_section()
    first = sum(sum(sections[title].values()) for title in ("Before the path", *CORE_SECTIONS))
    assert first <= FIRST_PART_BUDGET, f"{first} words > {FIRST_PART_BUDGET}:\n{_table(sections)}"


#: Efficient attention, Inside today's LLMs and Where next: the part after the core.
ADVANCED_SECTIONS = ("Efficient attention", "Inside today's LLMs", "Where next")
# 12,300 until issue 39's corrections and FA-4; 13,400 until other families (issue 43)
ADVANCED_BUDGET = 13_600


def test_the_advanced_sections_stay_within_their_budget() -> None:
    sections = words_by_section()
    advanced = sum(sum(sections[title].values()) for title in ADVANCED_SECTIONS)
    assert advanced <= ADVANCED_BUDGET, f"{advanced} words > {ADVANCED_BUDGET}:\n{_table(sections)}"


# --- Reading times: the first pass's hour, and Home's times -----------------------------

#: A newcomer's measured pace (issue 39): prose words, and non-blank lines of Python, a minute.
WORDS_PER_MINUTE = 120
CODE_LINES_PER_MINUTE = 6
#: Minutes blind newcomers took on a page, where measured: Home must state these instead of
#: the pace's estimate (``reading_minutes``). Fill it in from the readers' reports.
#: The first pass, timed by a newcomer reading, running the code and studying the figures
#: (Home, not listed there, took 3): about 87 minutes, 68 without the primer.
MEASURED_MINUTES: dict[str, int] = {
    "start/what-attention-does.md": 18,
    "start/pytorch-primer.md": 19,
    "start/self-attention.md": 13,
    "start/causal-and-heads.md": 9,
    "start/positions.md": 13,
    "start/whole-layer.md": 15,
}
#: A stated time may be off by this many minutes (pages change a little between updates).
MINUTES_SLACK = 1
_PYTHON_FENCE = re.compile(r"^(\s*)```python[^\n]*\n(.*?)^\1```\s*$", re.S | re.M)
_EXPECTED_OUTPUT = re.compile(
    r"\s*<!--pytest-codeblocks:expected-output-->\s*```text[^\n]*\n(.*?)^\s*```", re.S | re.M
)
_TENSOR_ROW = re.compile(r"tensor\(\[([-\d.,\s]+)\]")
#: ``[title](page.md) · N min`` on Home; a bold link, ``**[title](page.md)** · N min``,
#: is a whole section of the main line, timed as the sum of its pages.
_TIMED_LINK = re.compile(r"(\*\*)?\[[^\]]+\]\(([^)#]+\.md)\)(?:\*\*)?\s*·\s*(\d+)\s+min")


def code_lines(markdown: str) -> int:
    """Non-blank lines inside the page's Python fences (solutions included)."""
    return sum(
        1 for m in _PYTHON_FENCE.finditer(markdown) for line in m[2].splitlines() if line.strip()
    )


def reading_minutes(page: str) -> float:
    """A page's reading time at a newcomer's pace: prose words plus lines of code."""
    markdown = (DOCS / page).read_text(encoding="utf-8")
    return prose_words(markdown) / WORDS_PER_MINUTE + code_lines(markdown) / CODE_LINES_PER_MINUTE


def stated_minutes(page: str) -> float:
    """The time Home should state for a page: measured if it was, else the pace's estimate."""
    return MEASURED_MINUTES.get(page, reading_minutes(page))


def first_pass_pages() -> tuple[str, ...]:
    """The first pass's pages, in nav order."""
    return next(step.pages for step in main_line_steps() if step.title == FIRST_PASS)


def stated_reading_times() -> list[tuple[str, bool, int]]:
    """Home's timed links: (page, whether it stands for its whole section, minutes)."""
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    return [(m[2], m[1] is not None, int(m[3])) for m in _TIMED_LINK.finditer(home)]


def prints_weights(output: str) -> bool:
    """Whether printed output holds a row of attention weights: numbers in [0, 1] summing to 1."""
    for row in _TENSOR_ROW.findall(output):
        numbers = [float(n) for n in row.replace(",", " ").split()]
        in_range = len(numbers) > 1 and all(0 <= n <= 1 for n in numbers)
        if in_range and abs(sum(numbers) - 1) < 0.01:
            return True
    return False


def words_before_first_weights(pages: tuple[str, ...]) -> tuple[str, int]:
    """The page of the first block that calls a softmax and prints weights, and the words of
    prose from the start of ``pages`` to that block."""
    words = 0
    for page in pages:
        markdown = (DOCS / page).read_text(encoding="utf-8")
        for block in _PYTHON_FENCE.finditer(markdown):
            output = _EXPECTED_OUTPUT.match(markdown, block.end())
            if "softmax(" in block[2] and output and prints_weights(output[1]):
                return page, words + prose_words(markdown[: block.start()])
        words += prose_words(markdown)
    raise AssertionError(f"no block computes and prints attention weights in {pages}")


def test_code_lines_count_python_lines_only() -> None:
    page = "Text.\n\n```python\nx = 1\n\ny = 2\n```\n\n```text\nout\n```\n"
    assert code_lines(page) == 2


def test_first_pass_reads_within_an_hour() -> None:
    """At a newcomer's pace, the whole first pass (its primer included) takes at most an hour."""
    pages = first_pass_pages()
    minutes = {page: reading_minutes(page) for page in pages}
    table = "\n".join(f"{m:5.1f} min  {page}" for page, m in minutes.items())
    total = sum(minutes.values())
    assert len(pages) >= 5 and total <= FIRST_PASS_MINUTES, f"{total:.1f} min:\n{table}"


def test_weights_are_found_only_where_a_block_prints_them() -> None:
    assert prints_weights("tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])")
    assert not prints_weights("tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])")
    assert not prints_weights("tensor([0.4419, 0.6515, 0.5683])")  # a context vector
    assert not prints_weights("tensor(1.)")


def test_first_weights_come_within_700_words_of_the_first_pass() -> None:
    """Self-attention's first weights are computed on the pass's first page, early."""
    pages = first_pass_pages()
    page, words = words_before_first_weights(pages)
    assert page == pages[0], f"the first weights are printed on {page}, not on {pages[0]}"
    assert words <= FIRST_WEIGHTS_WORDS, f"{words} words of prose before the first weights"


def test_home_states_a_time_for_every_first_pass_and_deeper_page() -> None:
    timed = {page for page, _, _ in stated_reading_times()}
    sections = (FIRST_PASS, *CORE_SECTIONS)
    listed = {p for step in main_line_steps() if step.title in sections for p in step.pages}
    missing = listed - timed
    assert not missing, f"Home gives no reading time for {sorted(missing)}"


def test_home_reading_times_match_the_pages() -> None:
    """Each time on Home is the page's (or section's) measured or estimated minutes, rounded."""
    sections = {step.pages[0]: step.pages for step in main_line_steps()}
    wrong = []
    for page, whole_section, stated in stated_reading_times():
        pages = sections[page] if whole_section else (page,)
        minutes = sum(stated_minutes(p) for p in pages)
        if abs(stated - minutes) > MINUTES_SLACK:
            wrong.append(f"{page}: Home says {stated} min, the page reads in {minutes:.1f}")
    assert stated_reading_times() and not wrong, "\n".join(wrong)


# The times Home should state: PYTHONPATH=tests python tests/site/test_budgets.py
if __name__ == "__main__":
    for step in main_line_steps():
        for page in step.pages:
            print(f"{stated_minutes(page):5.1f} min  {page}")
        print(f"{sum(stated_minutes(p) for p in step.pages):5.1f} min  = {step.title}")
    print(f"first weights: {words_before_first_weights(first_pass_pages())}")
