"""Interactive features in Chromium: palette toggle, search, and the attention explorer.

The explorer's numbers are checked against ``attnlab.attention_weights`` called here,
directly, not against the JSON the page reads: a bug anywhere between the package
and the screen (export, rounding, indexing, drawing) shows up as a mismatch.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from schemes import switch_scheme
from vendored_axe import run_axe

from attnlab import attention_weights, examples

pytestmark = pytest.mark.browser

TEMPERATURES = (0.25, 0.5, 1.0, 2.0, 4.0)


@pytest.fixture(scope="module")
def tab(new_context: Any) -> Any:
    """One tab for this module's tests on a worker (a new tab costs a new renderer)."""
    return new_context("light").new_page()


@pytest.fixture
def page(tab: Any, site_url: str) -> Any:
    """The module's tab, as a fresh one would be: light scheme, nothing stored.

    After the test, the site's storage (Material keeps the palette and search state
    there) is cleared, so the next test starts as a new reader would.
    """
    errors: list[str] = []

    def on_error(error: Any) -> None:
        errors.append(str(error))

    tab.emulate_media(color_scheme="light")
    tab.on("pageerror", on_error)
    yield tab
    tab.remove_listener("pageerror", on_error)
    if tab.url.startswith(site_url):
        tab.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
    assert not errors, f"uncaught JavaScript errors: {errors}"


# --- palette and search ----------------------------------------------------------------


def _scheme(page: Any) -> str:
    return str(page.evaluate("document.body.getAttribute('data-md-color-scheme')"))


def _background(page: Any) -> str:
    return str(page.evaluate("getComputedStyle(document.body).backgroundColor"))


def test_palette_toggle_switches_between_light_and_dark(page: Any, site_url: str) -> None:
    """Clicking the header toggle flips the scheme and the page background, and back."""
    page.goto(site_url)
    assert _scheme(page) == "default"
    light = _background(page)
    page.locator('form[data-md-component="palette"] label:not([hidden])').click()
    page.wait_for_function("document.body.getAttribute('data-md-color-scheme') === 'slate'")
    dark = _background(page)
    assert dark != light
    page.locator('form[data-md-component="palette"] label:not([hidden])').click()
    page.wait_for_function("document.body.getAttribute('data-md-color-scheme') === 'default'")
    assert _background(page) == light


def test_search_finds_softmax(page: Any, site_url: str) -> None:
    """Typing "softmax" into Material's search lists at least one result."""
    page.goto(site_url)
    # Material's search worker says "Initializing search" until its index is loaded.
    page.wait_for_function(
        """() => {
          const meta = document.querySelector('.md-search-result__meta');
          return meta && meta.textContent.trim() && !/initializing/i.test(meta.textContent);
        }"""
    )
    search = page.locator("input.md-search__input")  # in the header at this width
    search.click()
    search.press_sequentially("softmax")  # real key events: Material listens for keyup
    results = page.locator(".md-search-result__item")
    results.first.wait_for(state="visible")
    assert results.count() >= 1
    assert "softmax" in results.first.inner_text().lower()


# --- the explorer ------------------------------------------------------------------------


def _life_is_short_queries_keys() -> tuple[torch.Tensor, torch.Tensor]:
    """The tutorial's W_query, W_key: torch.rand(24, 16) each, right after seed 123."""
    inputs = examples.life_is_short(embed_dim=16, seed=123).inputs  # (6, 16)
    generator = torch.Generator().manual_seed(123)
    W_query = torch.rand(24, 16, generator=generator)
    W_key = torch.rand(24, 16, generator=generator)
    return inputs @ W_query.transpose(0, 1), inputs @ W_key.transpose(0, 1)  # (6, 24) each


def expected_weights(sentence: int, *, scaled: bool, causal: bool, temperature: float) -> Any:
    """The package's weights for one explorer setting, as the page should print them."""
    if sentence == 2:
        queries, keys = _life_is_short_queries_keys()
    else:
        inputs = (examples.your_journey() if sentence == 0 else examples.dream_big()).inputs
        queries = keys = inputs
    base = 1 / math.sqrt(keys.shape[-1]) if scaled else 1.0
    weights = attention_weights(queries, keys, is_causal=causal, scale=base / temperature)
    return [[f"{value:.4f}" for value in row] for row in weights.tolist()]


