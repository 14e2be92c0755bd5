"""Every figure on the site is drawn from the package by hooks/figures.py.

The hook's registry, the pages' references and the built site agree: each
registered figure renders in both colour schemes, each reference names a registered
figure, each registered figure is used, and the site ships both SVGs of each.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib.style
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from mkdocs.exceptions import PluginError
from support import DOCS, built_page, main_line_steps

import attnlab
from attnlab import examples
from hooks import diagrams
from hooks import figures as hook

NAMES = sorted(hook.FIGURES)
# The SVGs come from the hook's memo (``rendered``), which is what the site build
# writes: each figure is drawn once per source version, by whichever process of a
# test run (a worker, or the site build) asks first, and read back by the others.
SOURCE_KEY = hook.source_key()


def references() -> dict[str, list[str]]:
    """Figure name -> the pages (relative to docs/) that reference it."""
    found: dict[str, list[str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        for match in hook.FIGURE_REF.finditer(page.read_text(encoding="utf-8")):
            found.setdefault(match["name"], []).append(page.relative_to(DOCS).as_posix())
    return found


@pytest.mark.parametrize("name", NAMES)
def test_figure_renders_in_both_schemes_with_text_as_paths(name: str) -> None:
    light = hook.rendered(name, "light", SOURCE_KEY)
    dark = hook.rendered(name, "dark", SOURCE_KEY)
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
    # each image links to its own SVG (opened full size on a tap), marked with its scheme
    for scheme in ("light", "dark"):
        svg = f"../figures/journey-weights-{scheme}.svg"
        assert f"]({svg}){{ .figure-zoom .figure-zoom--{scheme} }}" in out
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
            html = built_page(built_site, page).read_text("utf-8")
            assert re.search(rf'src="[./]*figures/{name}-light\.svg#only-light"', html), page
            assert re.search(rf'src="[./]*figures/{name}-dark\.svg#only-dark"', html), page


# Pages of the path (hooks/roadmap.py reads it from the nav) that are not chapters: the
# first section's index and the closing page.
NOT_CHAPTERS = {"walkthrough/index.md", "walkthrough/where-next.md"}


def main_line_pages() -> list[str]:
    """The chapters of the main line: the path's pages, as the roadmap reads the nav."""
    return [page for step in main_line_steps() for page in step.pages if page not in NOT_CHAPTERS]


def test_main_line_is_read_from_the_nav() -> None:
    chapters = main_line_pages()
    assert "walkthrough/illustrated.md" in chapters
    assert "transformer/causal-attention.md" in chapters
    assert "efficient/flash-attention.md" in chapters
    assert not {"reference.md", "explorer.md", "walkthrough/errata.md"} & set(chapters)


