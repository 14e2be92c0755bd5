"""Every page of the built site, opened in Chromium: math, code, network, links, images, a11y.

Pages are listed at collection time from the sources (``docs/**/*.md`` and the
notebooks mkdocs-jupyter includes), so each failure names its page;
``test_every_built_page_is_checked`` makes sure that list matches the built site.
Each page is opened once, in one browser tab that a worker reuses for every page it
visits (a new tab costs Chromium a new renderer), with every folded solution opened
and every tab shown (axe-core skips what is hidden), and checked in both colour
schemes, switched with the header's toggle as a reader does (the scheme the previous
visit left first). The light scheme gets every axe-core rule, and the per-check tests
read its report; the dark one gets the rules whose outcome depends on the colours
(``SCHEME_RULES``): the markup is the same in both schemes, only the palette's colours
change. The colour rules look at one element of each kind where many are made from
one template: text that looks the same on the same backgrounds, the symbols of a
formula and the tokens of highlighted code (``PREPARE_JS`` says exactly which).
With ``ATTNLAB_SCREENSHOTS=1``, a full-page screenshot of each visit (as checked:
folded parts open) lands in ``artifacts/screenshots/<page>.png`` and
``<page>-dark.png``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import pytest
import yaml
from schemes import SCHEME_JS, schemes_from_current, switch_scheme
from vendored_axe import AXE_MIN_JS, INTEGRITY, VERSION, ensure_axe, integrity, run_axe

pytestmark = pytest.mark.browser

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = REPO_ROOT / "docs"
AXE_BLOCKING = {"serious", "critical"}
# The axe-core rules that read colours: text contrast, links told apart from text by colour.
COLOUR_RULES = ("color-contrast", "link-in-text-block")
# The rules whose result can change with the colour scheme: the colour rules, and the
# images each scheme shows (Material hides the other scheme's `#only-light` /
# `#only-dark` figure; axe skips hidden ones).
SCHEME_RULES = (*COLOUR_RULES, "image-alt", "role-img-alt")
# Marked by PREPARE_JS: text whose colours another element of the page already shows.
SAME_COLOURS = "[data-same-colours]"
SCREENSHOTS = os.environ.get("ATTNLAB_SCREENSHOTS") == "1"
RAW_MATH = ("\\(", "\\)", "\\[", "\\]", "$$", "\\frac")


# --- which pages exist --------------------------------------------------------------


class _TolerantLoader(yaml.SafeLoader):
    """Read mkdocs.yml without importing what its ``!!python/name:`` tags name, or reading
    the environment for its ``!ENV`` tags."""


_TolerantLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *_: None)
_TolerantLoader.add_constructor("!ENV", lambda *_: None)


def _notebook_patterns() -> list[str]:
    config = yaml.load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"), _TolerantLoader)
    for plugin in config.get("plugins") or []:
        if isinstance(plugin, dict) and "mkdocs-jupyter" in plugin:
            options = plugin["mkdocs-jupyter"] or {}
            return list(options.get("include", ["*.py", "*.ipynb"]))
    return []


def _url_of(source: Path) -> str:
    """The page URL (relative to the site root) MkDocs gives a source file: a file,
    since ``use_directory_urls`` is off (the copy on disk navigates from file://)."""
    return source.with_suffix(".html").as_posix()


def source_pages() -> list[str]:
    """URLs of every page the sources should produce: ``""`` is the home page."""
    patterns = _notebook_patterns()
    urls = {_url_of(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    for path in DOCS.rglob("*"):
        relative = path.relative_to(DOCS).as_posix()
        if path.suffix in {".py", ".ipynb"} and any(
            fnmatch.fnmatch(relative, pattern) for pattern in patterns
        ):
            urls.add(_url_of(path.relative_to(DOCS)))
    return sorted(urls)


def built_pages(site: Path) -> list[str]:
    """URLs of every HTML page in the built site (404.html excluded)."""
    pages = (page for page in site.rglob("*.html") if page.name != "404.html")
    return sorted(page.relative_to(site).as_posix() for page in pages)


def slug(url: str) -> str:
    """A file-name-safe name for a page URL: ``walkthrough--scaling``, ``home``."""
    path = url.removesuffix(".html")
    if path == "index" or path.endswith("/index"):
        path = path.removesuffix("index")
    return path.strip("/").replace("/", "--") or "home"


def renders_api_docs(url: str) -> bool:
    """Whether the page's source has mkdocstrings blocks (``::: attnlab...``).

    Such a page (the API reference) is many times longer than a chapter: its checks
    are scheduled first among the browser's (``long``), so they do not end the run.
    """
    source = (DOCS / url).with_suffix(".md")
    if source.is_file():
        return re.search(r"^:::\s", source.read_text(encoding="utf-8"), re.MULTILINE) is not None
    return False


def page_params(group: str) -> list[Any]:
    """One param per page; under pytest-xdist (--dist loadgroup) a page's tests in one
    ``group`` run on one worker, whose module-scoped fixtures open the page once."""
    return [
        pytest.param(
            url,
            id=slug(url),
            marks=[
                pytest.mark.xdist_group(f"{group}-{slug(url)}"),
                *([pytest.mark.long] if renders_api_docs(url) else []),
            ],
        )
        for url in PAGES
    ]


PAGES = source_pages()
PAGE_PARAMS = page_params("page")  # every check of a page: one worker, one visit


# --- one visit per page -------------------------------------------------------------

# Material 9.8 draws its copy button as `button.md-code__button[data-md-type=copy]`
# (older releases: `.md-clipboard`), inside the `pre` of the block.
COPY_BUTTON = '.md-clipboard, .md-code__button[data-md-type="copy"]'

# Waits until KaTeX and Material's copy buttons are in place (or the timeout says not).
READY_JS = """() => {
  const math = [...document.querySelectorAll('.arithmatex')];
  const codes = [...document.querySelectorAll('pre > code')];
  return document.readyState === 'complete'
    && math.every((el) => el.querySelector('.katex'))
    && codes.every((code) => code.parentElement.querySelector(COPY_BUTTON));
}""".replace("COPY_BUTTON", repr(COPY_BUTTON))

# Text a reader sees in the content, minus code, scripts and KaTeX's own markup.
COLLECT_JS = """() => {
  const skip = 'pre, code, script, style, textarea, noscript, .katex';
  function visibleText(root) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const parts = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.parentElement.closest(skip)) parts.push(node.textContent);
    }
    return parts.join(' ');
  }
  const content = document.querySelector('.md-content');
  const images = [...document.querySelectorAll('img')].map((img) => ({
    src: img.currentSrc || img.src,
    shown: img.getClientRects().length > 0 && getComputedStyle(img).visibility !== 'hidden',
    complete: img.complete,
    naturalWidth: img.naturalWidth,
  }));
  return {
    text: content ? visibleText(content) : '',
    notebookText: [...document.querySelectorAll('.jupyter-wrapper')].map(visibleText).join(' '),
    mathTotal: document.querySelectorAll('.arithmatex').length,
    mathUnrendered: [...document.querySelectorAll('.arithmatex')]
      .filter((el) => !el.querySelector('.katex'))
      .map((el) => el.textContent.slice(0, 80)),
    codeTotal: document.querySelectorAll('pre > code').length,
    codeWithoutCopy: [...document.querySelectorAll('pre > code')]
      .filter((code) => !code.parentElement.querySelector(COPY_BUTTON))
      .map((code) => code.textContent.slice(0, 60)),
    images: images,
  };
}""".replace("COPY_BUTTON", repr(COPY_BUTTON))

# What a reader sees once every fold and tab is open (run after PREPARE_JS): whether the
# page's main heading and first paragraph of text (not the notebook download button) are
# shown (checkVisibility with the visibility and opacity properties, so `visibility:
# hidden` and `opacity: 0` count as hidden, and a box of non-zero size), and how many
# rendered formulas and code blocks are shown.
SHOWN_JS = """() => {
  const shown = (el) => {
    if (!el || !el.checkVisibility({ visibilityProperty: true, opacityProperty: true })) {
      return false;
    }
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.height > 0;
  };
  const article = document.querySelector('.md-content article')
    ?? document.querySelector('.md-content');
  const heading = article ? article.querySelector('h1') : null;
  const paragraph = article
    ? [...article.querySelectorAll('p')]
      .find((p) => p.textContent.trim() && !p.querySelector('.md-button')) ?? null
    : null;
  return {
    heading: heading ? heading.textContent.trim().slice(0, 80) : null,
    headingShown: shown(heading),
    paragraph: paragraph ? paragraph.textContent.trim().slice(0, 80) : null,
    paragraphShown: shown(paragraph),
    mathShown: [...document.querySelectorAll('.arithmatex')]
      .filter((el) => el.querySelector('.katex') && shown(el)).length,
    codeShown: [...document.querySelectorAll('pre > code')].filter(shown).length,
  };
}"""

EAGER_IMAGES_JS = """() => {
  document.querySelectorAll('img[loading="lazy"]').forEach((img) => { img.loading = 'eager'; });
}"""

IMAGES_DONE_JS = "() => [...document.querySelectorAll('img')].every((img) => img.complete)"


@dataclass
class PageReport:
    """What one visit of a page saw, in the light scheme and then in the dark one."""

    url: str
    ready: bool = False
    data: dict[str, Any] = field(default_factory=dict)
    shown: dict[str, Any] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    axe_violations: list[dict[str, Any]] = field(default_factory=list)
    scheme: str = ""
    code_kinds: list[str] = field(default_factory=list)
    dark_axe_violations: list[dict[str, Any]] = field(default_factory=list)
    dark_scheme: str = ""


def visit(page: Any, base: str, url: str, screenshot: Path) -> PageReport:
    """Open ``url`` in ``page`` (a reused tab) and record everything the checks need.

    The light scheme gets every axe-core rule, the dark one ``SCHEME_RULES``.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    report = PageReport(url)

    def on_console(message: Any) -> None:
        if message.type == "error":
            report.console_errors.append(f"console.error: {message.text}")

    def on_response(response: Any) -> None:
        if response.status >= 400:
            report.failed.append(f"{response.url}: HTTP {response.status}")

    listeners = {
        "request": lambda request: report.requests.append(request.url),
        "console": on_console,
        "pageerror": lambda error: report.console_errors.append(f"uncaught: {error}"),
        "requestfailed": lambda request: report.failed.append(f"{request.url}: failed"),
        "response": on_response,
    }
    for event, listener in listeners.items():
        page.on(event, listener)
    try:
        page.goto(base + url, wait_until="load")
        # Not ready in 5 s: the checks then say what is missing (formulas, buttons).
        with contextlib.suppress(PlaywrightTimeout):
            page.wait_for_function(READY_JS, timeout=5_000)
            report.ready = True
        page.evaluate(EAGER_IMAGES_JS)
        # The image check reports the ones that never loaded.
        with contextlib.suppress(PlaywrightTimeout):
            page.wait_for_function(IMAGES_DONE_JS, timeout=5_000)
        report.data = page.evaluate(COLLECT_JS)
        report.code_kinds = page.evaluate(PREPARE_JS)
        report.shown = page.evaluate(SHOWN_JS)
        ensure_axe(page)
        page.evaluate(SKIP_MARKED_JS, list(COLOUR_RULES))
        for scheme in schemes_from_current(page):
            switch_scheme(page, scheme)
            if scheme == "light":
                report.scheme = page.evaluate(SCHEME_JS)
                report.axe_violations = run_axe(page)
            else:
                report.dark_scheme = page.evaluate(SCHEME_JS)
                report.dark_axe_violations = run_axe(page, SCHEME_RULES)
            if SCREENSHOTS:
                suffix = "" if scheme == "light" else "-dark"
                shot = screenshot.with_stem(f"{screenshot.stem}{suffix}")
                page.screenshot(path=str(shot), full_page=True)
        # Every request the page makes (the search index, ...) is in the report: by now
        # the network has long been idle, so this rarely waits.
        page.wait_for_load_state("networkidle")
    finally:
        for event, listener in listeners.items():
            page.remove_listener(event, listener)
    return report


def test_vendored_axe_core_is_the_published_file() -> None:
    """The vendored axe.min.js is axe-core's own file of that version (its published hash)."""
    assert integrity(AXE_MIN_JS) == INTEGRITY
    assert AXE_MIN_JS.read_text(encoding="utf-8").startswith(f"/*! axe v{VERSION}\n")


# The text an element holds itself (its text nodes, not its children's), trimmed.
TEXT_OF_JS = """const textOf = (el) => [...el.childNodes]
    .filter((n) => n.nodeType === 3).map((n) => n.textContent).join("").trim();"""

# Readies a loaded page for axe-core, and returns the kinds of code text it samples.
#
# 1. Shows everything: Material folds solutions (`details`) and shows one tab of a set,
#    and axe skips what is hidden, so every `details` is opened and every tab shown.
# 2. Marks with `data-same-colours` the text elements whose colours, background and
#    size another element of the page already shows, so that the colour rules look at
#    one element of each kind where many are made from one template:
#    * in the site's chrome (header, tabs, navigation, table of contents, footer) and
#      its content: one element per kind, where a kind is the element's computed
#      colour, font size, weight and text shadow, and the tag, classes, attribute
#      names, inline style and computed background (colour, image, opacity, filter,
#      blend mode) of it and of each ancestor up to the region: what its contrast is
#      computed from;
#    * in each formula without colour of its own (KaTeX inherits the text's), one of
#      the smallest symbols: the strictest contrast threshold of them all;
#    * in highlighted code, where one style sheet colours every block of the site by
#      the token's class: one element per kind, named as `_CodeTokens` names them (the
#      block's classes, the element's tag and classes).
#    Of each group the shown element with the longest text is kept (axe does not judge
#    a character or two). The colour rules then skip marked elements (`SKIP_MARKED_JS`);
#    each element's own text is its own check, so an element inside a marked one is
#    still checked unless it is marked itself.
PREPARE_JS = """() => {
  TEXT_OF
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const style = document.createElement("style");
  style.textContent =
    ".tabbed-set > .tabbed-content > .tabbed-block { display: block !important; }";
  document.head.appendChild(style);

  const marked = [];
  // Keeps the shown element with the longest text; marks the others; returns the kept.
  const keepOne = (group) => {
    const shown = group.filter((el) => el.checkVisibility());
    if (!shown.length) return null;
    const kept = shown.reduce((a, b) => (textOf(b).length > textOf(a).length ? b : a));
    marked.push(...group.filter((el) => el !== kept));
    return kept;
  };
  const groupBy = (elements, key) => {
    const groups = new Map();
    for (const el of elements) {
      const k = key(el);
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(el);
    }
    return groups;
  };
  const withText = (root) => [...root.querySelectorAll("*")].filter(textOf);

  // An element's kind: its tag, classes, attribute names and inline style, and its
  // computed background, opacity and filter (a background may come from a rule that
  // classes do not show, such as :nth-child).
  const kind = (el) => {
    const style = getComputedStyle(el);
    return [el.tagName, ...[...el.classList].sort(), ...el.getAttributeNames()
      .filter((name) => name !== "class").sort().map((name) => `[${name}]`),
      el.getAttribute("style") ?? "", style.backgroundColor, style.backgroundImage,
      style.opacity, style.filter, style.mixBlendMode].join(".");
  };
  const chains = new Map();  // element -> the kinds of it and its ancestors, up to a region
  const chain = (el, top) => {
    if (el === top) return "";
    if (!chains.has(el)) chains.set(el, `${kind(el)} < ${chain(el.parentElement, top)}`);
    return chains.get(el);
  };
  const looks = (el) => {
    const style = getComputedStyle(el);
    return [style.color, style.fontSize, style.fontWeight, style.textShadow].join(" ");
  };
  const regions = ".md-header, .md-tabs, .md-sidebar, .md-content, .md-footer";
  const ownMarks = ".katex, .highlight";  // formulas and code: their own rules, below
  const text = [...document.querySelectorAll(regions)]
    .filter((region) => !region.parentElement.closest(regions))
    .flatMap((region) => withText(region)
      .filter((el) => !el.closest(ownMarks))
      .map((el) => [el, `${looks(el)} | ${chain(el, region.parentElement)}`]));
  const keys = new Map(text);
  groupBy(text.map(([el]) => el), (el) => keys.get(el)).forEach(keepOne);

  for (const formula of document.querySelectorAll(".katex-html")) {
    if (formula.querySelector('[style*="color"]')) continue;  // \\color, \\colorbox
    const strictness = (el) => {
      const style = getComputedStyle(el);
      return (parseInt(style.fontWeight, 10) >= 700 ? 1e6 : 0) + parseFloat(style.fontSize);
    };
    const texts = withText(formula);
    const strictest = Math.min(...texts.map(strictness));
    keepOne(texts.filter((el) => strictness(el) === strictest));
    marked.push(...texts.filter((el) => strictness(el) !== strictest));
  }

  const classes = (el) => [...el.classList].sort().join(".");
  const code = [...document.querySelectorAll(".highlight, .highlight *")].filter(textOf);
  const codeKinds = [];
  groupBy(code, (el) => `${classes(el.closest(".highlight"))} `
    + `${el.tagName.toLowerCase()}.${classes(el)}`).forEach((group, codeKind) => {
    if (keepOne(group)) codeKinds.push(codeKind);
  });

  marked.forEach((el) => el.setAttribute("data-same-colours", ""));
  return codeKinds;
}""".replace("TEXT_OF", TEXT_OF_JS)

# Makes the colour rules skip the elements PREPARE_JS marked: each rule's own selector,
# with `:not([data-same-colours])` on every part of it.
SKIP_MARKED_JS = """(ids) => {
  for (const id of ids) {
    const rule = axe._audit.rules.find((r) => r.id === id);
    if (!rule) throw new Error(`axe-core has no rule ${id}`);
    const selector = rule.selector.split(",")
      .map((part) => `${part.trim()}:not(SAME_COLOURS)`).join(", ");
    axe.configure({ rules: [{ id, selector }] });
  }
}""".replace("SAME_COLOURS", SAME_COLOURS)


@pytest.fixture(scope="module")
def reports(new_context: Any, site_url: str, screenshot_dir: Path) -> Any:
    """Visit each page once, on first request, in one light-scheme tab of this worker."""
    tab = new_context("light").new_page()
    cache: dict[str, PageReport] = {}

    def report_for(url: str) -> PageReport:
        if url not in cache:
            cache[url] = visit(tab, site_url, url, screenshot_dir / f"{slug(url)}.png")
        return cache[url]

    return report_for


@pytest.fixture
def report(url: str, reports: Any, built_site: Path) -> PageReport:
    """The report of the visit of the page under test (``url`` comes from parametrize)."""
    if not (built_site / url).is_file():
        pytest.fail(f"page {url} was not built", pytrace=False)
    result: PageReport = reports(url)
    return result


# --- the checks ---------------------------------------------------------------------


def test_every_built_page_is_checked(built_site: Path) -> None:
    """The pages listed from the sources are exactly the pages in the built site."""
    assert built_pages(built_site) == PAGES


@pytest.mark.parametrize("url", PAGE_PARAMS)
def test_math_is_rendered_by_katex(report: PageReport) -> None:
    """Every formula has KaTeX markup and no raw TeX delimiter is left in the text."""
    data = report.data
    assert not data["mathUnrendered"], f"formulas KaTeX did not render: {data['mathUnrendered']}"
    leftovers = [marker for marker in RAW_MATH if marker in data["text"]]
    assert not leftovers, f"raw TeX left in the page text: {leftovers}"
    notebook = data["notebookText"]
    if "$" in notebook:
        # a `$` followed by a TeX command on a notebook page: math left unrendered
        raw = re.findall(r"\$[^$\n]{0,40}\\[A-Za-z]+", notebook)
        assert not raw, f"raw $...$ math left in the notebook: {raw[:5]}"


@pytest.mark.parametrize("url", PAGE_PARAMS)
def test_code_blocks_have_copy_buttons(report: PageReport) -> None:
    """Material put a copy button on every ``pre > code`` block."""
    missing = report.data["codeWithoutCopy"]
    assert not missing, f"{len(missing)} of {report.data['codeTotal']} blocks lack one: {missing}"


@pytest.mark.parametrize("url", PAGE_PARAMS)
def test_nothing_leaves_localhost_or_fails(report: PageReport) -> None:
    """No request to another host, no console error, no failed request or 4xx/5xx."""
    foreign = [
        url
        for url in report.requests
        if urlsplit(url).scheme in {"http", "https", "ws", "wss"}
        and urlsplit(url).hostname != "127.0.0.1"
    ]
    assert not foreign, f"requests that leave 127.0.0.1: {foreign}"
    assert not report.console_errors, "\n".join(report.console_errors)
    assert not report.failed, "failed resources:\n" + "\n".join(report.failed)


@pytest.mark.parametrize("url", PAGE_PARAMS)
def test_images_load(report: PageReport) -> None:
    """Every shown image decoded; every image's file (both palettes' ones) is served."""
    broken = [
        image["src"]
        for image in report.data["images"]
        if image["shown"] and not (image["complete"] and image["naturalWidth"] > 0)
    ]
    assert not broken, f"images shown but not loaded: {broken}"
    missing = []
    for image in report.data["images"]:
        if image["src"].startswith("data:"):
            continue
        try:
            with urllib.request.urlopen(image["src"], timeout=10) as response:
                status = response.status
        except urllib.error.HTTPError as err:
            status = err.code
        if status != 200:
            missing.append(f"{image['src']}: HTTP {status}")
    assert not missing, f"image files not served: {missing}"


def _describe(violation: dict[str, Any]) -> str:
    targets = "; ".join(", ".join(map(str, node["target"])) for node in violation["nodes"][:8])
    return f"{violation['id']} ({violation['impact']}): {violation['help']} -> {targets}"


@pytest.mark.parametrize("url", PAGE_PARAMS)
def test_no_serious_accessibility_violations(report: PageReport) -> None:
    """axe-core finds no serious or critical violation (light scheme)."""
    assert report.scheme == "default"
    blocking = [v for v in report.axe_violations if v.get("impact") in AXE_BLOCKING]
    assert not blocking, "axe-core violations:\n" + "\n".join(map(_describe, blocking))


@pytest.mark.parametrize("url", PAGE_PARAMS)
def test_no_serious_accessibility_violations_in_dark_scheme(report: PageReport) -> None:
    """The dark scheme passes axe-core's scheme-dependent rules (contrast) too."""
    assert report.dark_scheme == "slate"
    blocking = [v for v in report.dark_axe_violations if v.get("impact") in AXE_BLOCKING]
    assert not blocking, "axe-core violations:\n" + "\n".join(map(_describe, blocking))


@pytest.mark.parametrize("url", PAGE_PARAMS)
def test_page_is_ready_with_its_heading_and_first_paragraph_shown(report: PageReport) -> None:
    """KaTeX and the copy buttons are in place within 5 s, and the reader sees the page's
    main heading and its first paragraph (not hidden, not transparent, not of zero size)."""
    assert report.ready, "not ready in 5 s (formulas or copy buttons missing)"
    shown = report.shown
    assert shown["heading"], "no h1 in the page's content"
    assert shown["headingShown"], f"main heading {shown['heading']!r} is not shown"
    assert shown["paragraph"], "no paragraph in the page's content"
    assert shown["paragraphShown"], f"first paragraph {shown['paragraph']!r} is not shown"


class _BlockCounter(HTMLParser):
    """Counts, in a built page's HTML, the formulas (``.arithmatex`` elements) and the code
    blocks (``pre > code``): what a reader of the page should see rendered."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.math = 0
        self.code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID_TAGS:
            return
        if "arithmatex" in (dict(attrs).get("class") or "").split():
            self.math += 1
        if tag == "code" and self.stack and self.stack[-1] == "pre":
            self.code += 1
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID_TAGS:
            return
        while self.stack and self.stack.pop() != tag:
            pass


VOID_TAGS = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)


def formulas_and_code_blocks(html: str) -> tuple[int, int]:
    """``(formulas, code blocks)`` in one page's HTML."""
    counter = _BlockCounter()
    counter.feed(html)
    return counter.math, counter.code


def test_block_counter_counts_formulas_and_code_blocks() -> None:
    """A formula is an ``.arithmatex`` element; a code block a ``code`` right inside ``pre``."""
    html = (
        '<p><span class="arithmatex">\\(x\\)</span> and <code>inline</code><br>'
        '<img src="a.png"></p><div class="arithmatex">\\[y\\]</div>'
        "<pre><span></span><code>a = 1</code></pre><pre><code>b</code></pre>"
    )
    assert formulas_and_code_blocks(html) == (2, 2)


@pytest.mark.parametrize("url", PAGE_PARAMS)
def test_every_formula_and_code_block_in_the_html_is_shown(
    report: PageReport, built_site: Path
) -> None:
    """With every fold and tab open, the page shows as many rendered formulas and code
    blocks as its built HTML holds (a hidden or unrendered one is missing from the count)."""
    html = (built_site / report.url).read_text(encoding="utf-8")
    math, code = formulas_and_code_blocks(html)
    shown = (report.shown["mathShown"], report.shown["codeShown"])
    in_html = (math, code)
    assert shown == in_html, f"(formulas, code blocks) shown {shown}, in the HTML {in_html}"


# --- the colours of highlighted code: one element of each kind --------------------------


class _CodeTokens(HTMLParser):
    """The kinds of text inside ``.highlight`` blocks, as ``"<block> <tag>.<classes>"``:
    the classes of the nearest ``.highlight`` element, then the tag and classes of the
    element holding the text (``highlight span.kn``, ``highlight code.`` for unhighlighted
    output...). ``PREPARE_JS`` names the elements of a page the same way."""

    VOID = frozenset({"br", "img", "input", "hr", "meta", "link", "wbr", "source", "area", "col"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str, str]] = []  # (tag, classes, enclosing block or "")
        self.tokens: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            return
        classes = ".".join(sorted((dict(attrs).get("class") or "").split()))
        block = self.stack[-1][2] if self.stack else ""
        if "highlight" in classes.split("."):
            block = classes
        self.stack.append((tag, classes, block))

    def handle_endtag(self, tag: str) -> None:
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        if data.strip() and self.stack and self.stack[-1][2]:
            tag, classes, block = self.stack[-1]
            self.tokens.add(f"{block} {tag}.{classes}")


def code_tokens(html: str) -> set[str]:
    """The token classes of the highlighted code in one page's HTML."""
    parser = _CodeTokens()
    parser.feed(html)
    return parser.tokens


def test_code_tokens_are_read_inside_code_blocks_only() -> None:
    """Prose outside a ``.highlight`` block is not code; unhighlighted text is ``code.``."""
    html = (
        '<p><span class="n">prose</span></p><div class="language-python highlight"><pre>'
        '<span></span><code><span class="kn">import</span> <span class="nn">torch</span>\n'
        "tensor([1.])</code></pre></div>"
    )
    assert code_tokens(html) == {
        "highlight.language-python span.kn",
        "highlight.language-python span.nn",
        "highlight.language-python code.",
    }


@pytest.mark.parametrize("url", PAGE_PARAMS)
def test_every_kind_of_code_text_is_checked(report: PageReport, built_site: Path) -> None:
    """The colour rules of both schemes saw a shown element of every kind of code text in
    the page's HTML (one style sheet colours every block by kind: one element stands for
    all of its kind)."""
    html = (built_site / report.url).read_text(encoding="utf-8")
    missing = code_tokens(html) - set(report.code_kinds)
    assert not missing, f"kinds of code text no shown element stood for: {sorted(missing)}"


# --- links and anchors (from the built HTML; no browser needed) ----------------------


class _LinkCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if attr.get("id"):
            self.ids.add(str(attr["id"]))
        if tag == "a" and attr.get("name"):
            self.ids.add(str(attr["name"]))
        if tag == "a" and attr.get("href") is not None:
            self.hrefs.append(str(attr["href"]))


_PARSED: dict[Path, _LinkCollector] = {}


def _parse(path: Path) -> _LinkCollector:
    if path not in _PARSED:
        collector = _LinkCollector()
        collector.feed(path.read_text(encoding="utf-8"))
        _PARSED[path] = collector
    return _PARSED[path]


def broken_links(site: Path, url: str) -> list[str]:
    """Internal links of page ``url`` whose file or ``#fragment`` does not exist."""
    base = "http://127.0.0.1/"
    page_file = site / url
    problems = []
    for href in _parse(page_file).hrefs:
        target = urlsplit(urljoin(base + url, href))
        if target.scheme not in {"http", "https"} or target.hostname != "127.0.0.1":
            continue  # external, mailto:, javascript:, ...
        path = site / unquote(target.path).lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            problems.append(f"{href}: no file {path.relative_to(site)}")
            continue
        fragment = unquote(target.fragment)
        if fragment and path.suffix == ".html" and fragment not in _parse(path).ids:
            problems.append(f"{href}: no id {fragment!r} in {path.relative_to(site)}")
    return problems


@pytest.mark.parametrize("url", PAGE_PARAMS)
def test_internal_links_and_anchors_resolve(built_site: Path, url: str) -> None:
    """Every link within the site names an existing file and, if any, an existing id."""
    if not (built_site / url).is_file():
        pytest.fail(f"page {url} was not built", pytrace=False)
    problems = broken_links(built_site, url)
    assert not problems, "broken internal links:\n" + "\n".join(problems)


def test_link_checker_catches_a_missing_anchor(tmp_path: Path) -> None:
    """The link checker reports a missing file and a missing fragment, and accepts good ones."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "c.html").write_text('<h2 id="there">y</h2>', encoding="utf-8")
    (tmp_path / "a" / "index.html").write_text(
        '<h2 id="here">x</h2><a href="#here">ok</a><a href="#gone">bad</a>'
        '<a href="c.html#there">ok</a><a href="c.html#nowhere">bad</a>'
        '<a href="../b.html">missing page</a><a href="https://example.org/#x">external</a>',
        encoding="utf-8",
    )
    assert broken_links(tmp_path, "a/index.html") == [
        "#gone: no id 'gone' in a/index.html",
        "c.html#nowhere: no id 'nowhere' in a/c.html",
        "../b.html: no file b.html",
    ]


def test_page_list_follows_mkdocs_urls() -> None:
    """Source paths map to MkDocs' file URLs (``use_directory_urls: false``)."""
    assert _url_of(Path("index.md")) == "index.html"
    assert _url_of(Path("walkthrough/scaling.md")) == "walkthrough/scaling.html"
    assert _url_of(Path("notebooks/index.md")) == "notebooks/index.html"
    assert _url_of(Path("notebooks/causal-mask.py")) == "notebooks/causal-mask.html"
    assert slug("index.html") == "home"
    assert slug("notebooks/index.html") == "notebooks"
    assert slug("walkthrough/scaling.html") == "walkthrough--scaling"