def _open_explorer(page: Any, site_url: str) -> None:
    page.goto(site_url + "explorer.html")
    page.wait_for_selector("#attention-explorer[data-ready='true']")


def _bars(page: Any) -> list[str]:
    bars = page.locator("#attention-explorer .attn-bar__value")
    return [text.strip() for text in bars.all_inner_texts()]


def _heatmap(page: Any) -> list[list[str]]:
    rows = page.locator("#attention-explorer .attn-explorer__heatmap tbody tr")
    return [
        [cell.strip() for cell in rows.nth(i).locator("td").all_inner_texts()]
        for i in range(rows.count())
    ]


def _pressed(page: Any) -> list[str]:
    return page.locator(
        "#attention-explorer .attn-explorer__token[aria-pressed='true']"
    ).all_inner_texts()


def test_explorer_opens_on_the_walkthrough_numbers(page: Any, site_url: str) -> None:
    """Default view: "journey" in "Your journey starts...", unscaled, no mask, temperature 1."""
    _open_explorer(page, site_url)
    assert _pressed(page) == ["journey"]
    expected = expected_weights(0, scaled=False, causal=False, temperature=1.0)
    assert _bars(page) == expected[1]
    assert _bars(page) == ["0.1385", "0.2379", "0.2333", "0.1240", "0.1082", "0.1581"]
    assert _heatmap(page) == expected
    selected = page.locator("#attention-explorer .attn-explorer__heatmap tbody tr.is-selected")
    assert selected.count() == 1
    assert selected.locator("th").inner_text() == "journey"


def test_explorer_follows_clicks_switches_and_temperature(page: Any, site_url: str) -> None:
    """Each control changes the bars and table to the package's weights for that setting."""
    _open_explorer(page, site_url)
    page.get_by_label("Sentence").select_option(label="Dream big and work for it")
    page.locator("#attention-explorer .attn-explorer__token", has_text="work").click()
    assert _pressed(page) == ["work"]
    state = {"scaled": False, "causal": False, "temperature": 1.0}
    assert _bars(page) == expected_weights(1, **state)[3]  # type: ignore[arg-type]

    page.get_by_label("Scale scores by").check()
    state["scaled"] = True
    assert _bars(page) == expected_weights(1, **state)[3]  # type: ignore[arg-type]

    page.get_by_label("Causal mask").check()
    state["causal"] = True
    expected = expected_weights(1, **state)  # type: ignore[arg-type]
    assert _bars(page) == expected[3]
    assert _bars(page)[4:] == ["0.0000", "0.0000"]  # "work" cannot see "for", "it"
    assert _heatmap(page) == expected

    slider = page.get_by_label("Softmax temperature")
    for key, index in (("End", 4), ("Home", 0), ("ArrowRight", 1)):
        slider.press(key)
        state["temperature"] = TEMPERATURES[index]
        assert page.locator("#attn-temperature-value").inner_text() == f"{TEMPERATURES[index]:g}"
        assert _bars(page) == expected_weights(1, **state)[3]  # type: ignore[arg-type]


def test_explorer_life_is_short_matches_the_tutorial(page: Any, site_url: str) -> None:
    """The embedded sentence, scaled by 1/sqrt(24): "is" attends as the tutorial prints."""
    _open_explorer(page, site_url)
    page.get_by_label("Sentence").select_option(label="Life is short, eat dessert first")
    page.get_by_label("Scale scores by").check()
    page.locator("#attention-explorer .attn-explorer__token", has_text="is").click()
    expected = expected_weights(2, scaled=True, causal=False, temperature=1.0)
    assert _bars(page) == expected[1]
    assert _bars(page) == ["0.2912", "0.0106", "0.0982", "0.0625", "0.4917", "0.0458"]
    assert _heatmap(page) == expected


