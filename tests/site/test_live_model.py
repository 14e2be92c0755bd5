"""hooks/live_model.py: the GGUF placed in the site, the live scripts on the explorer page
only, and the recorded live benchmark (``scripts/live_bench.py``) on it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from attnlab.llama import smollm2_path
from hooks import live_model


def _page(src_uri: str, url: str) -> Any:
    return SimpleNamespace(file=SimpleNamespace(src_uri=src_uri), url=url)


def _config(**extra: object) -> Any:
    return SimpleNamespace(extra=extra, site_dir="")


def test_the_wheels_gguf_is_placed_in_the_site_whole(tmp_path: Path) -> None:
    """The very file attnlab.llama reads, byte for byte, under assets/models/; twice is fine."""
    target = live_model.place_model(tmp_path)
    assert target == tmp_path / "assets" / "models" / smollm2_path().name
    assert target.stat().st_size == smollm2_path().stat().st_size == 98_362_432
    with target.open("rb") as placed, smollm2_path().open("rb") as source:
        assert placed.read(1 << 16) == source.read(1 << 16)
    assert live_model.place_model(tmp_path) == target
    assert sorted(p.name for p in target.parent.iterdir()) == [smollm2_path().name]


def test_only_the_explorer_page_loads_the_live_scripts() -> None:
    """Other pages are untouched; the explorer's links work with folders and with files."""
    html = "<p>content</p>"
    assert (
        live_model.on_page_content(html, _page("index.md", "index.html"), _config(), None) == html
    )
    as_folder = live_model.on_page_content(html, _page("explorer.md", "explorer/"), _config(), None)
    assert '<script type="module" src="../assets/javascripts/live/api.js"' in as_folder
    assert 'data-live-model="../assets/models/SmolLM2-135M-Instruct.Q4_1.gguf"' in as_folder
    assert 'data-live-bytes="98362432"' in as_folder
    assert 'href="../assets/stylesheets/live.css"' in as_folder
    # the service worker that makes the page cross-origin isolated (threads), at the root
    assert '<script src="../coi-serviceworker.js"></script>' in as_folder
    as_file = live_model.on_page_content(
        html, _page("explorer.md", "explorer.html"), _config(), None
    )
    assert '<script type="module" src="assets/javascripts/live/ui/main.js"' in as_file
    assert '<script src="coi-serviceworker.js"></script>' in as_file


def test_the_models_url_is_one_setting() -> None:
    """extra.live_model_url moves the weights elsewhere (an absolute URL or a site path)."""
    url = "https://weights.example/smollm2.gguf"
    html = live_model.on_page_content(
        "", _page("explorer.md", "explorer/"), _config(live_model_url=url), None
    )
    assert f'data-live-model="{url}"' in html
    html = live_model.on_page_content(
        "", _page("explorer.md", "explorer/"), _config(live_model_url="/w/m.gguf"), None
    )
    assert 'data-live-model="../w/m.gguf"' in html


def test_the_recorded_live_benchmark_is_a_full_run_shown_on_the_page() -> None:
    """8, 32 and 128 tokens, five runs each; decoding at 32, 128 and 512 tokens of context;
    the phone; every number of the table from the file."""
    results = live_model.load_benchmark()
    assert results["quick"] is False and results["kernels"].startswith("WebAssembly SIMD")
    assert [run["T"] for run in results["forward"]] == [8, 32, 128]
    markdown = live_model.on_page_markdown(
        "before\n<!-- live-benchmark -->\nafter", _page("explorer.md", "explorer/"), _config(), None
    )
    assert "<!-- live-benchmark -->" not in markdown
    for run in results["forward"]:
        assert (
            f"| {run['browser_ms']:.0f} ms | {run['torch_ms']:.0f} ms | {run['ratio']:.2f}× |"
            in markdown
        )
        # and on the page's kernel threads (scripts/live_bench.py's isolated page)
        threaded = f"| {run['browser_threads_ms']:.0f} ms | {run['threads_ratio']:.2f}× |"
        assert results["threads"] >= 2 and threaded in markdown
    assert f"| {results['load_from_cache_ms']:.0f} ms " in markdown
    assert [run["context"] for run in results["decode"]] == [32, 128, 512]
    for run in results["decode"]:
        per_token = f"| {run['browser_ms_per_token']:.0f} ms | {run['torch_ms_per_token']:.0f} ms "
        assert per_token + f"| {1 / run['speedup']:.2f}× |" in markdown
        assert f"{run['browser_tokens_per_s']:.1f}" in markdown
        assert f"{run['torch_tokens_per_s']:.1f}" in markdown
    assert results["phone"]["cpu_throttling"] == 4 and "390 × 844" in markdown
    assert f"{results['phone']['memory_bytes'] / 1048576:.0f} MiB" in markdown
