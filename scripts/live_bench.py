"""The explorer's live model in Chromium against ``attnlab.llama`` on one thread (``live``).

The explorer page runs SmolLM2-135M in the reader's browser (``docs/assets/javascripts/
live/`` in the repository: the GGUF read in JavaScript, the matrix products in
WebAssembly SIMD, in a Web Worker). This run serves those scripts and the wheel's GGUF
file on 127.0.0.1 under a bare page that loads only them, drives Chromium (Debian's
``/usr/bin/chromium`` or ``$CHROMIUM``, through Playwright; the JavaScript engine at its
normal settings) and measures:

* loading: the first load (download from the local server) and the second, from the
  browser's Cache Storage, as a reader's second visit (parse, tokenizer, WebAssembly);
* the forward pass with every attention weight, for ``T`` = 8, 32 and 128 tokens of
  prose (timed inside the Worker: ``performance.now`` around the pass), against
  ``model(ids, return_attention=True)`` of [`LlamaModel`][attnlab.llama.LlamaModel] on
  one thread for the same ids, timed in the same process in turns with it.

Both are wall-clock times (a browser's Worker has no CPU clock), medians of
``repeats`` runs after one warm-up; the ratio is browser over PyTorch. As a busy machine
inflates wall-clock times, the same JavaScript engine is also timed under Node in CPU
time (``node_cpu_ms``), beside PyTorch's CPU time (``torch_cpu_ms``). Needs a checkout
of the repository (the scripts), Playwright and Chromium: ``python -m attnlab.bench
--live``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch

from .measure import machine_info

__all__ = ["LIVE_FULL", "LIVE_QUICK", "live_scripts_dir", "run_live_benchmark"]

LIVE_FULL: dict[str, Any] = {"lengths": (8, 32, 128), "repeats": 5}
LIVE_QUICK: dict[str, Any] = {"lengths": (8,), "repeats": 1}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu"]
PROSE = (
    "Attention lets every token look at every earlier token and decide how much of each "
    "to read. A query is compared with every key; the scores become weights through a "
    "softmax; the weights mix the values. "
)
PAGE = """<!doctype html><meta charset="utf-8"><title>live benchmark</title>
<script src="live/api.js" data-live-model="model.gguf" data-live-bytes="{size}"></script>
"""


def live_scripts_dir() -> Path:
    """The live model's scripts in the repository checkout this package runs from.

    Raises:
        FileNotFoundError: Not run from a checkout (an installed wheel has no docs/).
    """
    scripts = Path(__file__).resolve().parents[3] / "docs" / "assets" / "javascripts" / "live"
    if not (scripts / "api.js").is_file():
        raise FileNotFoundError(
            f"the live benchmark needs the repository's {scripts} (run it from a checkout)"
        )
    return scripts


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _served_page(gguf: Path) -> Iterator[str]:
    """A temporary site (the scripts, the GGUF, a bare page) on 127.0.0.1; its page URL."""
    with tempfile.TemporaryDirectory(prefix="attnlab-live-") as tmp:
        root = Path(tmp)
        shutil.copytree(live_scripts_dir(), root / "live")
        try:
            os.link(gguf, root / "model.gguf")
        except OSError:
            shutil.copyfile(gguf, root / "model.gguf")
        (root / "index.html").write_text(PAGE.format(size=gguf.stat().st_size), encoding="utf-8")
        handler = functools.partial(_QuietHandler, directory=str(root))
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
        finally:
            server.shutdown()
            server.server_close()


def _prose_ids(tokenizer: Any, T: int) -> list[int]:
    """The first ``T`` ids of the prose, repeated as often as needed."""
    ids: list[int] = tokenizer.encode(PROSE * (1 + T // 20))
    return ids[:T]


def _torch_ms(model: Any, ids: list[int]) -> tuple[float, float]:
    """One forward pass of attnlab.llama with its attention weights: (wall, CPU) in ms."""
    input_ids = torch.tensor(ids)
    wall, cpu = time.perf_counter(), time.process_time()
    with torch.no_grad():
        model(input_ids, return_attention=True)
    return 1000 * (time.perf_counter() - wall), 1000 * (time.process_time() - cpu)


# The same engine under Node, timed in CPU time (process.cpuUsage: one thread), which a
# busy machine disturbs far less than wall-clock time: {T: median ms}.
NODE_CPU_JS = """
const fs = require("fs");
const [scripts, gguf, lengths, repeats] = process.argv.slice(1);
const { Engine } = require(scripts + "/engine.js");
const engine = Engine.fromBytes(new Uint8Array(fs.readFileSync(gguf)));
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const out = {};
for (const ids of JSON.parse(lengths)) {
  engine.run(ids);
  const times = [];
  for (let r = 0; r < Number(repeats); r++) {
    const start = cpu();
    engine.run(ids);
    times.push(cpu() - start);
  }
  times.sort((a, b) => a - b);
  out[ids.length] = times[Math.floor(times.length / 2)];
}
console.log(JSON.stringify(out));
"""


def _node_cpu_ms(ids_by_length: list[list[int]], repeats: int) -> dict[str, float] | None:
    """The engine's forward pass under Node in CPU time, by length; None without Node."""
    from ..llama import smollm2_path

    node = shutil.which("node")
    if node is None:
        return None
    args = [str(live_scripts_dir()), str(smollm2_path()), json.dumps(ids_by_length), str(repeats)]
    result = subprocess.run(
        [node, "-e", NODE_CPU_JS, *args], capture_output=True, text=True, check=True
    )
    times: dict[str, float] = json.loads(result.stdout)
    return times


