"""The live view draws each layer as what it is, on synthetic maps, in Chromium.

No model and no built site: the page's own modules (docs/assets/javascripts, served
as they are) draw a made-up run of three layers, one of each kind of
``info().layer_types``, with Material's stylesheets, in both colour schemes and on a
390-px phone. Read back from the picture and the bars:

- ``full_attention``: each cell shaded sqrt(weight) x 60 % of the explorer's colour;
- ``sliding_attention`` (a window of 3): the keys outside the window are not shaded
  but hatched, the caption and legend say the window, their bars are marked;
- ``linear_attention``: the signed implicit attention on a diverging scale (negative
  values orange, positive blue, shaded by |value| / the largest), a legend with the
  scale's ends, bars written with their sign, and no shading or score in the grid of
  heads (its values are not weights).

Then the live section itself (ui/main.js) opens tiny random Gemma 3 and Qwen3.5 files,
written as llama.cpp's converter writes them, and draws their layers by kind.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import material
import pytest
from vendored_axe import run_axe

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
MATERIAL_CSS = Path(material.__file__).parent / "templates" / "assets" / "stylesheets"
PHONE = {"width": 390, "height": 844}
T = 8
WINDOW = 3

HARNESS = """<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<link rel="stylesheet" href="/material/{main}"><link rel="stylesheet" href="/material/{palette}">
<link rel="stylesheet" href="/assets/stylesheets/explorer.css">
<link rel="stylesheet" href="/assets/stylesheets/live.css"></head>
<body data-md-color-scheme="{scheme}" data-md-color-primary="indigo" data-md-color-accent="indigo">
<div class="md-container"><main class="md-main"><div class="md-content"><article class="md-typeset">
<div class="attn-explorer live" id="live-explorer"></div></article></div></main></div>
<script type="module">
import {{ captionedBars, el }} from "/assets/javascripts/explorer.js";
import {{ renderHead, renderOverview }} from "/assets/javascripts/live/ui/draw.js";
import {{ layerKind }} from "/assets/javascripts/live/ui/layers.js";
const T = {T};
const info = {{ num_layers: 3, sliding_window: {WINDOW},
  layer_types: ["full_attention", "sliding_attention", "linear_attention"] }};
const layerHeads = [2, 2, 3];
// full: row i spreads over keys 0..i as 1, 2, ..., i+1 (normalised); sliding: the same
// over the window only; linear: signed values, alternating in sign, shrinking with distance.
const attention = new Float32Array(layerHeads.reduce((a, b) => a + b) * T * T);
let at = 0;
for (let layer = 0; layer < 3; layer++) {{
  for (let head = 0; head < layerHeads[layer]; head++, at += T * T) {{
    for (let i = 0; i < T; i++) {{
      const first = layer === 1 ? Math.max(0, i - {WINDOW} + 1) : 0;
      let total = 0;
      for (let k = first; k <= i; k++) total += k - first + 1;
      for (let k = first; k <= i; k++) {{
        attention[at + i * T + k] = layer === 2
          ? (k % 2 ? -1 : 1) * 0.9 ** (i - k) * (head + 1) / 3
          : (k - first + 1) / total;
      }}
    }}
  }}
}}
const tokens = Array.from({{ length: T }}, (_, i) => "tok" + i);
const result = {{ ids: tokens.map((_, i) => i), tokens, T, layers: 3, heads: 3, layerHeads,
  attention, kinds: [0, 1, 2].map((l) => layerKind(info, l)), top: [], ms: 1 }};
const root = document.getElementById("live-explorer");
const input = () => ({{ input: el("input", {{ type: "range" }}), out: el("output") }});
const view = {{ layer: input(), head: input(), captionAndBars: captionedBars("live-bars-caption"),
  matrix: el("canvas", {{ className: "live__matrix", id: "live-matrix" }}),
  matrixCaption: el("figcaption", {{ id: "live-matrix-caption" }}),
  legend: el("p", {{ className: "live__legend", id: "live-legend", hidden: "" }}),
  grid: el("table", {{ className: "live__heads", id: "live-heads" }}),
  gridCaption: el("p", {{ className: "attn-explorer__caption", id: "live-heads-caption" }}),
  shadeSelect: el("select") }};
view.shadeSelect.appendChild(el("option", {{ value: "query", text: "weight" }}));
root.append(view.captionAndBars[0], view.captionAndBars[1],
  el("figure", {{ className: "live__matrix-box" }}, [view.matrix, view.matrixCaption, view.legend]),
  view.gridCaption, view.grid);
const state = {{ text: "", ids: null, layer: 0, head: 0, query: T - 1, ablate: {{}}, shade: "query",
  fromUrl: false }};
