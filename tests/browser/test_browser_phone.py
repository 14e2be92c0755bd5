"""Every page on a phone: 390 x 844 CSS px in Chromium, in both colour schemes.

On every built page, in the light scheme and then the dark one:

* nothing makes the page wider than the screen, and no box sticks out of it unless it
  sits in a box that scrolls sideways and itself fits (tables, code, the explorer's
  heatmap); the explorer's controls wrap, its prompt ``<select>`` included;
* display math wider than the screen scrolls inside its own box and shows that it does
  (the edge shadows of ``extra.css``);
* captions wrap: no ``<caption>`` or ``<figcaption>`` is cut at the screen's edge;
* no Markdown leaks into the prose as literal ``**`` (the explorer's definition lists);
* every figure is legible: its smallest text renders at 9 CSS px or more at this width,
  or a tap opens it full size (the image is a link to its own SVG, which
  ``figure-zoom.js`` shows at its drawn size), where its smallest text reaches 9 px.
  The text size is read from the SVG itself: the figures draw text as paths, each glyph
  run scaled by its font size (``scale(s -s)``, s = points / 100, in the SVG's units).

``test_a_tap_opens_the_figure_full_size_in_both_schemes`` taps a figure in each scheme.
The pages are split into a few chunks (one test each, so a parallel run spreads them);
one tab per chunk visits its pages, measured with one ``page.evaluate`` per scheme.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from schemes import MATERIAL_SCHEME, SCHEME_JS, schemes_from_current, switch_scheme

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
MIN_TEXT_PX = 9.0
CHUNKS = 3
# An SVG's width in CSS px per unit of its viewBox, at its drawn size: matplotlib writes
# width="<w>pt" with a viewBox <w> units wide, and 1 pt = 4/3 CSS px.
PX_PER_PT = 4 / 3

# What a page shows at phone width; every list holds the offenders (a few of each).
MEASURE_JS = """() => {
  const vw = document.documentElement.clientWidth;
  const fits = (r) => r.left >= -1 && r.right <= vw + 1;
  const scrollsX = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const shown = (el) => el.getClientRects().length > 0
    && getComputedStyle(el).visibility !== 'hidden';
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + [...el.classList].slice(0, 2).map((c) => '.' + c).join('');
  const content = document.querySelector('.md-content') || document.body;

  // a box outside the screen is fine only inside a sideways scroller that fits; KaTeX's
  // own clipped parts (its MathML copy for screen readers, its stretched SVG strokes)
  // are left to KaTeX
  const inFittingScroller = (el) => {
    for (let box = el.parentElement; box && box !== document.body; box = box.parentElement) {
      if (scrollsX(box) && fits(box.getBoundingClientRect())) return true;
    }
    return false;
  };
  const sticking = [];
  for (const el of content.querySelectorAll('*')) {
    if (sticking.length >= 5) break;
    const r = el.getBoundingClientRect();
    if (r.width <= 1 || fits(r) || el.closest('.katex-mathml, .katex svg')) continue;
    if (!shown(el) || inFittingScroller(el)) continue;
    sticking.push(`${name(el)} spans ${Math.round(r.left)}..${Math.round(r.right)} px`);
  }

  // display math wider than the screen: its nearest sideways scroller shows a cue
  const cued = (box) => getComputedStyle(box).backgroundImage.includes('gradient');
  const math = [];
  for (const el of content.querySelectorAll('.katex-display')) {
    if (!shown(el)) continue;
    for (let box = el; box && box !== content; box = box.parentElement) {
      if (scrollsX(box) && box.scrollWidth > box.clientWidth + 1 && !cued(box)) {
        math.push(el.textContent.slice(0, 40));
        break;
      }
    }
  }

  const captions = [...content.querySelectorAll('caption, figcaption')]
    .filter((el) => shown(el) && !fits(el.getBoundingClientRect()))
    .map((el) => el.textContent.slice(0, 60));

  const prose = [];
  const walker = document.createTreeWalker(content, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest('pre, code, script, style, .katex, .jp-InputArea')) continue;
    if (/\\*\\*\\S/.test(node.textContent)) prose.push(node.textContent.trim().slice(0, 60));
  }

  const figures = [...content.querySelectorAll('img')].filter(shown).map((img) => {
    const link = img.closest('a.figure-zoom');
    return {
      src: img.currentSrc || img.src,
      width: img.getBoundingClientRect().width,
      naturalWidth: img.naturalWidth,
      zoom: link ? link.href : null,
    };
  });

  return {
    pageWidth: document.scrollingElement.scrollWidth, viewport: vw,
    sticking, math, captions, prose, figures,
  };
}"""

# Ready: math rendered, the explorers drawn from the build's data (the live model's
# section loads only when asked), every image loaded.
READY_JS = """() => document.readyState === 'complete'
  && [...document.querySelectorAll('.arithmatex')].every((el) => el.querySelector('.katex'))
  && [...document.querySelectorAll('.attn-explorer[id]:not(.live)')]
       .every((el) => el.dataset.ready === 'true')
  && [...document.querySelectorAll('img')].every((img) => img.complete)"""

EAGER_IMAGES_JS = """() => document.querySelectorAll('img[loading="lazy"]')
  .forEach((img) => { img.loading = 'eager'; })"""


def site_pages(site: Path) -> list[str]:
    """Every HTML page of the built site, as paths relative to it.

    The 404 page is left out: its links are absolute under the project subpath of
    ``site_url``, so it only renders served there (tests/browser/test_browser_disk.py).
    """
    return sorted(
        path.relative_to(site).as_posix()
        for path in site.rglob("*.html")
        if path.relative_to(site).parts[0] not in {"assets", "search"} and path.name != "404.html"
    )


# --- legibility of a figure, read from its SVG --------------------------------------

TEXT_SCALE = re.compile(r"scale\((0?\.\d+|\d+(?:\.\d+)?) -\1\)")
VIEWBOX = re.compile(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) [\d.]+"')


def smallest_text_pt(svg: str) -> float | None:
    """The smallest font size (pt, in the SVG's units) of the text an SVG draws as paths."""
    sizes = [float(s) * 100 for s in TEXT_SCALE.findall(svg)]
    return min(sizes) if sizes else None


def svg_of(url: str, site: Path) -> Path | None:
    """The built file an image URL of the served site points at, if it is an SVG."""
    path = site / unquote(urlsplit(url).path).lstrip("/")
    return path if path.suffix == ".svg" and path.is_file() else None


def figure_problem(figure: dict[str, Any], site: Path) -> str | None:
    """Why a figure is not legible on the phone, or None.

    Legible: its smallest text is at least 9 px as shown; or it is a link that opens it
    full size (to its own SVG, or to its own raster image), where that text is 9 px.
    """
    svg = svg_of(figure["src"], site)
    scale = figure["width"] / figure["naturalWidth"] if figure["naturalWidth"] else 1.0
    if svg is None:  # a raster plot (a notebook's): legible at full size, if it opens there
        if scale >= 0.999 or figure["zoom"] == figure["src"]:
            return None
        return f"{figure['src'][:60]}: shown at {scale:.0%} of its size and does not open"
    text = svg.read_text(encoding="utf-8")
    smallest, viewbox = smallest_text_pt(text), VIEWBOX.search(text)
    if smallest is None or viewbox is None:
        return None  # no text to read
    full_px = smallest * figure["naturalWidth"] / float(viewbox[1])  # at its drawn size
    shown_px = full_px * scale
    if shown_px >= MIN_TEXT_PX:
        return None
    if figure["zoom"] is None or svg_of(figure["zoom"], site) != svg:
        return f"{svg.name}: smallest text {shown_px:.1f} px and no tap to open it full size"
    if full_px < MIN_TEXT_PX:
        return f"{svg.name}: smallest text {full_px:.1f} px even at full size"
    return None


def test_smallest_text_is_read_from_the_svg() -> None:
    """The reader of text sizes finds matplotlib's glyph scales (and nothing else)."""
    svg = '<g transform="translate(1 2) scale(0.0694 -0.0694)"/><g transform="scale(0.1 -0.1)"/>'
    assert smallest_text_pt(svg) == pytest.approx(6.94)
    assert smallest_text_pt('<g transform="scale(0.015625)"/>') is None


# --- the visits ---------------------------------------------------------------------


def page_problems(report: dict[str, Any], site: Path) -> list[str]:
    """What is wrong with one page in one scheme, from ``MEASURE_JS``'s report."""
    problems = []
    if report["pageWidth"] > report["viewport"] + 1:
        problems.append(f"the page is {report['pageWidth']} px wide on a {report['viewport']}")
    problems += [f"sticks out: {s}" for s in report["sticking"]]
    problems += [f"display math overflows with no scroll cue: {m!r}" for m in report["math"]]
    problems += [f"caption cut at the screen's edge: {c!r}" for c in report["captions"]]
    problems += [f"literal Markdown in the prose: {p!r}" for p in report["prose"]]
    problems += [p for f in report["figures"] if (p := figure_problem(f, site)) is not None]
    return problems


@pytest.fixture(scope="module")
def phone(new_context: Any) -> Any:
    """One tab at phone size for this module's visits."""
    tab = new_context().new_page()
    tab.set_viewport_size(PHONE)
    return tab


def visit(phone: Any, url: str) -> None:
    phone.goto(url)
    phone.evaluate(EAGER_IMAGES_JS)
    phone.wait_for_function(READY_JS)


def toggle_scheme(phone: Any) -> str:
    """Switch to the other scheme with the header's toggle, as a reader does; its name.

    Cheaper than ``schemes.switch_scheme`` (one restyle, not two): what is measured here
    depends on Material's scheme only, not on the browser's colour-scheme preference.
    """
    shown = phone.evaluate(SCHEME_JS)
    wanted = next(name for name in MATERIAL_SCHEME.values() if name != shown)
    phone.locator('form[data-md-component="palette"] label:not([hidden])').click()
    phone.wait_for_function(f"{SCHEME_JS} === {wanted!r}")
    return next(name for name, material in MATERIAL_SCHEME.items() if material == wanted)


def current_scheme(phone: Any) -> str:
    shown = phone.evaluate(SCHEME_JS)
    return next(name for name, material in MATERIAL_SCHEME.items() if material == shown)


@pytest.mark.parametrize("chunk", range(CHUNKS), ids=lambda c: f"pages-{c + 1}-of-{CHUNKS}")
def test_every_page_reads_on_a_phone(
    phone: Any, site_url: str, built_site: Path, chunk: int
) -> None:
    """No sideways overflow, math that scrolls visibly, captions that wrap, legible
    figures: every page of this chunk, in both schemes, at 390 x 844."""
    pages = site_pages(built_site)[chunk::CHUNKS]
    assert pages, "no pages in this chunk"
    problems = []
    for path in pages:
        visit(phone, site_url + path)  # in the scheme the last visit left (Material keeps it)
        seen = []
        for turn in range(2):
            scheme = current_scheme(phone) if turn == 0 else toggle_scheme(phone)
            report = phone.evaluate(MEASURE_JS)
            problems += [f"{path} ({scheme}): {p}" for p in page_problems(report, built_site)]
            seen.append(scheme)
        assert sorted(seen) == ["dark", "light"], seen
    assert not problems, "\n".join(problems)


FIGURE_PAGE = "transformer/multi-head-attention"


def _page_file(site: Path, stem: str) -> str:
    """A page's file in the built site, whether pages are files or folders."""
    for path in (f"{stem}.html", f"{stem}/index.html"):
        if (site / path).is_file():
            return path
    raise AssertionError(f"no built page for {stem}")


def test_a_tap_opens_the_figure_full_size_in_both_schemes(
    phone: Any, site_url: str, built_site: Path
) -> None:
    """A tap on a figure opens its own scheme's SVG at its drawn size, on the page's
    colour; Escape closes it. The other scheme's link is hidden with its image."""
    visit(phone, site_url + _page_file(built_site, FIGURE_PAGE))
    for scheme in schemes_from_current(phone):
        switch_scheme(phone, scheme)
        other = "dark" if scheme == "light" else "light"
        assert phone.locator(f"a.figure-zoom--{other}").first.is_hidden()
        link = phone.locator(f"a.figure-zoom--{scheme}").first
        link.scroll_into_view_if_needed()
        link.click()
        dialog = phone.locator("dialog.figure-zoom__dialog")
        dialog.wait_for(state="visible")
        phone.wait_for_function("() => document.querySelector('.figure-zoom__image').complete")
        shown = phone.evaluate("""() => {
          const img = document.querySelector('.figure-zoom__image');
          const dialog = img.closest('dialog');
          return {
            src: img.src, width: img.getBoundingClientRect().width,
            naturalWidth: img.naturalWidth, open: dialog.open,
            background: getComputedStyle(dialog).backgroundColor,
            page: getComputedStyle(document.body).backgroundColor,
          };
        }""")
        assert shown["open"] and shown["src"].endswith(f"-{scheme}.svg"), shown
        assert shown["width"] == pytest.approx(shown["naturalWidth"], abs=1), shown
        assert shown["background"] == shown["page"], shown
        phone.keyboard.press("Escape")
        dialog.wait_for(state="hidden")
