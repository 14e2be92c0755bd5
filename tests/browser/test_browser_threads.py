"""The live model's kernel threads in Chromium: the explorer under its service worker.

Threads (docs/assets/javascripts/live/threads.js) need a cross-origin-isolated page; the
site's service worker (docs/coi-serviceworker.js, vendored) makes the explorer one on a
static host by adding the COOP/COEP headers and reloading the page once. Served over
http://127.0.0.1 with service workers allowed, the page must become isolated, run the
model on one thread a core, say so under its maps, and give the very numbers the page
gives on one thread (bit for bit: the threads split rows, never sums). Where service
workers are refused (the other browser tests' contexts) it runs on one thread and says
why; opened from disk (file://) no service worker registers and nothing fails.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("live-model")]

IDS = [504, 2365, 314, 5349, 418, 260, 10574, 30, 378, 1116, 9422, 28, 1536]
# The last position's logits and every map of one pass, as plain lists.
RUN_JS = """async (ids) => {
  const out = await window.attnlabLive.run(ids, {return_attention: true});
  return {logits: Array.from(out.logits), attention: Array.from(out.attention)};
}"""


def explorer_url(site_url: str, site: Path) -> str:
    """The explorer page's URL (pages as files or as folders)."""
    return site_url + ("explorer.html" if (site / "explorer.html").is_file() else "explorer/")


def load_model(tab: Any) -> str:
    """Press the page's Load button; the line under the maps once a pass has run."""
    tab.wait_for_selector("#live-explorer[data-live='idle']")
    tab.locator("#live-load").click()
    tab.wait_for_selector("#live-explorer[data-live='ready']", timeout=120_000)
    tab.wait_for_function(
        "() => /Forward pass/.test(document.getElementById('live-timing').textContent)",
        timeout=60_000,
    )
    return str(tab.locator("#live-timing").inner_text())


def test_the_service_worker_isolates_the_explorer_and_threads_give_one_threads_numbers(
    new_context: Any, site_url: str, built_site: Path
) -> None:
    """One reload makes the page isolated; a thread a core; every number as on one thread."""
    errors: list[str] = []
    threaded = new_context("light", service_workers="allow").new_page()
    threaded.on("pageerror", lambda error: errors.append(str(error)))
    threaded.goto(explorer_url(site_url, built_site))
    threaded.wait_for_function("() => window.crossOriginIsolated === true", timeout=30_000)
    cores = threaded.evaluate("navigator.hardwareConcurrency")
    expected = min(8, cores)
    timing = load_model(threaded)
    info = threaded.evaluate("window.attnlabLive.info()")
    assert info["threads"] == expected, info["kernels"]
    assert f", {expected} threads" in timing, timing
    single = new_context("light").new_page()  # service workers blocked: one thread
    single.goto(explorer_url(site_url, built_site))
    assert "1 thread: the page is not cross-origin isolated" in load_model(single)
    assert single.evaluate("window.attnlabLive.info().threads") == 1
    one, many = single.evaluate(RUN_JS, IDS), threaded.evaluate(RUN_JS, IDS)
    assert one["logits"] == many["logits"]
    assert one["attention"] == many["attention"]
    assert not errors, errors


def test_from_disk_no_service_worker_registers_and_nothing_fails(
    new_context: Any, built_site: Path
) -> None:
    """file://: the page loads once, is not isolated, and throws nothing."""
    errors: list[str] = []
    tab = new_context("light", service_workers="allow").new_page()
    tab.on("pageerror", lambda error: errors.append(str(error)))
    loads: list[str] = []
    tab.on("load", lambda page: loads.append(page.url))
    page = built_site / "explorer.html"
    tab.goto((page if page.is_file() else built_site / "explorer" / "index.html").as_uri())
    tab.wait_for_selector("#live-explorer[data-live='unavailable']")
    time.sleep(1)  # a reload would come within this
    assert len(loads) == 1, loads
    assert tab.evaluate("window.crossOriginIsolated") is False
    assert tab.evaluate("navigator.serviceWorker?.controller ?? null") is None
    assert not errors, errors
