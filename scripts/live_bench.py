"""The explorer's live model in Chromium against ``attnlab.llama`` on one thread.

Site tooling, not part of the package: it serves the page's scripts
(``docs/assets/javascripts/live/``) and the wheel's GGUF file on 127.0.0.1 under a bare
page that loads only them, drives Chromium (Debian's ``/usr/bin/chromium`` or
``$CHROMIUM``, through Playwright) and records, in ``scripts/live_bench.json`` (which
hooks/live_model.py shows on the explorer page):

* loading: the first load (download from the local server) and the second, from the
  browser's Cache Storage, as a reader's second visit; ``load_smollm2()`` timed in a
  fresh Python process (imports excluded) for the package's side;
* the forward pass with every attention weight, for ``T`` = 8, 32 and 128 tokens of
  prose (timed inside the Worker), against ``model(ids, return_attention=True)`` of
  ``LlamaModel`` on one thread for the same ids, timed in turns with it; the page's
  kernels on one thread, and on its kernel threads (threads.js: one per core) in a
  second page that its server makes cross-origin isolated (the COOP/COEP headers that
  the site's service worker adds, docs/coi-serviceworker.js); and how much
  of PyTorch's time is every position's logits, which the page does not compute (it
  returns the last position's);
* cached decoding, tokens per second at 32, 128 and 512 tokens of context: the page's
  ``attnlabLive.generate`` (greedy; its per-token times from the Worker, the prompt's
  pass excluded), on one thread and on its threads, against one-token steps of
  ``model(ids, cache=...)`` on one thread;
* a phone: a 390 x 844 page with the CPU throttled 4x (DevTools'
  ``Emulation.setCPUThrottlingRate``, which slows the page's main thread only, so the
  engine runs there for this part): loading from the cache, a 32-token forward with
  every map (the first, cold), 16 generated tokens, and the model's memory.

Wall-clock times (a browser's Worker has no CPU clock): a forward pass, the median of
``repeats`` runs after one warm-up, in turns with PyTorch's; a decoding step, the median
step of one run of ``decode_tokens`` tokens. The same JavaScript is also timed under
Node in CPU time, which a busy machine disturbs far less, beside PyTorch's CPU time.

    .venv/bin/python scripts/live_bench.py [--quick] [--output scripts/live_bench.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch

from attnlab.bench.measure import machine_info

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "docs" / "assets" / "javascripts" / "live"
RESULTS = Path(__file__).resolve().with_suffix(".json")
FULL: dict[str, Any] = {
    "lengths": (8, 32, 128),
    "contexts": (32, 128, 512),
    "repeats": 5,
    "decode_tokens": 16,
}
QUICK: dict[str, Any] = {"lengths": (8,), "contexts": (32,), "repeats": 1, "decode_tokens": 4}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu"]
PROSE = (
    "Attention lets every token look at every earlier token and decide how much of each "
    "to read. A query is compared with every key; the scores become weights through a "
    "softmax; the weights mix the values. "
)
PAGE = """<!doctype html><meta charset="utf-8"><title>live benchmark</title>
<script type="module" src="live/api.js" data-live-model="model.gguf"
  data-live-bytes="{size}"></script>
