"""Every page of the built site, opened in Chromium: math, code, network, links, images, a11y.

Pages are listed at collection time from the sources (``docs/**/*.md`` and the
notebooks mkdocs-jupyter includes), so each failure names its page;
``test_every_built_page_is_checked`` makes sure that list matches the built site.
Each page is opened once, in one browser tab that a worker reuses for every page it
visits (a new tab costs Chromium a new renderer), and checked in both colour schemes,
switched with the header's toggle as a reader does (the scheme the previous visit left
first). The light scheme gets every axe-core rule, and the per-check tests read its
report; the dark one gets the rules whose outcome depends on the colours
(``SCHEME_RULES``): the markup is the same in both schemes, only the palette's colours
change. The colour rules look at one element of each kind
where many are made from one template: the site's chrome and the symbols of a formula
(``SAME_COLOURS_JS`` says exactly which).

Colour contrast inside highlighted code blocks depends only on the token's class and
the scheme (one style sheet colours every block of the site), so the per-page visits
leave ``.highlight`` out of the contrast rule, and
``test_code_highlighting_contrast`` checks every class the site uses, in both schemes,
on the fewest pages that together show them all. With ``ATTNLAB_SCREENSHOTS=1``, a
full-page screenshot of each visit lands in ``artifacts/screenshots/<page>.png`` and
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
from vendored_axe import AXE_MIN_JS, INTEGRITY, VERSION, integrity, load_axe

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
# Highlighted code blocks (Material's and mkdocstrings'): their colours are checked per
# kind of token by test_code_highlighting_contrast, not again on every page.
CODE_BLOCKS = ".highlight"
# Marked by SAME_COLOURS_JS: text whose colours another element of the page already shows.
SAME_COLOURS = "[data-same-colours]"
SCREENSHOTS = os.environ.get("ATTNLAB_SCREENSHOTS") == "1"
RAW_MATH = ("\\(", "\\)", "\\[", "\\]", "$$", "\\frac")


# --- which pages exist --------------------------------------------------------------


class _TolerantLoader(yaml.SafeLoader):
    """Read mkdocs.yml without importing what its ``!!python/name:`` tags name."""


_TolerantLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *_: None)


def _notebook_patterns() -> list[str]:
    config = yaml.load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"), _TolerantLoader)
    for plugin in config.get("plugins") or []:
        if isinstance(plugin, dict) and "mkdocs-jupyter" in plugin:
            options = plugin["mkdocs-jupyter"] or {}
            return list(options.get("include", ["*.py", "*.ipynb"]))
    return []


def _url_of(source: Path) -> str:
    """The page URL (relative to the site root) MkDocs gives a source file."""
    parts = source.with_suffix("").parts
    if parts[-1] in {"index", "README"}:
        parts = parts[:-1]
    return "".join(f"{part}/" for part in parts)


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
    return sorted(
        "".join(f"{part}/" for part in page.relative_to(site).parent.parts)
        for page in site.rglob("index.html")
    )


def slug(url: str) -> str:
    """A file-name-safe name for a page URL: ``walkthrough--scaling``, ``home``."""
    return url.strip("/").replace("/", "--") or "home"


def renders_api_docs(url: str) -> bool:
    """Whether the page's source has mkdocstrings blocks (``::: attnlab...``).

    Such a page (the API reference) is many times longer than a chapter: its checks
    are scheduled first among the browser's (``long``), so they do not end the run.
    """
    source = DOCS / (url or "index").rstrip("/")
    for path in (source.with_suffix(".md"), source / "index.md"):
        if path.is_file():
            return re.search(r"^:::\s", path.read_text(encoding="utf-8"), re.MULTILINE) is not None
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
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    axe_violations: list[dict[str, Any]] = field(default_factory=list)
    scheme: str = ""
    dark_axe_violations: list[dict[str, Any]] = field(default_factory=list)
    dark_scheme: str = ""


SCHEME_JS = "document.body.getAttribute('data-md-color-scheme')"
# Material's palette names: the light scheme is "default", the dark one "slate".
MATERIAL_SCHEME = {"light": "default", "dark": "slate"}


def switch_scheme(page: Any, scheme: str) -> None:
    """Show ``page`` in ``scheme`` ("light" or "dark") the way a reader gets there.

    The browser's preference changes, and the header's palette toggle is clicked when
    the page is not already in that scheme (Material reads the preference only when no
    palette is stored, and the toggle stores one). The body's palette attributes then
    equal those of a page first opened with that preference.
    """
    page.emulate_media(color_scheme=scheme)
    wanted = MATERIAL_SCHEME[scheme]
    if page.evaluate(SCHEME_JS) != wanted:
        page.locator('form[data-md-component="palette"] label:not([hidden])').click()
    page.wait_for_function(f"{SCHEME_JS} === {wanted!r}")


def schemes_from_current(page: Any) -> list[str]:
    """Both schemes, the page's current one first: a tab opens each page in the scheme
    the last one left (Material keeps the reader's choice), so no visit switches back."""
    current = "dark" if page.evaluate(SCHEME_JS) == MATERIAL_SCHEME["dark"] else "light"
    return sorted(MATERIAL_SCHEME, key=lambda name: name != current)


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
        page.wait_for_load_state("networkidle")
        report.data = page.evaluate(COLLECT_JS)
        for scheme in schemes_from_current(page):
            switch_scheme(page, scheme)
            if scheme == "light":
                report.scheme = page.evaluate(SCHEME_JS)
                report.axe_violations = run_page_axe(page)
            else:
                report.dark_scheme = page.evaluate(SCHEME_JS)
                report.dark_axe_violations = run_page_axe(page, SCHEME_RULES)
            if SCREENSHOTS:
                suffix = "" if scheme == "light" else "-dark"
                shot = screenshot.with_stem(f"{screenshot.stem}{suffix}")
                page.screenshot(path=str(shot), full_page=True)
    finally:
        for event, listener in listeners.items():
            page.remove_listener(event, listener)
    return report


def run_axe(
    page: Any,
    rules: tuple[str, ...] = (),
    context: dict[str, Any] | None = None,
    disable: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """Run axe-core (the vendored one, ``vendored_axe``) on ``page``: the given ``rules``, or
    all but ``disable``, on ``context`` (axe's include/exclude; the whole page by default);
    return the violations."""
    options: dict[str, Any] = {"resultTypes": ["violations"]}
    if rules:
        options["runOnly"] = {"type": "rule", "values": list(rules)}
    if disable:
        options["rules"] = {rule: {"enabled": False} for rule in disable}
    results = load_axe().run(page, context=context, options=options)
    return list(results.response["violations"])


def test_vendored_axe_core_is_the_published_file() -> None:
    """The vendored axe.min.js is axe-core's own file of that version (its published hash)."""
    assert integrity(AXE_MIN_JS) == INTEGRITY
    assert AXE_MIN_JS.read_text(encoding="utf-8").startswith(f"/*! axe v{VERSION}\n")


# The text an element holds itself (its text nodes, not its children's), trimmed.
TEXT_OF_JS = """const textOf = (el) => [...el.childNodes]
    .filter((n) => n.nodeType === 3).map((n) => n.textContent).join("").trim();"""

# Marks with `data-same-colours` the text elements whose colours, background and size
# another element of the page already shows, so that the colour rules look at one of
# each where many are made from one template:
# * in the site's chrome (header, tabs, navigation, table of contents, footer), the same
#   template on every page: one visible element per kind, where a kind is the element's
#   computed colour, font size and weight, and the tag, classes, attribute names and
#   inline style of it and of each ancestor up to the region (its background comes
#   from them);
# * in each formula without colour of its own (KaTeX inherits the text's), one with the
#   smallest text: the strictest contrast threshold of them all.
# Of each group the longest visible text is kept (axe does not judge a character or two).
# An element stays unmarked when anything under it would be left unchecked: text of an
# unmarked element, or an image. Returns how many it marked.
SAME_COLOURS_JS = """() => {
  TEXT_OF
  const kind = (el) => [el.tagName, ...[...el.classList].sort(), ...el.getAttributeNames()
    .filter((name) => name !== "class").sort().map((name) => `[${name}]`),
    el.getAttribute("style") ?? ""].join(".");
  const looks = (el) => {
    const style = getComputedStyle(el);
    return [style.color, style.fontSize, style.fontWeight].join(" ");
  };
  // Of a group that looks the same, keep the visible element with the longest text
  // (axe leaves one or two characters unjudged: they may be an icon); mark the others.
  const marked = [];
  const keepOne = (group) => {
    const shown = group.filter((el) => el.checkVisibility());
    if (!shown.length) return;
    const kept = shown.reduce((a, b) => (textOf(b).length > textOf(a).length ? b : a));
    marked.push(...group.filter((el) => el !== kept));
  };
  const regions = ".md-header, .md-tabs, .md-sidebar, .md-footer";
  const outermost = [...document.querySelectorAll(regions)].filter(
    (region) => !region.parentElement.closest(regions));
  const groups = new Map();
  for (const region of outermost) {
    for (const el of region.querySelectorAll("*")) {
      if (!textOf(el)) continue;
      const chain = [looks(el)];
      for (let node = el; node !== region.parentElement; node = node.parentElement) {
        chain.push(kind(node));
      }
      const key = chain.join(" < ");
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(el);
    }
  }
  groups.forEach(keepOne);
  for (const formula of document.querySelectorAll(".katex-html")) {
    if (formula.querySelector('[style*="color"]')) continue;  // \\color, \\colorbox
    const strictness = (el) => {
      const style = getComputedStyle(el);
      return (parseInt(style.fontWeight, 10) >= 700 ? 1e6 : 0) + parseFloat(style.fontSize);
    };
    const texts = [...formula.querySelectorAll("*")].filter(textOf);
    const strictest = Math.min(...texts.map(strictness));
    keepOne(texts.filter((el) => strictness(el) === strictest));
    marked.push(...texts.filter((el) => strictness(el) !== strictest));
  }
  marked.forEach((el) => el.setAttribute("data-same-colours", ""));
  for (const el of marked.reverse()) {  // the deepest first
    const unchecked = [...el.querySelectorAll("*")].some(
      (inner) => inner.matches("img, svg, [role=img]")
        || (textOf(inner) && !inner.hasAttribute("data-same-colours")));
    if (unchecked) el.removeAttribute("data-same-colours");
  }
  return document.querySelectorAll("[data-same-colours]").length;
}""".replace("TEXT_OF", TEXT_OF_JS)


def run_page_axe(page: Any, rules: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """axe-core's ``rules`` (or all) on the page; the colour rules outside the code blocks
    (``test_code_highlighting_contrast`` checks those once per kind of token) and on one
    element of each kind of the page's shared colours (``SAME_COLOURS_JS``).

    Given ``rules`` (the dark visit's: the colour rules and the images') they run once;
    all rules take two runs: every rule but the colour rules on the whole page, then the
    colour rules.
    """
    page.evaluate(SAME_COLOURS_JS)  # marks stay on the page: the same for both schemes
    sampled = {"exclude": [[CODE_BLOCKS], [SAME_COLOURS]]}
    if rules:
        return run_axe(page, rules, sampled)
    return run_axe(page, disable=COLOUR_RULES) + run_axe(page, COLOUR_RULES, sampled)


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
    if not (built_site / url / "index.html").is_file():
        pytest.fail(f"page {url or '/'} was not built", pytrace=False)
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


# --- the colours of highlighted code, once per token class ---------------------------


class _CodeTokens(HTMLParser):
    """The kinds of text inside ``.highlight`` blocks, as ``"<block> <tag>.<classes>"``:
    the classes of the nearest ``.highlight`` element, then the tag and classes of the
    element holding the text (``highlight span.kn``, ``highlight code.`` for unhighlighted
    output...). ``SAMPLE_CODE_TOKENS_JS`` names the elements of a page the same way."""

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


def fewest_pages_showing(tokens_by_page: dict[str, set[str]]) -> list[str]:
    """Pages that together show every token (greedy set cover: the most new ones first)."""
    left = set().union(*tokens_by_page.values()) if tokens_by_page else set()
    chosen: list[str] = []
    while left:
        best = max(sorted(tokens_by_page), key=lambda url: len(tokens_by_page[url] & left))
        chosen.append(best)
        left -= tokens_by_page[best]
    return chosen


def test_fewest_pages_showing_covers_every_token() -> None:
    """The token parser reads classes inside code blocks only, and the cover keeps them all."""
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
    pages = {"a/": {"x", "y"}, "b/": {"y", "z"}, "c/": {"x", "y", "z"}, "d/": {"w"}}
    assert fewest_pages_showing(pages) == ["c/", "d/"]


# Material hides folded solutions and unselected tabs; axe skips what is hidden.
SHOW_ALL_CODE_JS = """() => {
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const style = document.createElement("style");
  style.textContent =
    ".tabbed-set > .tabbed-content > .tabbed-block { display: block !important; }";
  document.head.appendChild(style);
}"""

# Marks one element of each kind of code text (named as _CodeTokens names it) with
# `data-code-sample`, the shown one with the longest text (axe does not judge a character
# or two); returns the kinds.
SAMPLE_CODE_TOKENS_JS = """() => {
  TEXT_OF
  const classes = (el) => [...el.classList].sort().join(".");
  const sample = new Map();  // kind -> the visible element with the longest text
  for (const el of document.querySelectorAll(".highlight, .highlight *")) {
    const text = textOf(el);
    if (!text) continue;
    const kind = `${classes(el.closest(".highlight"))} ${el.tagName.toLowerCase()}.${classes(el)}`;
    const score = (node) => (node.checkVisibility() ? 1e6 : 0) + textOf(node).length;
    if (!sample.has(kind) || score(el) > score(sample.get(kind))) sample.set(kind, el);
  }
  sample.forEach((el) => el.setAttribute("data-code-sample", ""));
  return [...sample.keys()];
}""".replace("TEXT_OF", TEXT_OF_JS)


@pytest.mark.long
def test_code_highlighting_contrast(new_context: Any, site_url: str, built_site: Path) -> None:
    """Every kind of text in the site's highlighted code passes axe-core's colour rules
    (contrast, links told apart), in both schemes: one element of each kind, on the
    fewest pages that show them all. One style sheet colours every block, so the
    colours depend only on the kind (the block's classes, the element's tag and classes)."""
    tokens = {
        url: code_tokens((built_site / url / "index.html").read_text(encoding="utf-8"))
        for url in PAGES
    }
    every_kind = set().union(*tokens.values())
    assert len(every_kind) > 10  # the site's code is highlighted
    tab = new_context("light").new_page()
    checked: set[str] = set()
    failures: list[str] = []
    for url in fewest_pages_showing(tokens):
        tab.goto(site_url + url, wait_until="load")
        tab.wait_for_load_state("networkidle")
        tab.evaluate(SHOW_ALL_CODE_JS)
        checked.update(tab.evaluate(SAMPLE_CODE_TOKENS_JS))
        for scheme in schemes_from_current(tab):
            switch_scheme(tab, scheme)
            violations = run_axe(tab, COLOUR_RULES, {"include": [["[data-code-sample]"]]})
            blocking = [v for v in violations if v.get("impact") in AXE_BLOCKING]
            failures += [f"{url or '/'} ({scheme}): {_describe(v)}" for v in blocking]
    tab.close()
    assert every_kind <= checked, f"kinds of code text not sampled: {every_kind - checked}"
    assert not failures, "contrast violations in code:\n" + "\n".join(failures)


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
    page_file = site / url / "index.html"
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
    if not (built_site / url / "index.html").is_file():
        pytest.fail(f"page {url or '/'} was not built", pytrace=False)
    problems = broken_links(built_site, url)
    assert not problems, "broken internal links:\n" + "\n".join(problems)


def test_link_checker_catches_a_missing_anchor(tmp_path: Path) -> None:
    """The link checker reports a missing file and a missing fragment, and accepts good ones."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text(
        '<h2 id="here">x</h2><a href="#here">ok</a><a href="#gone">bad</a>'
        '<a href="../b/">missing page</a><a href="https://example.org/#x">external</a>',
        encoding="utf-8",
    )
    assert broken_links(tmp_path, "a/") == [
        "#gone: no id 'gone' in a/index.html",
        "../b/: no file b",
    ]


def test_page_list_follows_mkdocs_urls() -> None:
    """Source paths map to MkDocs' directory URLs."""
    assert _url_of(Path("index.md")) == ""
    assert _url_of(Path("walkthrough/scaling.md")) == "walkthrough/scaling/"
    assert _url_of(Path("notebooks/index.md")) == "notebooks/"
    assert _url_of(Path("notebooks/causal-mask.py")) == "notebooks/causal-mask/"
    assert slug("") == "home"
    assert slug("walkthrough/scaling/") == "walkthrough--scaling"
