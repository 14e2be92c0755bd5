"""Every figure on the site is drawn from the package by hooks/figures.py.

The hook's registry, the pages' references and the built site agree: each
registered figure renders in both colour schemes, each reference names a registered
figure, each registered figure is used, and the site ships both SVGs of each.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from mkdocs.exceptions import PluginError

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"


def _load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("figures", REPO_ROOT / "hooks" / "figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("figures", module)
    spec.loader.exec_module(module)
    return module


hook = _load_hook()
NAMES = sorted(hook.FIGURES)


def references() -> dict[str, list[str]]:
    """Figure name -> the pages (relative to docs/) that reference it."""
    found: dict[str, list[str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        for match in hook.FIGURE_REF.finditer(page.read_text(encoding="utf-8")):
            found.setdefault(match["name"], []).append(page.relative_to(DOCS).as_posix())
    return found


@pytest.mark.parametrize("name", NAMES)
def test_figure_renders_in_both_schemes_with_text_as_paths(name: str) -> None:
    light = hook.render_svg(hook.FIGURES[name], "light")
    dark = hook.render_svg(hook.FIGURES[name], "dark")
    for svg in (light, dark):
        assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
        assert "<text" not in svg, "text must be drawn as paths (no font needed offline)"
        assert "<image" in svg or "<path" in svg
    assert light != dark


def test_rendering_is_deterministic() -> None:
    build = hook.FIGURES["journey-weights"]
    assert hook.render_svg(build, "light") == hook.render_svg(build, "light")


def test_every_referenced_figure_is_registered() -> None:
    unknown = {name: pages for name, pages in references().items() if name not in hook.FIGURES}
    assert not unknown, f"pages reference unregistered figures: {unknown}"


def test_every_registered_figure_is_used_by_a_page() -> None:
    unused = sorted(set(hook.FIGURES) - set(references()))
    assert not unused, f"registered figures no page uses: {unused}"


def test_every_figure_reference_has_alt_text() -> None:
    for page in sorted(DOCS.rglob("*.md")):
        for match in hook.FIGURE_REF.finditer(page.read_text(encoding="utf-8")):
            assert len(match["alt"].split()) >= 4, f"{page.name}: alt text for {match['name']}"


def test_reference_becomes_a_light_and_dark_pair_with_caption() -> None:
    markdown = 'Text.\n\n![Weights of six tokens](../figures/journey-weights.svg "The caption")\n'
    out = hook.rewrite_figures(markdown, "walkthrough/page.md")
    assert "](../figures/journey-weights-light.svg#only-light){ loading=lazy }" in out
    assert "](../figures/journey-weights-dark.svg#only-dark){ loading=lazy }" in out
    assert out.count("![Weights of six tokens]") == 2
    assert "<figcaption>The caption</figcaption>" in out
    assert out.startswith('Text.\n\n<figure markdown="span">')


def test_reference_inside_an_admonition_keeps_its_indentation() -> None:
    out = hook.rewrite_figures(
        "!!! note\n    ![A mask of six tokens](../figures/causal-mask.svg)\n", "transformer/x.md"
    )
    assert all(line.startswith("    ") for line in out.splitlines()[1:])
    assert "figcaption" not in out


def test_unknown_figure_fails_with_page_and_name() -> None:
    with pytest.raises(PluginError, match=r"walkthrough/page\.md: unknown figure 'no-such'"):
        hook.rewrite_figures("![Alt](../figures/no-such.svg)\n", "walkthrough/page.md")


def test_wrong_relative_path_fails() -> None:
    with pytest.raises(PluginError, match="must lead to docs/figures/"):
        hook.rewrite_figures("![Alt](figures/causal-mask.svg)\n", "walkthrough/page.md")


def test_built_site_has_both_svgs_of_every_figure(built_site: Path) -> None:
    for name in hook.FIGURES:
        for scheme in ("light", "dark"):
            svg = built_site / "figures" / f"{name}-{scheme}.svg"
            assert svg.is_file(), svg
    for name, pages in references().items():
        for page in pages:
            html = (built_site / Path(page).with_suffix("") / "index.html").read_text("utf-8")
            assert re.search(rf'src="[./]*figures/{name}-light\.svg#only-light"', html), page
            assert re.search(rf'src="[./]*figures/{name}-dark\.svg#only-dark"', html), page
