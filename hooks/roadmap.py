"""MkDocs hook: a small "where you are" roadmap at the top of every main-line page.

The main line is read from the nav, never listed by hand: it runs from the first
top-level section (the first pass, a newcomer's first hour) through the sections that
follow it (the deeper track, then efficient attention and today's LLMs) up to the first
plain top-level page after them, which closes it (Where next). Anything before it
(Home) or after it (Appendices, Explore, the API reference) is off the path.

Each page of the path gets, above its title, a ``<nav>`` landmark with the steps of
the path in order (each a link to the step's first page), the current step marked
with ``aria-current="step"``, bold and filled (not by colour alone), its position
within the step ("page 3 of 9"), and a link to the page that shows the whole decoder
(``walkthrough/big-picture.md``). The strip is added to the finished page
(``on_post_page``), after the search index has read the content, so searching for a
section's name does not find every page. Its look, in both colour schemes, is in
``docs/assets/stylesheets/extra.css`` (``.roadmap``).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.nav import Navigation
from mkdocs.structure.pages import Page

#: The page that shows the whole decoder, linked from every roadmap.
BIG_PICTURE = "walkthrough/big-picture.md"
BIG_PICTURE_TEXT = "The whole decoder"
LABEL = "Where you are on the path"
#: Where the roadmap goes: at the start of Material's article, above the page's title.
ARTICLE = '<article class="md-content__inner md-typeset">'


@dataclass(frozen=True)
class Step:
    """One step of the path: a top-level section (or the closing page) of the nav."""

    title: str
    pages: tuple[str, ...]  # the src_uri of each page, in nav order; the first is linked


def _pages(item: Any) -> list[str]:
    """The ``src_uri`` of every page under a nav item, in order."""
    if getattr(item, "is_page", False):
        return [item.file.src_uri]
    if getattr(item, "is_section", False):
        return [uri for child in item.children for uri in _pages(child)]
    return []  # a link leaves the site


def _title(item: Any) -> str:
    if item.title:
        return str(item.title)
    stem = str(item.file.src_uri).rsplit("/", 1)[-1].removesuffix(".md")
    return stem.replace("-", " ").capitalize()


def main_line(items: Sequence[Any]) -> list[Step]:
    """The steps of the path, from the nav's top-level ``items`` (see the module's docstring).

    Raises:
        ValueError: The nav has no top-level section, or no page after its sections.
    """
    first = next((i for i, item in enumerate(items) if getattr(item, "is_section", False)), None)
    if first is None:
        raise ValueError("roadmap: the nav has no top-level section to start the path")
    steps: list[Step] = []
    for item in items[first:]:
        if getattr(item, "is_section", False):
            steps.append(Step(_title(item), tuple(_pages(item))))
        elif getattr(item, "is_page", False):
            steps.append(Step(_title(item), (item.file.src_uri,)))
            return steps
    raise ValueError("roadmap: no top-level page after the nav's sections closes the path")


def roadmap_html(steps: Sequence[Step], current: str, url: Callable[[str], str]) -> str:
    """The roadmap of page ``current`` (a ``src_uri`` on the path).

    Args:
        steps: The path, from [`main_line`][].
        current: The page's ``src_uri``.
        url: ``url(src_uri) -> str``, the URL of a page relative to the current one.

    Returns:
        The ``<nav>`` element, or ``""`` when ``current`` is off the path.
    """
    here = next((i for i, step in enumerate(steps) if current in step.pages), None)
    if here is None:
        return ""
    items = []
    for i, step in enumerate(steps):
        title = html.escape(step.title)
        state = "done" if i < here else "current" if i == here else "ahead"
        if i == here:
            link = f'<a href="{url(step.pages[0])}" aria-current="step">{title}</a>'
            if len(step.pages) > 1:
                position = step.pages.index(current) + 1
                link += f' <span class="roadmap__where">page {position} of {len(step.pages)}</span>'
        else:
            link = f'<a href="{url(step.pages[0])}">{title}</a>'
        items.append(f'<li class="roadmap__step roadmap__step--{state}">{link}</li>')
    overview = f'href="{url(BIG_PICTURE)}"'
    if current == BIG_PICTURE:
        overview += ' aria-current="page"'
    return (
        f'<nav class="roadmap" aria-label="{LABEL}">'
        f'<ol class="roadmap__steps">{"".join(items)}</ol>'
        f'<a class="roadmap__overview" {overview}>{BIG_PICTURE_TEXT}</a>'
        "</nav>"
    )


# --- MkDocs events ---------------------------------------------------------------------

# This build's path and its pages by source path (`mkdocs serve` re-reads them each build).
_path: list[Step] = []
_files: dict[str, File] = {}


def on_nav(nav: Navigation, config: MkDocsConfig, files: Files) -> Navigation:
    """Read the path from this build's nav; check that the big-picture page exists."""
    try:
        steps = main_line(nav.items)
    except ValueError as err:
        raise PluginError(str(err)) from err
    if files.get_file_from_path(BIG_PICTURE) is None:
        raise PluginError(f"roadmap: {BIG_PICTURE} (linked from every roadmap) is missing")
    _path[:] = steps
    _files.clear()
    _files.update((file.src_uri, file) for file in files)
    return nav


def on_post_page(output: str, page: Page, config: MkDocsConfig) -> str:
    """Put the roadmap at the top of a main-line page's article."""

    def url(src_uri: str) -> str:
        target = _files.get(src_uri)
        if target is None:
            raise PluginError(f"roadmap: {page.file.src_uri} links to a missing page {src_uri}")
        return html.escape(target.url_relative_to(page.file))

    strip = roadmap_html(_path, page.file.src_uri, url)
    if not strip:
        return output
    if output.count(ARTICLE) != 1:
        raise PluginError(f"roadmap: no single {ARTICLE} in {page.file.src_uri}'s page")
    return output.replace(ARTICLE, ARTICLE + strip, 1)