@pytest.mark.parametrize("page", main_line_pages())
def test_every_main_line_chapter_shows_a_diagram_of_the_idea(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    shown = {match["name"] for match in hook.FIGURE_REF.finditer(text)}
    assert shown & hook.DIAGRAMS, (
        f"{page} shows no conceptual diagram; draw one with hooks/diagrams.py, register it in "
        "a hooks/figures_*.py module with @figure(name, diagram=True), and reference it on the page"
    )


# In matplotlib's SVG each patch (cell, box, operator) is a `<g id="patch_N">` group whose
# path's style gives its fill; text, lines and arrows are other groups.
SVG_PATCH = re.compile(r'<g id="patch_\d+">\s*<path\b[^>]*?style="([^"]*)"')
SVG_FILL = re.compile(r"(?:^|;)\s*fill:\s*(#[0-9a-f]{6})", re.IGNORECASE)


def _palette(scheme: str) -> set[str]:
    """Every colour a diagram may fill a shape with under ``scheme``: each role's colour
    and its tints for cells, operators and masked cells (mixed with the page colour)."""
    with matplotlib.style.context(hook.SCHEMES[scheme]):
        tints = {
            to_hex(diagrams.tint(role, share))
            for role in diagrams.ROLE_COLOURS
            for share in (diagrams.CELL_TINT, 0.15, diagrams.MASKED_TINT)
        }
    return tints | {colour.lower() for colour in diagrams.ROLE_COLOURS.values()}


def _patch_fills(svg: str) -> list[str]:
    return [fill.lower() for style in SVG_PATCH.findall(svg) for fill in SVG_FILL.findall(style)]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("name", sorted(hook.DIAGRAMS))
def test_diagram_is_drawn_in_the_role_colours(name: str, scheme: str) -> None:
    """Every filled shape of a diagram, as the site shows it, is a role's colour or tint."""
    fills = _patch_fills(hook.rendered(name, scheme, SOURCE_KEY))
    assert fills, f"{name} fills no shape: draw it with hooks/diagrams.py"
    strays = sorted(set(fills) - _palette(scheme))
    assert not strays, f"{name} ({scheme}) fills shapes outside the role colours: {strays}"


def test_role_colour_check_refuses_a_stray_colour() -> None:
    """The check above finds the one cell filled in a colour that is no role's."""

    def build() -> Figure:
        fig, ax = diagrams.canvas(4.0, 3.0)
        cells = diagrams.matrix(ax, examples.illustrated().inputs, (0, 0), role="queries")
        diagrams.fit(ax, cells)
        ax.patches[0].set_facecolor("#ff00ff")
        return fig

    fills = _patch_fills(hook.render_svg(build, "light"))
    assert len(fills) == examples.illustrated().inputs.numel()
    assert [fill for fill in fills if fill not in _palette("light")] == ["#ff00ff"]


def _cell_texts(name: str) -> list[str]:
    with matplotlib.style.context("default"):
        fig = hook.FIGURES[name]()
    return [text.get_text() for ax in fig.axes for text in ax.texts]


def test_illustrated_projections_show_the_examples_numbers() -> None:
    ex = examples.illustrated()
    texts = _cell_texts("illustrated-projections")
    for W in (ex.W_query, ex.W_key, ex.W_value):
        for tensor in (ex.inputs, W, ex.inputs @ W):
            cells = [f"{v:.0f}" for v in tensor.flatten().tolist()]
            assert any(texts[i : i + len(cells)] == cells for i in range(len(texts))), tensor


def test_attention_flow_shows_the_journey_context_vector() -> None:
    inputs = examples.your_journey().inputs
    context_vec = attnlab.softmax(inputs @ inputs[1]) @ inputs  # (3,)
    texts = _cell_texts("attention-flow")
    cells = [f"{v:.2f}" for v in context_vec.tolist()]
    assert any(texts[i : i + 3] == cells for i in range(len(texts)))


def test_causal_row_renormalises_over_the_allowed_keys() -> None:
    texts = _cell_texts("causal-row")
    assert texts.count("−∞") == 3
    assert texts[texts.index("0.380") :][:6] == ["0.380", "0.310", "0.310", "0", "0", "0"]


def _contains_run(texts: list[str], cells: list[str]) -> bool:
    return any(texts[i : i + len(cells)] == cells for i in range(len(texts)))


def test_kv_cache_step_shows_the_chapters_cache() -> None:
    """The cached K and V of head 0 after the KV-cache chapter's prompt and one step,
    and head 0's output, computed here through the layer's forward and SDPA."""
    import torch

    torch.manual_seed(0)
    layer = attnlab.GroupedQueryAttention(d_model=16, num_heads=4)  # one kv head per head
    x = torch.randn(1, 10, 16)
    cache = attnlab.KVCache()
    with torch.no_grad():
        layer(x[:, :6], cache=cache)
        layer(x[:, 6:7], cache=cache)
        queries = layer.positions(
            layer.q_proj(x[:, 6:7]).view(1, 1, 4, 4).transpose(1, 2), torch.tensor([6])
        )
        output = attnlab.scaled_dot_product_attention(
            queries, cache.keys, cache.values, enable_gqa=True
        )  # (1, H, 1, D)
    assert cache.keys is not None and cache.values is not None
    texts = _cell_texts("kv-cache-step")
    for tensor in (cache.keys[0, 0], cache.values[0, 0], output[0, 0, 0]):
        cells = [f"{v:.2f}" for v in tensor.flatten().tolist()]
        assert _contains_run(texts, cells), tensor
    assert "pos 6 (new)" in texts


def test_gqa_sharing_shows_the_cache_per_token() -> None:
    """8, 2 and 1 kv heads of width 8: the chapter's 128, 32 and 16 cached numbers."""
    texts = " ".join(_cell_texts("gqa-sharing"))
    for kv_heads in (8, 2, 1):
        assert f"2 × {kv_heads} × 8 = {2 * kv_heads * 8} numbers" in texts
    keys = [t for t in _cell_texts("gqa-sharing") if t.startswith("K")]
    assert len(keys) == 8 + 2 + 1


def test_rotary_plane_shows_equal_scores_for_equal_distances() -> None:
    """The rotary chapter's hand example: the same score at (5, 3) and (102, 100)."""

    def rotate(vector: list[float], angle: float) -> tuple[float, float]:
        c, s = math.cos(angle), math.sin(angle)
        return (c * vector[0] - s * vector[1], s * vector[0] + c * vector[1])

    texts = _cell_texts("rotary-plane")
    for m, n in ((5, 3), (102, 100), (7, 7)):
        q, k = rotate([1.0, 2.0], 0.3 * m), rotate([0.5, -1.0], 0.3 * n)
        assert _contains_run(texts, [f"{q[0]:.2f}", f"{q[1]:.2f}"])
        assert _contains_run(texts, [f"{k[0]:.2f}", f"{k[1]:.2f}"])
        assert f"{q[0] * k[0] + q[1] * k[1]:.4f}" in texts
    assert texts.count("-2.3673") == 2 and texts.count("-1.5000") == 1


def test_window_blocks_count_the_visited_blocks() -> None:
    """Causal and window-3 masks on 8 tokens in 2 x 2 blocks: 10 and 7 of 16 computed."""
    texts = _cell_texts("window-blocks")
    causal = len(attnlab.flash_visited_blocks(8, 8, 2, is_causal=True))
    windowed = len(attnlab.flash_visited_blocks(8, 8, 2, window=3))
    assert (causal, windowed) == (10, 7)
    assert f"causal: {causal} of 16 blocks computed" in texts
    assert f"window 3: {windowed} of 16 blocks computed" in texts
    numbers = [t for t in texts if t.isdigit()]
    assert numbers == [str(i) for i in range(1, causal + 1)] + [
        str(i) for i in range(1, windowed + 1)
    ]


def test_head_split_draws_the_modules_own_heads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The heads are split, attended and merged by MultiHeadAttention's own seams, and show
    the numbers an independent reference (view, transpose, PyTorch's SDPA) gives."""
    import torch
    import torch.nn.functional as F

    calls: list[str] = []
    for seam in ("split_heads", "attend_heads", "merge_heads"):
        original = getattr(attnlab.MultiHeadAttention, seam)

        def spy(
            self: object,
            *args: object,
            seam: str = seam,
            original: object = original,
            **kwargs: object,
        ) -> object:
            calls.append(seam)
            return original(self, *args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(attnlab.MultiHeadAttention, seam, spy)
    texts = _cell_texts("head-split")
    assert calls == ["split_heads"] * 3 + ["attend_heads", "merge_heads"]

    torch.manual_seed(123)
    module = attnlab.MultiHeadAttention(d_in=3, d_out=4, num_heads=2)
    x = examples.your_journey().inputs.unsqueeze(0)  # (1, 6, 3)
    with torch.no_grad():
        q, k, v = (
            W(x).view(1, 6, 2, 2).transpose(1, 2)
            for W in (module.W_query, module.W_key, module.W_value)
        )
        context_vecs = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (1, 2, 6, 2)
        merged = context_vecs.transpose(1, 2).reshape(1, 6, 4)  # (1, 6, 4)
    for tensor in (q[0, 0], q[0, 1], context_vecs[0, 0], context_vecs[0, 1], merged[0]):
        assert _contains_run(texts, [f"{value:.2f}" for value in tensor.flatten().tolist()]), tensor
