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
from support import DOCS, built_page, load_hook, main_line_steps

roadmap = load_hook("roadmap")

#: The path as issue 22 names it (the nav's own titles).
EXPECTED_STEPS = [
    "Foundations",
    "Toward the transformer",
    "Efficient attention",
    "Inside today's LLMs",
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
    assert STEPS[0].pages[0] == "walkthrough/index.md"
    assert "llm/rotary.md" in STEPS[3].pages
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


def _url(current: str) -> Any:
    def url(src_uri: str) -> str:
        return posixpath.relpath(src_uri, posixpath.dirname(current) or ".")

    return url


def test_strip_marks_the_current_step_and_the_position() -> None:
    page = "transformer/multi-head-attention.md"
    html = roadmap.roadmap_html(STEPS, page, _url(page))
    assert html.count("aria-current") == 1
    current = re.search(r'<a href="[^"]*" aria-current="step">([^<]*)</a>', html)
    assert current is not None and current[1] == "Toward the transformer"
    position = STEPS[1].pages.index(page) + 1
    assert f"page {position} of {len(STEPS[1].pages)}" in html
    assert html.count('class="roadmap__step roadmap__step--done"') == 1
    assert html.count('class="roadmap__step roadmap__step--ahead"') == 3
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