def test_explorer_tokens_work_from_the_keyboard(page: Any, site_url: str) -> None:
    """Arrow keys move the focus along the tokens; Enter and Space select the focused one."""
    _open_explorer(page, site_url)
    page.locator("#attention-explorer .attn-explorer__token[aria-pressed='true']").focus()
    page.keyboard.press("ArrowRight")
    focused = page.evaluate("document.activeElement.textContent")
    assert focused == "starts"
    assert _pressed(page) == ["journey"]  # moving the focus does not select
    page.keyboard.press("Enter")
    assert _pressed(page) == ["starts"]
    expected = expected_weights(0, scaled=False, causal=False, temperature=1.0)
    assert _bars(page) == expected[2]
    page.keyboard.press("End")
    page.keyboard.press("Space")
    assert _pressed(page) == ["step"]
    assert _bars(page) == expected[5]
    assert page.evaluate("document.activeElement.textContent") == "step"
    assert "step" in page.locator("#attn-bars-caption").inner_text()


def test_explorer_is_accessible_in_both_schemes(page: Any, site_url: str) -> None:
    """axe-core finds no serious or critical issue in the explorer with the causal mask
    on (its default state is checked with the page), light or dark."""
    _open_explorer(page, site_url)
    page.get_by_label("Causal mask").check()
    for scheme in ("light", "dark"):
        switch_scheme(page, scheme)
        blocking = [
            f"{v['id']} ({v['impact']}): {[node['target'] for node in v['nodes'][:5]]}"
            for v in run_axe(page, context="#attention-explorer")
            if v["impact"] in {"serious", "critical"}
        ]
        assert not blocking, f"{scheme} scheme: {blocking}"


# --- the trained recall model in the explorer ---------------------------------------------


def recall_question(sequence: int, key: int) -> tuple[list[str], int]:
    """The untrained then trained model's weights over the real pairs (as the page prints
    them) and the answer, when ``sequence`` of the held-out batch is asked for its
    ``key``-th stored key: run here on the models, not read from the page's data."""
    from attnlab import recall
    from hooks import explorer_data

    untrained, trained, _ = recall.trained_recall_model()
    batch = recall.held_out_batch(explorer_data.RECALL_SEQUENCES)
    i = slice(sequence, sequence + 1)
    ask = recall.RecallBatch(
        batch.keys[i], batch.values[i], batch.present[i],
        batch.keys[sequence, key : key + 1], batch.values[sequence, key : key + 1],
        torch.tensor([key]),
    )  # fmt: skip
    real = int(batch.present[sequence].sum())
    with torch.no_grad():
        weights = [model(ask)[1][0, :real] for model in (untrained, trained)]  # (P,) each
    return [f"{float(w):.4f}" for row in weights for w in row], int(batch.values[sequence, key])


def test_recall_explorer_shows_the_models_weights(page: Any, site_url: str) -> None:
    """The recall view's bars are the models' own weights; a question click switches them."""
    page.goto(site_url + "explorer.html")
    page.wait_for_selector("#recall-explorer[data-ready='true']")
    values = page.locator("#recall-explorer .attn-bar__value").all_inner_texts()
    assert values == recall_question(0, 0)[0]
    page.locator("#recall-explorer .attn-explorer__token").nth(1).click()
    values = page.locator("#recall-explorer .attn-bar__value").all_inner_texts()
    expected, target = recall_question(0, 1)
    assert values == expected
    assert f"answers {target} (right" in page.locator("#recall-explorer").inner_text()


def test_explorer_works_opened_from_disk(new_context: Any, built_site: Path) -> None:
    """From file:// (no server, fetch blocked) the explorer still draws: its data is inlined.

    (Material's own search worker cannot start from file://, so its page errors are not
    this test's business: only the explorer is checked.)
    """
    page = new_context("light").new_page()
    page.goto((built_site / "explorer.html").as_uri())
    page.wait_for_selector("#attention-explorer[data-ready='true']")
    page.wait_for_selector("#recall-explorer[data-ready='true']")
    assert len(page.locator("#attention-explorer .attn-bar__value").all_inner_texts()) == 6
    page.close()