def run_live_benchmark(quick: bool = False) -> dict[str, Any]:
    """Time the page's model in Chromium and attnlab.llama on one thread; the results.

    Args:
        quick: One length (8 tokens), one run: a smoke test.

    Returns:
        ``load_download_ms``, ``load_from_cache_ms`` (the reader's second visit),
        ``torch_load_s`` (``load_smollm2()``) and ``forward``: one entry per ``T`` with
        ``browser_ms``, ``torch_ms``, ``ratio``, ``node_cpu_ms`` and ``torch_cpu_ms``.
    """
    from playwright.sync_api import sync_playwright

    from ..llama import load_smollm2, smollm2_path

    settings = LIVE_QUICK if quick else LIVE_FULL
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    header = {
        "note": "recorded on a shared 2-core machine; wall-clock times, PyTorch on one "
        "thread and the browser's Worker (one thread) timed in turns",
        "machine": machine_info(),
        "quick": quick,
        "clock": "wall-clock: performance.now() in the Worker; time.perf_counter() for PyTorch",
    }
    try:
        start = time.perf_counter()
        model, tokenizer = load_smollm2()
        torch_load_s = time.perf_counter() - start
        with _served_page(smollm2_path()) as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            context = browser.new_context()
            page = context.new_page()
            page.goto(url)
            first = page.evaluate("attnlabLive.load()")
            page.close()
            page = context.new_page()  # a second visit: the model comes from the cache
            page.goto(url)
            second = page.evaluate("attnlabLive.load()")
            if not second["fromCache"]:
                raise RuntimeError("the second load did not come from the browser's cache")
            forward: list[dict[str, Any]] = []
            for T in settings["lengths"]:
                ids = _prose_ids(tokenizer, T)
                run = "(ids) => attnlabLive.run(ids).then((out) => out.ms)"
                page.evaluate(run, ids)  # warm-up
                _torch_ms(model, ids)
                browser_ms, torch_times = [], []
                for _ in range(settings["repeats"]):
                    browser_ms.append(float(page.evaluate(run, ids)))
                    torch_times.append(_torch_ms(model, ids))
                b = statistics.median(browser_ms)
                t = statistics.median(wall for wall, _ in torch_times)
                t_cpu = statistics.median(cpu for _, cpu in torch_times)
                forward.append(
                    {"T": T, "browser_ms": b, "torch_ms": t, "ratio": b / t, "torch_cpu_ms": t_cpu}
                )
            version = browser.version
            browser.close()
        lengths = [_prose_ids(tokenizer, entry["T"]) for entry in forward]
        node_cpu = _node_cpu_ms(lengths, settings["repeats"])
        for entry in forward:
            entry["node_cpu_ms"] = None if node_cpu is None else node_cpu[str(entry["T"])]
    finally:
        torch.set_num_threads(threads)
    return {
        **header,
        "browser": f"Chromium {version}",
        "kernels": second["kernels"],
        "repeats": settings["repeats"],
        "model_bytes": second["bytes"],
        "load_download_ms": first["loadMs"],
        "load_from_cache_ms": second["loadMs"],
        "torch_load_s": torch_load_s,
        "forward": forward,
    }


if __name__ == "__main__":  # pragma: no cover - a manual check
    import json

    print(json.dumps(run_live_benchmark(quick=True), indent=1))