"""


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _IsolatingHandler(_QuietHandler):
    """Sends the headers that make a page cross-origin isolated (threads.js's threads)."""

    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()


@contextmanager
def served_page(gguf: Path) -> Iterator[tuple[str, str]]:
    """A temporary site (the scripts, the GGUF, a bare page) on 127.0.0.1, twice.

    Yields its page's URL as is, and from a server that makes it cross-origin isolated.
    """
    with tempfile.TemporaryDirectory(prefix="attnlab-live-") as tmp:
        root = Path(tmp)
        shutil.copytree(SCRIPTS, root / "live")
        try:
            os.link(gguf, root / "model.gguf")
        except OSError:
            shutil.copyfile(gguf, root / "model.gguf")
        (root / "index.html").write_text(PAGE.format(size=gguf.stat().st_size), encoding="utf-8")
        servers = []
        for handler_class in (_QuietHandler, _IsolatingHandler):
            handler = functools.partial(handler_class, directory=str(root))
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            servers.append(server)
        try:
            plain, isolated = (f"http://127.0.0.1:{s.server_address[1]}/" for s in servers)
            yield plain + "index.html", isolated + "index.html"
        finally:
            for server in servers:
                server.shutdown()
                server.server_close()


def prose_ids(tokenizer: Any, T: int) -> list[int]:
    """The first ``T`` ids of the prose, repeated as often as needed."""
    ids: list[int] = tokenizer.encode(PROSE * (1 + T // 20))
    return ids[:T]


def torch_forward_ms(model: Any, ids: list[int]) -> tuple[float, float]:
    """One forward pass with its attention weights: (wall, CPU) in ms."""
    input_ids = torch.tensor(ids)
    wall, cpu = time.perf_counter(), time.process_time()
    with torch.no_grad():
        model(input_ids, return_attention=True)
    return 1000 * (time.perf_counter() - wall), 1000 * (time.process_time() - cpu)


def torch_logits_ms(model: Any, T: int, repeats: int) -> float:
    """Median wall ms of the forward's last step for T positions: norm, then unembed.

    ``LlamaModel`` returns every position's logits; the page computes the last
    position's only, so this is the part of PyTorch's time the page does not do.
    """
    unembed = model.embed.weight if model.lm_head is None else model.lm_head.weight  # (V, d)
    hidden = torch.randn(1, T, unembed.shape[1])
    times = []
    with torch.no_grad():
        for _ in range(repeats + 1):
            wall = time.perf_counter()
            model.norm(hidden) @ unembed.T
            times.append(1000 * (time.perf_counter() - wall))
    return statistics.median(times[1:])


def torch_decode_ms(model: Any, ids: list[int], steps: int) -> tuple[float, float]:
    """Median (wall, CPU) ms of one cached decoding step after the prompt ``ids``."""
    cache = model.new_cache()
    walls, cpus = [], []
    with torch.no_grad():
        logits = model(torch.tensor(ids), cache=cache)
        for _ in range(steps):
            token = logits[:, -1].argmax(-1, keepdim=True)  # (1, 1)
            wall, cpu = time.perf_counter(), time.process_time()
            logits = model(token, cache=cache)
            walls.append(1000 * (time.perf_counter() - wall))
            cpus.append(1000 * (time.process_time() - cpu))
    return statistics.median(walls), statistics.median(cpus)


# The same engine under Node, timed in the process's CPU time (process.cpuUsage: the
# engine's one thread, and V8's compiler and collector threads beside it), with
# relaxed SIMD switched on (Node 20 has it behind a flag) so that the kernels are Chromium's:
# {forward: {T: ms}, decode: {context: ms per token}}.
NODE_CPU_JS = """
const fs = await import("node:fs");
const [scripts, gguf, lengths, contexts, repeats, steps] = process.argv.slice(1);
const { Engine } = await import(scripts + "/engine.js");
const engine = Engine.fromBytes(new Uint8Array(fs.readFileSync(gguf)));
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const out = { forward: {}, decode: {} };
for (const ids of JSON.parse(lengths)) {
  engine.run(ids, { return_attention: true });
  const times = [];
  for (let r = 0; r < Number(repeats); r++) {
    const start = cpu();
    engine.run(ids, { return_attention: true });
    times.push(cpu() - start);
  }
  out.forward[ids.length] = median(times);
}
for (const ids of JSON.parse(contexts)) {
  const times = [];
  let last = cpu();
  let first = true;
  for (const step of engine.steps(ids, { max_new_tokens: Number(steps) + 1 })) {
    const now = cpu();
    if (!first) times.push(now - last);
    first = false;
    last = cpu();
  }
  out.decode[ids.length] = median(times);
}
console.log(JSON.stringify(out));
"""


def node_cpu_ms(
    gguf: Path, lengths: list[list[int]], contexts: list[list[int]], repeats: int, steps: int
) -> dict[str, Any] | None:
    """The engine under Node in CPU time; None without Node."""
    node = shutil.which("node")
    if node is None:
        return None
    args = [
        str(SCRIPTS),
        str(gguf),
        json.dumps(lengths),
        json.dumps(contexts),
        str(repeats),
        str(steps),
    ]
    result = subprocess.run(
        [node, "--experimental-wasm-relaxed-simd", "--input-type=module", "-e", NODE_CPU_JS, *args],
        capture_output=True,
        text=True,
        check=True,
    )
    times: dict[str, Any] = json.loads(result.stdout)
    return times


LOAD_SMOLLM2 = """
import time
import torch
torch.set_num_threads(1)
from attnlab.llama import load_smollm2
wall, cpu = time.perf_counter(), time.process_time()
load_smollm2()
print(time.perf_counter() - wall, time.process_time() - cpu)
"""


def torch_load_s() -> tuple[float, float]:
    """``load_smollm2()`` in a fresh process on one thread, imports excluded: (wall, CPU) s."""
    result = subprocess.run(
        [sys.executable, "-c", LOAD_SMOLLM2], capture_output=True, text=True, check=True
    )
    wall, cpu = result.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


GENERATE_JS = """async ([ids, n]) => {
  const times = [];
  const onToken = (s) => { if (s.index > 0) times.push(s.ms); };
  const out = await attnlabLive.generate(ids, {max_new_tokens: n, onToken});
  const total = times.reduce((a, b) => a + b, 0);
  times.sort((a, b) => a - b);
  return {ids: out, ms: times[Math.floor(times.length / 2)], total};
}"""
RUN_JS = "(ids) => attnlabLive.run(ids, {return_attention: true}).then((out) => out.ms)"

# The phone run, in the page's main thread: DevTools' CPU throttling slows a page's main
# thread but not its Web Workers (measured: a worker's forward pass took the same time at
# rates 1 and 4), so the engine the worker would hold is built here, from the same cache.
PHONE_JS = """async ([ids, steps]) => {
  const { Engine } = await import(new URL("live/engine.js", location.href).href);
  const url = new URL("model.gguf", location.href).href;
  let start = performance.now();
  const hit = await (await caches.open("attnlab-live-v1")).match(url);
  const engine = Engine.fromBytes(new Uint8Array(await hit.arrayBuffer()));
  const load = performance.now() - start;
  start = performance.now();
  engine.run(ids, { return_attention: true });
  const forward = performance.now() - start;
  const times = [];
  start = performance.now();
  let last = start;
  for (const step of engine.steps(ids, { max_new_tokens: steps + 1 })) {
    times.push(performance.now() - last); // the first: the prompt's pass
    last = performance.now();
  }
  const decoding = times.slice(1); // one step per generated token
  const generate = decoding.reduce((a, b) => a + b, 0);
  const decode = decoding.sort((a, b) => a - b)[Math.floor(steps / 2)];
  const memory = engine.info().memory_bytes;
  return { load, forward, generate, decode, memory, kernels: engine.kernelsName };
}"""


def phone_run(playwright: Any, chromium: str, url: str, ids: list[int]) -> dict[str, Any]:
    """390 x 844, the CPU throttled 4x: load from the cache, a forward pass, 16 tokens."""
    browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
    context = browser.new_context(
        viewport={"width": 390, "height": 844},
        device_scale_factor=3,
        is_mobile=True,
        has_touch=True,
    )
    page = context.new_page()
    page.goto(url)
    page.evaluate("attnlabLive.load()")  # fills the cache, unthrottled
    session = context.new_cdp_session(page)
    session.send("Emulation.setCPUThrottlingRate", {"rate": 4})
    phone = page.evaluate(PHONE_JS, [ids, 16])
    browser.close()
    return {
        "viewport": "390x844",
        "cpu_throttling": 4,
        "thread": "the page's main thread (DevTools throttles no worker)",
        "kernels": phone["kernels"],
        "load_from_cache_ms": phone["load"],
        "forward_32_ms": phone["forward"],
        "generate_16_ms": phone["generate"],
        "decode_ms_per_token": phone["decode"],
        "memory_bytes": phone["memory"],
    }


def run(quick: bool = False) -> dict[str, Any]:
    """Time the page's model in Chromium and attnlab.llama on one thread; the results."""
    from playwright.sync_api import sync_playwright

    from attnlab.llama import load_smollm2, smollm2_path

    settings = QUICK if quick else FULL
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    torch.set_num_threads(1)
    load_s, load_cpu_s = torch_load_s()
    model, tokenizer = load_smollm2()
    gguf = smollm2_path()
    results: dict[str, Any] = {
        "note": "recorded on a shared machine (other engineers' runs load its cores); "
        "wall-clock times, PyTorch on one thread and the browser's Worker (on one thread, "
        "then on its kernel threads) timed in turns",
        "machine": machine_info(),
        "quick": quick,
        "clock": "wall-clock: performance.now() in the Worker; time.perf_counter() for PyTorch",
        "repeats": settings["repeats"],
        "decode_tokens": settings["decode_tokens"],
        "torch_load_s": load_s,
        "torch_load_cpu_s": load_cpu_s,
    }
    forward: list[dict[str, Any]] = []
    decode: list[dict[str, Any]] = []
    with served_page(gguf) as (url, isolated_url), sync_playwright() as playwright:
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
        threaded = browser.new_context().new_page()  # the same page, cross-origin isolated
        threaded.goto(isolated_url)
        threaded_info = threaded.evaluate("attnlabLive.load()")
        if threaded_info["threads"] < 2:
            raise RuntimeError(f"the isolated page runs on one thread: {threaded_info['kernels']}")
        for T in settings["lengths"]:
            ids = prose_ids(tokenizer, T)
            page.evaluate(RUN_JS, ids)  # warm-up
            threaded.evaluate(RUN_JS, ids)
            torch_forward_ms(model, ids)
            browser_ms, threads_ms, torch_times = [], [], []
            for _ in range(settings["repeats"]):
                browser_ms.append(float(page.evaluate(RUN_JS, ids)))
                threads_ms.append(float(threaded.evaluate(RUN_JS, ids)))
                torch_times.append(torch_forward_ms(model, ids))
            b = statistics.median(browser_ms)
            bt = statistics.median(threads_ms)
            t = statistics.median(wall for wall, _ in torch_times)
            forward.append(
                {
                    "T": T,
                    "browser_ms": b,
                    "torch_ms": t,
                    "ratio": b / t,
                    "browser_threads_ms": bt,
                    "threads_ratio": bt / t,
                    "browser_runs_ms": browser_ms,
                    "browser_threads_runs_ms": threads_ms,
                    "torch_runs_ms": [wall for wall, _ in torch_times],
                    "torch_cpu_ms": statistics.median(cpu for _, cpu in torch_times),
                    "torch_logits_ms": torch_logits_ms(model, T, settings["repeats"]),
                }
            )
        for context_length in settings["contexts"]:
            ids = prose_ids(tokenizer, context_length)
            steps = settings["decode_tokens"]
            page.evaluate(GENERATE_JS, [ids[:8], 3])  # warm-up
            threaded.evaluate(GENERATE_JS, [ids[:8], 3])
            page_ms = page.evaluate(GENERATE_JS, [ids, steps + 1])["ms"]
            threads_ms_per_token = threaded.evaluate(GENERATE_JS, [ids, steps + 1])["ms"]
            wall, cpu = torch_decode_ms(model, ids, steps)
            decode.append(
                {
                    "context": context_length,
                    "browser_ms_per_token": page_ms,
                    "browser_tokens_per_s": 1000 / page_ms,
                    "torch_ms_per_token": wall,
                    "torch_tokens_per_s": 1000 / wall,
                    "torch_cpu_ms_per_token": cpu,
                    "speedup": wall / page_ms,
                    "browser_threads_ms_per_token": threads_ms_per_token,
                    "threads_speedup": wall / threads_ms_per_token,
                }
            )
        version = browser.version
        browser.close()
        phone = None if quick else phone_run(playwright, chromium, url, prose_ids(tokenizer, 32))
    node = node_cpu_ms(
        gguf,
        [prose_ids(tokenizer, entry["T"]) for entry in forward],
        [prose_ids(tokenizer, entry["context"]) for entry in decode],
        settings["repeats"],
        settings["decode_tokens"],
    )
    for entry in forward:
        entry["node_cpu_ms"] = None if node is None else node["forward"][str(entry["T"])]
    for entry in decode:
        entry["node_cpu_ms_per_token"] = (
            None if node is None else node["decode"][str(entry["context"])]
        )
    return {
        **results,
        "browser": f"Chromium {version}",
        "kernels": second["kernels"],
        "threads": threaded_info["threads"],
        "threads_kernels": threaded_info["kernels"],
        "model_bytes": second["bytes"],
        "memory_bytes": second["memory_bytes"],
        "load_download_ms": first["loadMs"],
        "load_from_cache_ms": second["loadMs"],
        "forward": forward,
        "decode": decode,
        "phone": phone,
    }


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and write its results (``--quick``: a smoke test)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one length, one run: a smoke test")
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the results")
    args = parser.parse_args(argv)
    results = run(args.quick)
    args.output.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
