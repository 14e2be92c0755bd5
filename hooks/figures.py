"""MkDocs hook: every figure on the site is drawn from the package at build time.

Figures are defined in the ``hooks/figures_<section>.py`` modules, one per section of
the site, each registered where it is drawn with ``@figure(name)`` from
``hooks/figure_registry.py`` (``diagram=True`` for a conceptual diagram in the role
colours of ``hooks/diagrams.py``). This hook imports every ``hooks/figures_*.py`` module
(a new module needs no listing anywhere) and renders each registered figure twice to
SVG, once per colour scheme, with text drawn as paths (no font needed) on a
transparent background:

* ``figures/<name>-light.svg``: matplotlib's default style (dark text);
* ``figures/<name>-dark.svg``: the ``dark_background`` style (light text).

Authors write one image, on a line of its own, with an optional caption as its title::

    ![Alt text for screen readers](../figures/journey-weights.svg "One-line caption")

and the hook rewrites it to the pair that Material shows per scheme (``#only-light``
and ``#only-dark``), wrapped in ``<figure>`` with the caption; each image is a link to
its own SVG, which a tap opens full size (legible on a phone). A name missing from
``FIGURES`` fails the build with the page and the name.

Renders are memoised in memory and on disk, keyed by the sources they are drawn from
(``build_cache``), so a build after a docs edit draws nothing.
"""

from __future__ import annotations

import io
import posixpath
import re
from pathlib import Path
from typing import Any

import matplotlib as mpl
import matplotlib.style
from matplotlib.typing import RcKeyType
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from hooks.build_cache import cached_text, evict_stale, source_key
from hooks.figure_registry import DIAGRAMS, FIGURES, FigureBuilder, load_figure_modules

__all__ = [
    "DIAGRAMS",
    "FIGURES",
    "FIGURE_REF",
    "SCHEMES",
    "figure_markdown",
    "on_files",
    "on_page_markdown",
    "render_svg",
    "rendered",
    "rewrite_figures",
    "zoomable_image",
]

SCHEMES = {"light": "default", "dark": "dark_background"}
SVG_RC: dict[RcKeyType, Any] = {"svg.fonttype": "path", "svg.hashsalt": "attnlab", "font.size": 10}

# `![alt](<../>*figures/<name>.svg "optional caption")` alone on a line.
FIGURE_REF = re.compile(
    r'^(?P<indent>[ \t]*)!\[(?P<alt>[^\]]*)\]\((?P<prefix>(?:\.\./)*)figures/(?P<name>[^)\s"]+)'
    r'\.svg(?:\s+"(?P<caption>[^"]*)")?\)[ \t]*$',
    re.MULTILINE,
)

# Every figure module, imported afresh each time MkDocs loads this hook (`mkdocs serve`
# does so on every rebuild), so FIGURES and DIAGRAMS hold exactly what they define.
load_figure_modules(Path(__file__).resolve().parent)


# --- rendering -------------------------------------------------------------------------


def render_svg(build: FigureBuilder, scheme: str) -> str:
    """Build a figure under the scheme's matplotlib style and return it as SVG text."""
    with matplotlib.style.context(SCHEMES[scheme]), mpl.rc_context(SVG_RC):
        fig = build()
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", transparent=True, metadata={"Date": None})
    return buffer.getvalue()


def rendered(name: str, scheme: str, key: str) -> str:
    """The SVG of figure ``name`` for ``scheme`` (``"light"`` or ``"dark"``), memoised.

    Memoised under the source ``key`` by ``build_cache``: a build whose sources did
    not change draws nothing.
    """
    return cached_text(f"{name}-{scheme}.svg", key, lambda: render_svg(FIGURES[name], scheme))


# --- MkDocs events ---------------------------------------------------------------------


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add ``figures/<name>-light.svg`` and ``-dark.svg`` for every registered figure."""
    key = source_key()
    evict_stale(key)
    for name in FIGURES:
        for scheme in SCHEMES:
            content = rendered(name, scheme, key)
            files.append(File.generated(config, f"figures/{name}-{scheme}.svg", content=content))
    return files


def zoomable_image(alt: str, prefix: str, name: str, scheme: str) -> str:
    """One scheme's image of a figure, wrapped in a link to its own SVG.

    A tap opens the figure full size (``assets/javascripts/figure-zoom.js`` shows it over
    the page, in the page's colours; without JavaScript the link opens the SVG itself):
    on a phone the page scales a figure down to the screen, its text with it. The link
    carries the scheme (``figure-zoom--light``), so the stylesheet hides it with its image.
    """
    svg = f"{prefix}figures/{name}-{scheme}.svg"
    image = f"![{alt}]({svg}#only-{scheme}){{ loading=lazy }}"
    return f"[{image}]({svg}){{ .figure-zoom .figure-zoom--{scheme} }}"


def figure_markdown(alt: str, prefix: str, name: str, caption: str | None, indent: str = "") -> str:
    """The Markdown for one figure: the light and dark images, and the caption if any."""
    light = zoomable_image(alt, prefix, name, "light")
    dark = zoomable_image(alt, prefix, name, "dark")
    lines = ['<figure markdown="span">', f"  {light}", f"  {dark}"]
    if caption:
        lines.append(f"  <figcaption>{caption}</figcaption>")
    lines.append("</figure>")
    return "\n".join(indent + line for line in lines)


def rewrite_figures(markdown: str, src_uri: str) -> str:
    """Replace each ``![alt](../figures/<name>.svg "caption")`` line in a page's Markdown.

    Raises:
        PluginError: The name is not in ``FIGURES``, or the path does not lead to
            ``figures/`` at the root of ``docs/``.
    """

    def replace(match: re.Match[str]) -> str:
        name, prefix = match["name"], match["prefix"]
        target = posixpath.normpath(posixpath.join(posixpath.dirname(src_uri), prefix, "figures"))
        if target != "figures":
            raise PluginError(
                f"{src_uri}: figure {name!r} is referenced as {prefix}figures/; "
                "the path must lead to docs/figures/ from this page"
            )
        if name not in FIGURES:
            raise PluginError(
                f"{src_uri}: unknown figure {name!r}; registered figures: {', '.join(FIGURES)}"
            )
        return figure_markdown(match["alt"], prefix, name, match["caption"], match["indent"])

    return FIGURE_REF.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Turn the page's figure references into light/dark image pairs."""
    return rewrite_figures(markdown, page.file.src_uri)
