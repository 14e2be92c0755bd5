"""The "where you are" roadmap on every main-line page (hooks/roadmap.py).

The path is read from mkdocs.yml's nav: from its first top-level section up to the
first plain page after the sections. Each page on it shows the path's steps, the
current one marked, and a link to the whole decoder; no other page shows one.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import DOCS, built_page, main_line_steps

from hooks import roadmap

#: The path as issues 22 and 39 name it (the nav's own titles): the first pass, then the
#: deeper track, then the rest.
EXPECTED_STEPS = [
    "First pass",
    "Deeper: foundations",
    "Deeper: toward the transformer",
    "Efficient attention",
    "Inside today's LLMs",
    "Beyond softmax",
    "Where next",
]
ROADMAP = re.compile(r'<nav class="roadmap" aria-label="[^"]+">.*?</nav>', re.DOTALL)
HREF = re.compile(r'href="([^"]+)"')


def _page(src_uri: str, title: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(
        is_page=True, is_section=False, title=title, file=SimpleNamespace(src_uri=src_uri)
    )


def _section(title: str, children: list[Any]) -> SimpleNamespace:
    return SimpleNamespace(is_page=False, is_section=True, title=title, children=children)


STEPS = main_line_steps()
MAIN_LINE = [page for step in STEPS for page in step.pages]


def test_the_path_is_read_from_the_nav() -> None:
    assert [step.title for step in STEPS] == EXPECTED_STEPS
    assert STEPS[0].pages[0] == "start/what-attention-does.md"
    assert STEPS[1].pages[0] == "walkthrough/index.md"
    assert "llm/rotary.md" in STEPS[4].pages
    assert STEPS[-1].pages == ("walkthrough/where-next.md",)
    for off in ("index.md", "notation.md", "reference.md", "explorer.md", "sources.md"):
        assert off not in MAIN_LINE
    assert all((DOCS / page).is_file() for page in MAIN_LINE)


def test_path_follows_a_changed_nav() -> None:
    """Nothing is listed by hand: a new section joins the path, a trailing one does not."""
    items = [
        _page("index.md", "Home"),
        _section("Start", [_page("a.md"), _section("Nested", [_page("b.md")])]),
        _section("Middle", [_page("c.md")]),
        _page("end.md", "The end"),
        _section("Appendix", [_page("x.md")]),
    ]
    steps = roadmap.main_line(items)
    assert [(s.title, s.pages) for s in steps] == [
        ("Start", ("a.md", "b.md")),
        ("Middle", ("c.md",)),
        ("The end", ("end.md",)),
    ]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([_page("index.md", "Home")], "no top-level section"),
        ([_section("Only", [_page("a.md")])], "no top-level page after"),
    ],
)
def test_a_nav_without_a_path_is_refused(items: list[Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        roadmap.main_line(items)


# --- The navigation agrees with itself (issue 39) -----------------------------------------

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,}).*?^\1\2\s*$", re.S | re.M)
#: The first link of a "Next:" line in a page's prose.
NEXT_LINK = re.compile(r"^Next:\s*\[[^\]]*\]\(([^)#\s]+)", re.M)
#: A numbered item of Home's lists: ``3. [title](page.md)``.
HOME_ITEM = re.compile(r"^(\d+)\. \[[^\]]*\]\(([^)#\s]+\.md)\)", re.M)
FIRST_PASS = STEPS[0].pages


def next_links(page: str) -> list[str]:
    """Where the "Next:" lines of ``page``'s prose point, as paths under docs/."""
    prose = _FENCE.sub("", (DOCS / page).read_text(encoding="utf-8"))
    return [
        posixpath.normpath(posixpath.join(posixpath.dirname(page), target))
        for target in NEXT_LINK.findall(prose)
    ]


def test_next_links_are_read_from_the_prose_only() -> None:
    assert NEXT_LINK.findall("Next: [b](b.md), or [c](c.md).\n") == ["b.md"]
    assert not _FENCE.sub("", "```text\nNext: [b](b.md)\n```\n").strip()