window.show = (layer, head) => {{
  state.layer = layer;
  state.head = head;
  renderHead(view, state, result);
  const scores = {{ sink: null, previous: null, induction: null, length: null }};
  renderOverview(view, {{ state, result, scores }});
}};
window.show(0, 0);
document.body.dataset.ready = "true";
</script></body></html>
"""

# The picture read back: each cell's pixel near its top left corner, and what the bars say.
PICTURE_JS = """() => {
  const canvas = document.querySelector('#live-matrix');
  const T = Number(canvas.dataset.queries);
  const cell = canvas.width / T;
  const pixel = (i, k) => Array.from(canvas.getContext('2d')
    .getImageData(Math.floor((k + 0.15) * cell), Math.floor((i + 0.15) * cell), 1, 1).data);
  const cells = [];
  for (let i = 0; i < T; i++) for (let k = 0; k < T; k++) cells.push(pixel(i, k));
  // a cell's top quarter (clear of the value written in it): its mean alpha, the share of
  // its pixels drawn at all, and whether any is the shading colour
  const colour = getComputedStyle(canvas).color.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const strip = (i, k) => {
    const x = Math.ceil((k + 0.1) * cell), y = Math.ceil((i + 0.05) * cell);
    const data = canvas.getContext('2d')
      .getImageData(x, y, Math.floor(0.8 * cell), Math.floor(0.2 * cell)).data;
    let alpha = 0, drawn = 0, coloured = false;
    for (let p = 0; p < data.length; p += 4) {
      alpha += data[p + 3];
      if (data[p + 3] > 0) drawn += 1;
      const same = [0, 1, 2].every((c) => Math.abs(data[p + c] - colour[c]) <= 2);
      if (data[p + 3] > 0 && same) coloured = true;
    }
    return { alpha: alpha / (data.length / 4), drawn: drawn / (data.length / 4), coloured };
  };
  const bars = [...document.querySelectorAll('#live-explorer .attn-bar')];
  const style = getComputedStyle(canvas);
  return {
    T, type: canvas.dataset.layerType, cells,
    values: bars.map((bar) => bar.querySelector('.attn-bar__value').textContent),
    barClasses: bars.map((bar) => bar.className),
    caption: document.querySelector('#live-bars-caption').textContent,
    matrixCaption: document.querySelector('#live-matrix-caption').textContent,
    gridCaption: document.querySelector('#live-heads-caption').textContent,
    masked: strip(0, T - 1), weakest: strip(T - 1, 0),
    legend: document.querySelector('#live-legend').hidden ? null
      : document.querySelector('#live-legend').textContent,
    colour: style.color, negative: style.columnRuleColor,
    gridShaded: [...document.querySelectorAll('#live-heads .live__head')].map((b) =>
      [Number(b.dataset.layer), b.style.backgroundColor !== '', b.classList.contains('is-signed')]),
    emptyCells: document.querySelectorAll('#live-heads .live__no-head').length,
  };
}"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def docs_url() -> Iterator[str]:
    """docs/ served as it is (the page's modules and stylesheets), on a free port."""
    handler = functools.partial(_Quiet, directory=str(REPO / "docs"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def open_harness(browser: Any, docs_url: str, scheme: str, viewport: dict[str, int]) -> Any:
    """A tab with the harness in ``scheme`` ("default" or "slate") at ``viewport``."""
    context = browser.new_context(viewport=viewport, reduced_motion="reduce")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    main = next(MATERIAL_CSS.glob("main.*.min.css")).name
    palette = next(MATERIAL_CSS.glob("palette.*.min.css")).name
    html = HARNESS.format(main=main, palette=palette, scheme=scheme, T=T, WINDOW=WINDOW)
    page.route(
        f"{docs_url}/harness.html", lambda route: route.fulfill(body=html, content_type="text/html")
    )
    page.route(
        f"{docs_url}/material/*",
        lambda route: route.fulfill(
            path=str(MATERIAL_CSS / route.request.url.rsplit("/", 1)[1]), content_type="text/css"
        ),
    )
    page.goto(f"{docs_url}/harness.html")
    page.wait_for_selector("body[data-ready='true']")
    assert not errors, errors
    return page


def rgb(css: str) -> list[float]:
    """The numbers of a computed ``rgb(...)``/``rgba(...)`` colour."""
    return [float(part) for part in css[css.index("(") + 1 : -1].split(",")]


@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_each_layer_kind_is_drawn_as_what_it_is(browser: Any, docs_url: str, scheme: str) -> None:
    """Full: shaded by weight; sliding: hatched outside its window, which the caption says;
    linear: signed, orange below zero and blue above, with its scale's legend."""
    page = open_harness(browser, docs_url, scheme, {"width": 1280, "height": 900})
    full = page.evaluate(PICTURE_JS)
    assert full["type"] == "full_attention" and full["legend"] is None
    last = [1 + k for k in range(T)]
    expected = [round(2.55 * round(math.sqrt(w / sum(last)) * 60)) for w in last]
    alphas = [full["cells"][(T - 1) * T + k][3] for k in range(T)]
    assert max(abs(a - e) for a, e in zip(alphas, expected, strict=True)) <= 6
    # the masked later keys: a sparse texture (never the shading colour), fainter than the
    # weakest weight drawn (1/36), in both schemes
    masked, weakest = full["masked"], full["weakest"]
    assert 0 < masked["drawn"] < 0.15 and not masked["coloured"], masked
    assert masked["alpha"] < weakest["alpha"] / 2, (masked, weakest)
    assert "whole weight matrix" in full["matrixCaption"] and "dotted" in full["matrixCaption"]
    assert "the more weight" in full["matrixCaption"]
    # the model mixes kinds: every layer's caption names its kind
    assert "a full-attention layer" in full["caption"]
    assert "looks at most" in full["gridCaption"]
    assert "largest in size" in full["gridCaption"] and "fewer heads" in full["gridCaption"]

    page.evaluate("show(1, 1)")
    sliding = page.evaluate(PICTURE_JS)
    assert sliding["type"] == "sliding_attention"
    assert (
        f"last {WINDOW} tokens" in sliding["caption"] and "outside the window" in sliding["legend"]
    )
    outside = [c for c in sliding["barClasses"][: T - WINDOW]]
    assert all("attn-bar--masked" in c for c in outside)
    assert not any("attn-bar--masked" in c for c in sliding["barClasses"][T - WINDOW :])
    colour = rgb(sliding["colour"])[:3]
    # a key outside the window: never the explorer's colour (clear, or the hatching's ink)
    for i, k in [(T - 1, 0), (T - 1, 2), (5, 1)]:
        pixel = sliding["cells"][i * T + k]
        assert pixel[3] == 0 or pixel[:3] != [round(c) for c in colour], (i, k, pixel)
    inside = sliding["cells"][(T - 1) * T + T - 1]
    assert inside[3] > 100 and max(abs(p - c) for p, c in zip(inside[:3], colour, strict=True)) <= 2

    page.evaluate("show(2, 2)")
    linear = page.evaluate(PICTURE_JS)
    assert linear["type"] == "linear_attention"
    assert "not probabilities" in linear["caption"] and "not probabilities" in linear["legend"]
    # its own caption under the matrix: signed, not weights, shaded against the largest
    # absolute value, and why it has 3 heads where the other layers have 2
    caption = linear["matrixCaption"]
    assert "implicit attention matrix" in caption and "not probabilities" in caption
    assert "largest absolute value" in caption and "the more weight" not in caption
    assert "3 heads where the attention layers have 2" in caption and "value heads" in caption
    assert "\u2212" in linear["legend"] and "+" in linear["legend"]
    values = linear["values"]
    assert all(v[0] in "+\u2212" for v in values), values  # every value written with its sign
    negative, positive = rgb(linear["negative"])[:3], rgb(linear["colour"])[:3]
    assert negative[0] > negative[2] and positive[2] > positive[0]  # orange against blue
    for k in range(T):
        pixel = linear["cells"][(T - 1) * T + k]
        want = negative if k % 2 else positive
        assert max(abs(p - c) for p, c in zip(pixel[:3], want, strict=True)) <= 2, (k, pixel)
        assert ("attn-bar--negative" in linear["barClasses"][k]) == bool(k % 2)
    assert any("attn-bar--signed" in c for c in linear["barClasses"])
    # the grid: the linear layer's heads unshaded and marked; the others shaded; layer
    # 0 and 1 have one head fewer than the widest layer
    assert {(layer, shaded, signed) for layer, shaded, signed in linear["gridShaded"]} == {
        (0, True, False),
        (1, True, False),
        (2, False, True),
    }
    assert linear["emptyCells"] == 2
    for layer, head in [(1, 1), (2, 2)]:  # the legends and signed bars, read by axe-core
        page.evaluate(f"show({layer}, {head})")
        serious = [
            v["id"]
            for v in run_axe(page, context="#live-explorer")
            if v["impact"] in ("serious", "critical")
        ]
        assert not serious, (layer, serious)
    page.context.close()


@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_layer_kinds_fit_a_phone(browser: Any, docs_url: str, scheme: str) -> None:
    """On a 390-px phone the matrix and the legend stay inside the screen."""
    page = open_harness(browser, docs_url, scheme, PHONE)
    for layer, head in [(1, 0), (2, 0)]:
        page.evaluate(f"show({layer}, {head})")
        for selector in ["#live-matrix", "#live-legend"]:
            box = page.locator(selector).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.context.close()


LIVE_HARNESS = """<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<link rel="stylesheet" href="/material/{main}"><link rel="stylesheet" href="/material/{palette}">
<link rel="stylesheet" href="/assets/stylesheets/explorer.css">
<link rel="stylesheet" href="/assets/stylesheets/live.css"></head>
<body data-md-color-scheme="default"><article class="md-typeset">
<div class="attn-explorer live" id="live-explorer"></div></article>
<script type="module" src="/assets/javascripts/live/ui/main.js"></script></body></html>
"""


@pytest.mark.long  # writes two GGUF files from transformers models: about 8 s
def test_the_live_section_draws_gemma3_and_qwen35_layers_by_kind(
    browser: Any, docs_url: str, tmp_path: Path
) -> None:
    """Opened from disk (no model of the site's own here), a Gemma 3 file's sliding layer
    says its window and hatches what is outside it, its global layer does not; a Qwen3.5
    file's Gated DeltaNet layer is drawn signed, its full-attention layer as weights."""
    from tests.llama.family_files import write_gemma3_gguf, write_qwen35_gguf

    files = {
        "gemma3": write_gemma3_gguf(tmp_path / "gemma3.gguf"),
        "qwen35": write_qwen35_gguf(tmp_path / "qwen35.gguf"),
    }
    context = browser.new_context(viewport={"width": 1280, "height": 900}, reduced_motion="reduce")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    main = next(MATERIAL_CSS.glob("main.*.min.css")).name
    palette = next(MATERIAL_CSS.glob("palette.*.min.css")).name
    html = LIVE_HARNESS.format(main=main, palette=palette)
    page.route(
        f"{docs_url}/live.html", lambda route: route.fulfill(body=html, content_type="text/html")
    )
    page.route(
        f"{docs_url}/material/*",
        lambda route: route.fulfill(
            path=str(MATERIAL_CSS / route.request.url.rsplit("/", 1)[1]), content_type="text/css"
        ),
    )
    page.goto(f"{docs_url}/live.html")
    page.wait_for_selector("#live-explorer[data-live]")
    # (the tiny tokenizers know few symbols: capitals and punctuation, no space)
    text = "ABC,DEF.ABC,DEF.ABC"
    for name, layers in [("gemma3", (0, 5)), ("qwen35", (0, 3))]:
        page.evaluate("document.querySelector('#live-status').textContent = ''")
        page.evaluate("(text) => { document.querySelector('#live-text').value = text; }", text)
        page.set_input_files("#live-open", str(files[name]))
        page.wait_for_function(
            "document.querySelector('#live-status').textContent.includes('computed in this')"
        )
        seen = {}
        for layer in layers:
            page.evaluate(
                "(layer) => { const range = document.querySelector('#live-layer');"
                " range.value = String(layer); range.dispatchEvent(new Event('input')); }",
                layer,
            )
            picture = page.evaluate(PICTURE_JS)
            seen[picture["type"]] = picture
        if name == "gemma3":
            assert set(seen) == {"sliding_attention", "full_attention"}
            sliding = seen["sliding_attention"]
            assert (
                "last 4 tokens" in sliding["caption"] and "outside the window" in sliding["legend"]
            )
            assert any("attn-bar--masked" in c for c in sliding["barClasses"])
            assert seen["full_attention"]["legend"] is None
            assert not any("attn-bar--masked" in c for c in seen["full_attention"]["barClasses"])
        else:
            assert set(seen) == {"linear_attention", "full_attention"}
            linear = seen["linear_attention"]
            assert "not probabilities" in linear["caption"]
            assert all(v[0] in "+\u2212" or float(v) == 0 for v in linear["values"])
            assert any("\u2212" in v for v in linear["values"])  # random weights: both signs
            weights = [float(v) for v in seen["full_attention"]["values"]]
            assert abs(sum(weights) - 1) < 0.01  # a softmax row, written as it is
            # a linear layer's heads cannot be knocked out (the package refuses it too)
            page.check("#live-mode-ablate")
            page.click("#live-heads .live__head[data-layer='0'][data-head='0']")
            assert "cannot be knocked out" in page.locator("#live-status").inner_text()
            assert page.locator("#live-heads .live__head.is-ablated").count() == 0
            # generating grows every layer's maps, the linear layers' included
            page.check("#live-mode-view")
            before = int(page.locator("#live-matrix").get_attribute("data-queries") or 0)
            page.fill("#live-new-tokens", "4")
            page.click("#live-generate")
            page.wait_for_function(
                "document.querySelector('#live-generate-timing').textContent.startsWith('4 tokens')"
            )
            page.wait_for_function(
                f"Number(document.querySelector('#live-matrix').dataset.queries) === {before + 4}"
            )
            assert page.evaluate(PICTURE_JS)["type"] in {"linear_attention", "full_attention"}
    assert not errors, errors
    context.close()