@pytest.mark.parametrize("page", MAIN_LINE[:-1])
def test_every_next_link_points_to_the_next_page_in_the_nav(page: str) -> None:
    """A page's "Next:" is the footer's Next; every first-pass page has one."""
    following = MAIN_LINE[MAIN_LINE.index(page) + 1]
    links = next_links(page)
    if page in FIRST_PASS:
        assert links, f"{page} has no 'Next:' line"
    assert all(link == following for link in links), f"{page}: Next: {links}, nav: {following}"


def test_home_numbers_each_page_as_its_roadmap_does() -> None:
    """Home's "3." is the roadmap's "page 3 of N", and Home lists the first pass in nav order."""
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    items = [(int(number), page) for number, page in HOME_ITEM.findall(home)]
    wrong = [
        f"Home numbers {page} {number}, the roadmap {step.pages.index(page) + 1}"
        for number, page in items
        for step in STEPS
        if page in step.pages and number != step.pages.index(page) + 1
    ]
    assert not wrong, "\n".join(wrong)
    assert [page for _, page in items if page in FIRST_PASS] == list(FIRST_PASS)


def _url(current: str) -> Any:
    def url(src_uri: str) -> str:
        return posixpath.relpath(src_uri, posixpath.dirname(current) or ".")

    return url


def test_strip_marks_the_current_step_and_the_position() -> None:
    page = "transformer/multi-head-attention.md"
    html = roadmap.roadmap_html(STEPS, page, _url(page))
    assert html.count("aria-current") == 1
    current = re.search(r'<a href="[^"]*" aria-current="step">([^<]*)</a>', html)
    assert current is not None and current[1] == "Deeper: toward the transformer"
    position = STEPS[2].pages.index(page) + 1
    assert f"page {position} of {len(STEPS[2].pages)}" in html
    assert html.count('class="roadmap__step roadmap__step--done"') == 2
    assert html.count('class="roadmap__step roadmap__step--ahead"') == len(STEPS) - 3
    assert 'href="../walkthrough/big-picture.md">The whole decoder</a>' in html
    assert html.startswith('<nav class="roadmap" aria-label="Where you are on the path">')


def test_strip_is_empty_off_the_path() -> None:
    for page in ("index.md", "reference.md", "walkthrough/errata.md"):
        assert roadmap.roadmap_html(STEPS, page, _url(page)) == ""


def test_big_picture_page_marks_its_own_link() -> None:
    page = roadmap.BIG_PICTURE
    html = roadmap.roadmap_html(STEPS, page, _url(page))
    assert 'aria-current="page">The whole decoder</a>' in html


def _built(built_site: Path, src_uri: str) -> Path:
    return built_page(built_site, src_uri)


@pytest.mark.parametrize("page", MAIN_LINE)
def test_every_main_line_page_shows_the_roadmap_first(built_site: Path, page: str) -> None:
    built = _built(built_site, page)
    html = built.read_text(encoding="utf-8")
    strips = ROADMAP.findall(html)
    assert len(strips) == 1, page
    article = html.index('<article class="md-content__inner md-typeset">')
    assert html.index(strips[0]) == article + len('<article class="md-content__inner md-typeset">')
    assert html.index(strips[0]) < html.index("<h1")
    step = next(step for step in STEPS if page in step.pages)
    assert re.search(
        rf'aria-current="step">{re.escape(step.title)}</a>', strips[0].replace("&#x27;", "'")
    )
    hrefs = HREF.findall(strips[0])
    assert len(hrefs) == len(STEPS) + 1
    for href in hrefs:
        target = (built.parent / href).resolve()
        assert target.is_file(), (page, href)
    big_picture = (built.parent / hrefs[-1]).resolve()
    assert big_picture == _built(built_site, roadmap.BIG_PICTURE)


def test_no_page_off_the_path_shows_a_roadmap(built_site: Path) -> None:
    on_path = {_built(built_site, page) for page in MAIN_LINE}
    pages = sorted(built_site.rglob("*.html"))
    off_path = [page for page in pages if page not in on_path]
    assert _built(built_site, "reference.md") in off_path
    shown = [
        str(p.relative_to(built_site))
        for p in off_path
        if 'class="roadmap"' in p.read_text("utf-8")
    ]
    assert not shown
    assert all('class="roadmap"' in page.read_text("utf-8") for page in on_path)
