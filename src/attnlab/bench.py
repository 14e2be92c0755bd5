"""Benchmark: explicit attention, ``flash_attention`` and PyTorch's kernels, side by side.

It needs the ``bench`` extra (tqdm, matplotlib, numpy)::

    python -m attnlab.bench               # the forward sweep, written to ./forward.json
    python -m attnlab.bench --quick       # tiny sizes, to check that everything runs
    python -m attnlab.bench --decode --window --output DIR   # other runs, into DIR
    python -m attnlab.bench --all --output src/attnlab/results   # `make bench`

Each run writes ``<name>.json`` into ``--output`` (default: the current directory).
The recorded results the docs print and plot ship inside the package, as
``attnlab/results/<name>.json``; [`load_results`][attnlab.bench.load_results] reads them
by name, from a checkout or from an installed wheel alike. The runs:

* ``forward`` (the default): the sweep below;
* ``backward`` (``--backward``): forward+backward memory and backward time;
* ``ring`` (``--ring``): ring attention's memory per rank;
* ``decode`` (``--decode``): decoding token by token through a ``KVCache`` against
  recomputing the prefix at every step, and the KV cache's bytes per token;
* ``window`` (``--window``): sliding-window flash attention against full causal flash
  attention as ``T`` grows.

What the forward sweep measures, each configuration in a fresh process (forked from a
server that has imported torch and nothing else, so no configuration sees another's
memory):

* **time**: the median of repeated forward passes under ``torch.no_grad()``, after
  one warm-up pass;
* **peak extra memory**: the growth of the process's peak resident set (``VmHWM``,
  reset through ``/proc/self/clear_refs`` after the warm-up) during one forward pass,
  minus the output's own size, so inputs and outputs are not counted. Where
  ``clear_refs`` is unavailable, ``ru_maxrss`` is used instead (recorded in the file).

The sweep covers ``T = 256 ... 8192`` with 12 heads of 64 (batch 1, float32), causal and
not, for four methods: ``explicit`` (the package's step-by-step computation),
``flash`` ([`flash_attention`][attnlab.flash_attention]), ``sdpa``
(``torch.nn.functional.scaled_dot_product_attention``; the kernel it dispatched to is
recorded, read from the profiler's op names) and ``sdpa_math`` (the same function
restricted to its math backend). Then the modules on the configuration of
LLMs-from-scratch's comparison, and one large explicit run. Every result also gets a
``fraction_of_roofline``: its useful FLOP/s over this machine's measured float32
matmul rate.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import math
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "RESULT_NAMES",
    "kv_cache_sizes",
    "load_results",
    "main",
    "parse_args",
    "plot_decode",
    "plot_sweep",
    "plot_window",
    "results_file",
    "run_backward_benchmark",
    "run_benchmark",
    "run_decode_benchmark",
    "run_ring_memory",
    "run_window_benchmark",
]

RESULT_NAMES = ("forward", "backward", "ring", "decode", "window")
"""The recorded runs, by name: each is ``attnlab/results/<name>.json`` in the package."""


def results_file(name: str) -> Traversable:
    """The recorded results file of run ``name``, inside the installed package.

    Read through ``importlib.resources``, so it is found wherever the package is: a
    checkout's ``src/attnlab/results/`` or an installed wheel.

    Args:
        name: One of ``RESULT_NAMES``.

    Returns:
        The file, as an ``importlib.resources`` traversable (``read_text()`` reads it).
    """
    if name not in RESULT_NAMES:
        raise ValueError(f"name must be one of {', '.join(RESULT_NAMES)}; got {name!r}")
    return resources.files("attnlab") / "results" / f"{name}.json"


METHODS = ("explicit", "flash", "sdpa", "sdpa_math")
"""The attention methods of the sweep, in the order the tables list them."""

MODULE_METHODS = (
    "attnlab_torch",
    "attnlab_flash",
    "attnlab_explicit",
    "torch_mha_need_weights",
    "torch_mha_no_weights",
)
"""The module variants: ``attnlab.MultiHeadAttention`` per backend, then PyTorch's."""

FULL: dict[str, Any] = {
    "T": [256, 512, 1024, 2048, 4096, 8192],
    "heads": 12,
    "head_dim": 64,
    "module": {"B": 8, "T": 1024, "d": 768, "heads": 12},
    "large": {"T": 4096, "d": 4608},
    "matmul_n": 2048,
    "repeats": 5,
    "time_budget_s": 2.0,
}
QUICK: dict[str, Any] = {
    "T": [64],
    "heads": 12,
    "head_dim": 64,
    "module": {"B": 2, "T": 64, "d": 96, "heads": 12},
    "large": {"T": 128, "d": 144},
    "matmul_n": 256,
    "repeats": 2,
    "time_budget_s": 0.5,
}
MIB = 2**20


def load_results(source: str | os.PathLike[str] = "forward") -> dict[str, Any]:
    """Read benchmark results: a recorded run by name, or a file the command line wrote.

    Args:
        source: A name in ``RESULT_NAMES`` (the recorded run the docs show; by default
            the forward sweep), or the path of a JSON file written by
            ``python -m attnlab.bench``.

    Returns:
        The results, as the run's ``run_*`` function returned them (for ``forward``,
        the keys ``machine``, ``matmul_gflops``, ``sweep``, ``modules`` and
        ``large_run``; ``sweep`` has one entry per method, ``T`` and ``causal``).
    """
    if isinstance(source, str) and source in RESULT_NAMES:
        text = results_file(source).read_text(encoding="utf-8")
    else:
        path = Path(source)
        if not path.is_file():
            raise ValueError(
                f"source must be one of {', '.join(RESULT_NAMES)} or a results file; "
                f"got {str(source)!r}"
            )
        text = path.read_text(encoding="utf-8")
    results: dict[str, Any] = json.loads(text)
    return results


def plot_sweep(results: dict[str, Any], metric: str = "median_ms") -> Any:
    """Draw one sweep metric against ``T``, log-log, causal and not side by side.

    Colours come from the active matplotlib style, so the figure can be drawn in a
    light or a dark theme.

    Args:
        results: Results as returned by [`load_results`][attnlab.bench.load_results].
        metric: ``"median_ms"`` (forward time) or ``"peak_mib"`` (peak extra memory).

    Returns:
        A ``matplotlib.figure.Figure`` with two panels.
    """
    import matplotlib.pyplot as plt  # the plot extra; not needed to import attnlab

    labels = {"median_ms": "forward time (ms)", "peak_mib": "peak extra memory (MiB)"}
    if metric not in labels:
        raise ValueError(f"metric must be 'median_ms' or 'peak_mib'; got {metric!r}")
    names = {
        "explicit": "attnlab explicit",
        "flash": "attnlab.flash_attention",
        "sdpa": "torch SDPA",
        "sdpa_math": "torch SDPA, math backend",
    }
    markers = {"explicit": "o", "flash": "s", "sdpa": "^", "sdpa_math": "D"}
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), sharey=True, layout="constrained")
    for ax, causal in zip(axes, (False, True), strict=True):
        for method in METHODS:
            points = [
                (row["T"], row[metric])
                for row in results["sweep"]
                if row["method"] == method and row["causal"] == causal and row.get(metric)
            ]
            if points:
                ts, values = zip(*points, strict=True)
                ax.plot(ts, values, marker=markers[method], label=names[method])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T (tokens)")
        ax.set_title("causal" if causal else "not causal")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel(labels[metric])
    axes[0].legend(fontsize="small")
    return fig


def _plain_log_ticks(ax: Any, values: list[float]) -> None:
    """Label a log y axis at 1, 2, 3, 5, 10, 20 ... (those within the range of ``values``)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    low, high = min(values) / 1.25, max(values) * 1.25
    ticks = [m * 10.0**e for e in range(-1, 5) for m in (1, 2, 3, 5) if low <= m * 10.0**e <= high]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def plot_decode(results: dict[str, Any], target: float = 10.0) -> Any:
    """Decoding time against ``T``, with a cache and recomputing, and the speed-up.

    Args:
        results: The ``decode`` results, as ``run_decode_benchmark`` returns them.
        target: A speed-up to mark with a dashed line.

    Returns:
        A ``matplotlib.figure.Figure`` with two log-log panels: total time, speed-up.
    """
    import matplotlib.pyplot as plt  # the plot extra; not needed to import attnlab

    steps = results["steps"]
    ts = [row["T"] for row in steps]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8), layout="constrained")
    left.plot(ts, [row["recompute_s"] for row in steps], marker="o", label="recompute the prefix")
    left.plot(ts, [row["cached_s"] for row in steps], marker="s", label="KV cache")
    left.set_ylabel("time to decode T tokens (s)")
    left.set_title("total decoding time")
    left.legend(fontsize="small")
    right.plot(ts, [row["speedup"] for row in steps], marker="D", color="C2", label="speed-up")
    right.axhline(target, color="C3", linestyle="--", label=f"target {target:g}x")
    right.set_ylabel("recompute time / cached time")
    right.set_title("speed-up of the cache")
    right.legend(fontsize="small")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens decoded T")
        ax.grid(True, which="major", alpha=0.3)
    _plain_log_ticks(right, [target, *(row["speedup"] for row in steps)])
    return fig


def plot_window(results: dict[str, Any]) -> Any:
    """Sliding-window against full causal flash attention: time and memory against ``T``.

    Args:
        results: The ``window`` results, as ``run_window_benchmark`` returns them.

    Returns:
        A ``matplotlib.figure.Figure`` with two log-log panels: time, peak extra memory.
    """
    import matplotlib.pyplot as plt  # the plot extra; not needed to import attnlab

    window = results["config"]["window"]
    names = {"causal": "causal flash", "window": f"window {window} flash"}
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), layout="constrained")
    panels = (("median_ms", "time per call (ms)"), ("peak_mib", "peak extra memory (MiB)"))
    for ax, (metric, label) in zip(axes, panels, strict=True):
        for method, marker in (("causal", "o"), ("window", "s")):
            rows = [row for row in results["rows"] if row["method"] == method]
            ax.plot(
                [row["T"] for row in rows],
                [row[metric] for row in rows],
                marker=marker,
                label=names[method],
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T (tokens)")
        ax.set_ylabel(label)
        ax.grid(True, which="major", alpha=0.3)
    _plain_log_ticks(axes[1], [row["peak_mib"] for row in results["rows"]])
    axes[0].set_title("time")
    axes[1].set_title("memory")
    axes[0].legend(fontsize="small")
    return fig


# ---------------------------------------------------------------- measuring, in a child


def _read_status_kib(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``), or ``None``."""
    try:
        with open("/proc/self/status", encoding="ascii") as file:
            for line in file:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _release_free_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc only)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _measure(
    run: Callable[[], torch.Tensor],
    repeats: int,
    budget_s: float,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Any]:
    """Warm up, then time repeated calls, the first of which also measures peak memory.

    The number of calls is ``repeats``, cut down to fit about ``budget_s`` seconds
    (at least one). ``clock`` reads the time: wall-clock by default,
    ``time.process_time`` for the process's CPU time.
    """
    start = clock()
    output = run()  # warm-up: thread pools, kernels, caches
    first_s = clock() - start
    output_bytes = output.numel() * output.element_size()
    del output
    _release_free_memory()

    baseline_kib = _read_status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as file:
            file.write("5")  # reset VmHWM, the peak resident set, to the current size
        method = "VmHWM"
    except OSError:
        baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        method = "ru_maxrss"
    start = clock()
    output = run()
    times = [clock() - start]  # the measured pass is also the first timing
    if method == "VmHWM":
        peak_kib = _read_status_kib("VmHWM") or 0
    else:
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del output
    extra = max(0, (peak_kib - (baseline_kib or 0)) * 1024 - output_bytes)

    n = max(1, min(repeats, math.ceil(budget_s / max(first_s, 1e-6))))
    for _ in range(n - 1):
        start = clock()
        run()
        times.append(clock() - start)
    return {
        "median_ms": statistics.median(times) * 1e3,
        "repeats": n,
        "peak_mib": extra / MIB,
        "memory_method": method,
    }


def _sdpa_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> str:
    """The aten op SDPA dispatched to, read from the profiler's op names.

    The autograd profiler, not ``torch.profiler``: the latter imports ``torch._dynamo``
    on first use (seconds, in every fresh process).
    """
    import torch.nn.functional as F
    from torch.autograd.profiler import profile

    with profile() as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    names = [event.key for event in prof.key_averages()]
    fused = [name for name in names if name.startswith("aten::_scaled_dot_product")]
    return fused[0] if fused else "aten::scaled_dot_product_attention (math, unfused)"


def _attention_flops(T: int, heads: int, head_dim: int, causal: bool, batch: int = 1) -> float:
    """Useful FLOPs of attention: two matmuls of ``2 T^2 D`` per head, halved if causal."""
    flops = 4.0 * batch * heads * T * T * head_dim
    return flops / 2 if causal else flops


def _worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one configuration; called in a fresh child process."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import attnlab

    torch.manual_seed(0)
    kind = spec["kind"]
    result: dict[str, Any] = dict(spec)
    with torch.no_grad():
        if kind == "matmul":
            n = spec["n"]
            a, b = torch.randn(n, n), torch.randn(n, n)
            timing = _measure(lambda: a @ b, spec["repeats"] * 2, spec["budget_s"])
            result["gflops"] = 2.0 * n**3 / (timing["median_ms"] / 1e3) / 1e9
            return result
        if kind == "attention":
            T, H, D, causal = spec["T"], spec["heads"], spec["head_dim"], spec["causal"]
            q, k, v = (torch.randn(1, H, T, D) for _ in range(3))  # (B, H, T, D)
            runs: dict[str, Callable[[], torch.Tensor]] = {
                "explicit": lambda: attnlab.scaled_dot_product_attention(q, k, v, is_causal=causal),
                "flash": lambda: attnlab.flash_attention(q, k, v, is_causal=causal),
                "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
            }

            def math_only() -> torch.Tensor:
                with sdpa_kernel(SDPBackend.MATH):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            runs["sdpa_math"] = math_only
            result.update(_measure(runs[spec["method"]], spec["repeats"], spec["budget_s"]))
            if spec["method"] == "sdpa":
                result["kernel"] = _sdpa_kernel(q, k, v, causal)
            result["gflops"] = _attention_flops(T, H, D, causal) / result["median_ms"] / 1e6
            return result
        if kind == "module":
            B, T, d, H = spec["B"], spec["T"], spec["d"], spec["heads"]
            x = torch.randn(B, T, d)
            method = spec["method"]
            if method.startswith("attnlab_"):
                backend = method.removeprefix("attnlab_")
                mha = attnlab.MultiHeadAttention(
                    d, d, H, qkv_bias=False, causal=True, out_bias=False, backend=backend
                ).eval()
                run = lambda: mha(x)  # noqa: E731
            else:
                torch_mha = torch.nn.MultiheadAttention(d, H, bias=False, batch_first=True)
                torch_mha.eval()
                future = torch.ones(T, T, dtype=torch.bool).triu(1)  # True = may NOT attend
                need = method == "torch_mha_need_weights"

                def run() -> torch.Tensor:
                    output: torch.Tensor = torch_mha(x, x, x, attn_mask=future, need_weights=need)[
                        0
                    ]
                    return output

            result.update(_measure(run, spec["repeats"], spec["budget_s"]))
            flops = _attention_flops(T, H, d // H, True, B) + 4 * 2.0 * B * T * d * d
            result["gflops"] = flops / result["median_ms"] / 1e6
            return result
        if kind == "large_run":
            T, d = spec["T"], spec["d"]
            torch.manual_seed(123)
            module = attnlab.SelfAttentionV2(d, d, backend="explicit")
            x = torch.rand(T, d)
            timing = _measure(lambda: module(x), spec["repeats"], spec["budget_s"])
            return {
                "T": T,
                "d_in": d,
                "d_out": d,
                "forward_s": timing["median_ms"] / 1e3,
                "peak_mib": timing["peak_mib"],
                "attn_matrix_mib": T * T * 4 / MIB,
                "repeats": timing["repeats"],
            }
    raise ValueError(f"unknown kind {kind!r}")


# ---------------------------------------------------------------- orchestration


def _available_mib() -> float:
    """``MemAvailable`` from ``/proc/meminfo`` (infinite where unreadable)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.inf


def _specs(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every configuration to run, in order: matmul, sweep, modules, large run."""
    common = {"repeats": config["repeats"], "budget_s": config["time_budget_s"]}
    specs: list[dict[str, Any]] = [{"kind": "matmul", "n": config["matmul_n"], **common}]
    for T in config["T"]:
        for causal in (False, True):
            for method in METHODS:
                specs.append(
                    {
                        "kind": "attention",
                        "method": method,
                        "T": T,
                        "causal": causal,
                        "heads": config["heads"],
                        "head_dim": config["head_dim"],
                        **common,
                    }
                )
    for method in MODULE_METHODS:
        specs.append({"kind": "module", "method": method, **config["module"], **common})
    large = config["large"]
    specs.append({"kind": "large_run", "T": large["T"], "d": large["d"], **common, "repeats": 1})
    return specs


def _needed_mib(spec: dict[str, Any]) -> float:
    """A generous estimate of the memory a configuration needs."""
    if spec["kind"] == "attention" and spec["method"] in ("explicit", "sdpa_math"):
        return float(4 * spec["heads"] * spec["T"] ** 2 * 4 / MIB)
    return 0.0


def _fresh_process_context() -> Any:
    """A ``forkserver`` multiprocessing context, for running each configuration fresh.

    Each child forks from a server that has imported torch and attnlab and nothing
    else, so no child pays for those imports or sees another's memory.
    """
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "attnlab"])
    return ctx


def _in_fresh_process(ctx: Any, worker: Callable[[Any], Any], spec: Any) -> Any:
    """``worker(spec)``, run in a fresh child of ``ctx``."""
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        return pool.apply(worker, (spec,))


def run_benchmark(quick: bool = False, progress: bool = True) -> dict[str, Any]:
    """Run every configuration, each in a fresh process, and collect the results.

    Args:
        quick: Tiny sizes and few repeats, to check that everything works.
        progress: Show a tqdm progress bar.

    Returns:
        The results dict that ``main`` writes as JSON.
    """
    from tqdm import tqdm  # the bench extra

    # Pickled by reference: name it through the package even when run as __main__.
    from attnlab.bench import _worker as worker

    config = QUICK if quick else FULL
    specs = _specs(config)
    ctx = _fresh_process_context()
    records: list[dict[str, Any]] = []
    bar = tqdm(specs, disable=not progress, unit="config", file=sys.stderr)
    for spec in bar:
        label = f"{spec['kind']} {spec.get('method', '')} {spec.get('T', '')}".strip()
        bar.set_description(label)
        if _needed_mib(spec) > 0.8 * _available_mib():
            records.append({**spec, "skipped": "not enough free memory"})
            continue
        records.append(_in_fresh_process(ctx, worker, spec))

    matmul = next(r for r in records if r.get("kind") == "matmul")
    rate = matmul["gflops"]
    sweep = []
    for r in records:
        if r.get("kind") != "attention":
            continue
        row = {key: r.get(key) for key in ("method", "T", "causal", "median_ms", "peak_mib")}
        row["fraction_of_roofline"] = r["gflops"] / rate if "gflops" in r else None
        for extra in ("kernel", "repeats", "skipped"):
            if extra in r:
                row[extra] = r[extra]
        sweep.append(row)
    modules = [
        {
            "method": r["method"],
            "median_ms": r["median_ms"],
            "peak_mib": r["peak_mib"],
            "fraction_of_roofline": r["gflops"] / rate,
            "repeats": r["repeats"],
        }
        for r in records
        if r.get("kind") == "module"
    ]
    kernels = sorted({str(row["kernel"]) for row in sweep if "kernel" in row})
    return {
        "machine": {
            "torch": torch.__version__,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "sdpa_cpu_kernels": kernels,
            "memory_method": next(
                (r["memory_method"] for r in records if "memory_method" in r), None
            ),
        },
        "quick": quick,
        "matmul_gflops": rate,
        "matmul_n": config["matmul_n"],
        "sweep_config": {"heads": config["heads"], "head_dim": config["head_dim"], "B": 1},
        "sweep": sweep,
        "module_config": {**config["module"], "causal": True, "qkv_bias": False},
        "modules": modules,
        "large_run": next(r for r in records if "forward_s" in r),
    }


# ------------------------------------------------------------------ forward + backward


def _backward_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One forward+backward configuration, in a fresh child: peak memory, then times.

    One thread: on a machine shared with other jobs, two threads that meet at a barrier
    after every small operation of flash's Python loops mostly wait for each other to
    be scheduled, so multi-threaded times would measure the scheduler. The times are
    the process's CPU time (with one thread, the time it actually computed); wall-clock
    times are recorded next to them.
    """
    import torch.nn.functional as F

    import attnlab

    torch.set_num_threads(1)
    torch.manual_seed(0)
    T, H, D, method = spec["T"], spec["heads"], spec["head_dim"], spec["method"]
    q, k, v = (torch.randn(1, H, T, D, requires_grad=True) for _ in range(3))  # (B, H, T, D)
    grad_output = torch.randn(1, H, T, D)
    attend_fn: dict[str, Callable[[], torch.Tensor]] = {
        "explicit": lambda: attnlab.scaled_dot_product_attention(q, k, v, is_causal=True),
        "flash": lambda: attnlab.flash_attention(q, k, v, is_causal=True),
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }
    times: dict[str, list[float]] = {key: [] for key in ("fwd_cpu", "bwd_cpu", "fwd", "bwd")}

    def forward_backward() -> torch.Tensor:
        q.grad = k.grad = v.grad = None
        clocks = [(time.process_time(), time.perf_counter())]
        output = attend_fn[method]()
        clocks.append((time.process_time(), time.perf_counter()))
        output.backward(grad_output)  # type: ignore[no-untyped-call]
        clocks.append((time.process_time(), time.perf_counter()))
        for step, name in enumerate(("fwd", "bwd")):
            times[name + "_cpu"].append(clocks[step + 1][0] - clocks[step][0])
            times[name].append(clocks[step + 1][1] - clocks[step][1])
        assert q.grad is not None
        return q.grad

    memory = _measure(forward_backward, 1, 0.0)  # warm-up, then one measured pass
    for _ in range(spec["repeats"] - 1):
        forward_backward()
    median = {name: statistics.median(values[1:]) * 1e3 for name, values in times.items()}
    return {
        **spec,
        "peak_mib": memory["peak_mib"],
        "memory_method": memory["memory_method"],
        "forward_ms": median["fwd_cpu"],
        "backward_ms": median["bwd_cpu"],
        "forward_wall_ms": median["fwd"],
        "backward_wall_ms": median["bwd"],
    }


def run_backward_benchmark(quick: bool = False) -> dict[str, Any]:
    """Forward+backward peak extra memory and time: explicit, flash and SDPA.

    Causal, batch 1, 4 heads of 64, float32, ``T = 1024 ... 8192`` (``quick``: 128 and
    256); each configuration in a fresh process with one thread, as in the forward
    benchmark. Peak extra memory is that of one forward+backward pass beyond the
    inputs and the gradients of the inputs (which the warm-up pass already left
    allocated). Times are medians of CPU time per pass (see ``_backward_worker``); the
    explicit computation is measured once, for its memory.
    """
    from attnlab.bench import _backward_worker as worker  # pickled by reference

    sizes = (128, 256) if quick else (1024, 2048, 4096, 8192)
    ctx = _fresh_process_context()
    records: list[dict[str, Any]] = []
    for T in sizes:
        for method in ("explicit", "flash", "sdpa"):
            repeats = 1 if method == "explicit" else 3
            spec: dict[str, Any] = {
                "T": T,
                "heads": 4,
                "head_dim": 64,
                "method": method,
                "repeats": repeats,
            }
            needed_mib = 8 * 4 * T * T * 4 / MIB  # explicit: a few (H, T, T) matrices
            if method == "explicit" and needed_mib > 0.8 * _available_mib():
                records.append({**spec, "skipped": "not enough free memory"})
                continue
            records.append(_in_fresh_process(ctx, worker, spec))
    ratios = {}
    for T in sizes:
        by = {r["method"]: r for r in records if r["T"] == T}
        flash, sdpa = by["flash"], by["sdpa"]
        ratios[str(T)] = {
            "forward_backward": (flash["forward_ms"] + flash["backward_ms"])
            / (sdpa["forward_ms"] + sdpa["backward_ms"]),
            "backward": flash["backward_ms"] / sdpa["backward_ms"],
        }
    return {
        "machine": platform.machine(),
        "torch": torch.__version__,
        "threads": 1,
        "cpu_count": os.cpu_count(),
        "note": (
            "recorded on a 2-core machine shared by 8 agents (load average about 12): "
            "one thread per process, times in CPU seconds of the process"
        ),
        "results": records,
        "flash_over_sdpa_time": ratios,
    }


def _ring_rank(rank: int, world_size: int, T: int) -> dict[str, float]:
    """One rank of the ring measurement: the peak extra memory of its shards and its call.

    The rank draws its shards of q, k and v and runs causal zig-zag ring attention on
    them; the output is not counted.
    """
    from attnlab import ring

    # Big blocks straight from and back to the OS (glibc otherwise keeps freed blocks
    # of a few MiB for reuse), so that the peak resident set follows the live tensors.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD = 64 KiB
    chunk = T // (2 * world_size)

    def shard(seed: int) -> torch.Tensor:
        """This rank's zig-zag shard of one (1, 4, T, 64) tensor, drawn chunk by chunk."""
        out = torch.empty(1, 4, 2 * chunk, 64)  # (B, H, T / P, D)
        for i, c in enumerate(ring.chunk_ids(rank, world_size, "zigzag")):
            gen = torch.Generator().manual_seed(1000 * seed + c)
            out[..., i * chunk : (i + 1) * chunk, :].normal_(generator=gen)
        return out

    def shards_and_attention() -> torch.Tensor:
        q, k, v = shard(0), shard(1), shard(2)
        return ring.ring_attention(q, k, v, is_causal=True, layout="zigzag")

    start = time.perf_counter()
    extra = ring.peak_extra_bytes(shards_and_attention)
    return {
        "peak_mib": extra / MIB,
        "shard_mib": 4 * 2 * chunk * 64 * 4 / MIB,
        "seconds": time.perf_counter() - start,
    }


def run_ring_memory(T: int = 16384, world_sizes: tuple[int, ...] = (1, 2, 4)) -> dict[str, Any]:
    """Peak extra memory per rank of causal zig-zag ring attention, ``P`` local processes.

    Batch 1, 4 heads of 64, float32; each rank measures, with
    [`peak_extra_bytes`][attnlab.ring.peak_extra_bytes], its own peak resident memory
    while it draws its shards of q, k and v and runs the ring on them, beyond its
    output and beyond what the process held before (after a warm-up, so the process
    group, gloo's buffers and the thread pools already exist). ``T`` is large enough
    (a shard of 16 MiB at ``P = 1``) that the memory which grows with ``T / P``
    outweighs the few MiB that do not (one block of scores per head).
    """
    from attnlab import ring

    runs = []
    for world_size in world_sizes:
        ranks = ring.run_local(_ring_rank, world_size, T, timeout_s=600.0)
        runs.append({"world_size": world_size, "T": T, "ranks": ranks})
    return {
        "note": "recorded on a 2-core machine shared by 8 agents; memory does not depend on load",
        "runs": runs,
    }


# ------------------------------------------------------------- decoding with a KV cache

DECODE_FULL: dict[str, Any] = {
    "d_model": 512,
    "num_heads": 8,
    "num_kv_heads": 2,
    "T": [128, 256, 512, 1024, 2048],
    "stride": 16,
}
DECODE_QUICK: dict[str, Any] = {
    "d_model": 64,
    "num_heads": 4,
    "num_kv_heads": 2,
    "T": [16, 32],
    "stride": 4,
}
LLAMA3_8B: dict[str, Any] = {"num_layers": 32, "num_heads": 32, "head_dim": 128}
"""The attention shape of Llama 3 8B, for the KV cache's bytes per token."""

CPU_CLOCK = "CPU time of the measuring process (time.process_time), torch on 1 thread"
"""How the decode and window runs read time: on a shared machine, wall-clock time
would also count the time other jobs hold the cores."""


def _machine_info() -> dict[str, Any]:
    """The software and the machine a run was recorded on, and how busy it was."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,)
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": round(load[0], 2),
    }


def kv_cache_sizes(dtype: torch.dtype = torch.bfloat16) -> dict[str, dict[str, int]]:
    """The KV cache's bytes per token at Llama 3 8B's shape, for MHA, GQA and MQA.

    Computed with [`kv_cache_bytes_per_token`][attnlab.kv_cache_bytes_per_token], not
    measured: 32 layers, 32 query heads of 128, and 32, 8 or 1 key/value heads.
    """
    from attnlab import kv_cache_bytes_per_token

    shape = LLAMA3_8B
    return {
        name: {
            "num_kv_heads": kv_heads,
            "bytes_per_token": kv_cache_bytes_per_token(
                shape["num_layers"], kv_heads, shape["head_dim"], dtype
            ),
        }
        for name, kv_heads in (("MHA", shape["num_heads"]), ("GQA", 8), ("MQA", 1))
    }


def _decode_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Decode ``max(T)`` tokens with a cache, then by recomputing; in a fresh child.

    The cached decoder's steps are all timed. The recomputing decoder's step ``n``
    (a forward pass over the ``n`` tokens so far, keeping the last row) costs the same
    whatever the tokens are, so it is timed for one length in each run of ``stride``
    steps, the middle one (``n = stride * k + stride // 2``), and counts for all of them.
    """
    import attnlab

    torch.set_num_threads(1)
    torch.manual_seed(0)
    d, stride, n = spec["d_model"], spec["stride"], max(spec["T"])
    layer = attnlab.GroupedQueryAttention(d, spec["num_heads"], spec["num_kv_heads"]).eval()
    x = torch.randn(1, n, d)  # (B, T, d_model)
    clock = time.process_time
    with torch.no_grad():
        warm = attnlab.KVCache()  # warm-up: kernels and allocator, both ways
        for t in range(min(n, 2 * stride)):
            layer(x[:, t : t + 1], cache=warm)
            layer(x[:, : t + 1])

        cache, rows, elapsed = attnlab.KVCache(), [], 0.0
        cached_total = {}  # tokens decoded -> CPU seconds so far
        for t in range(n):
            start = clock()
            rows.append(layer(x[:, t : t + 1], cache=cache))  # (1, 1, d_model)
            elapsed += clock() - start
            cached_total[t + 1] = elapsed

        recompute_step, max_diff = {}, 0.0  # sampled prefix length -> CPU seconds
        for length in range(stride // 2, n + 1, stride):
            start = clock()
            last = layer(x[:, :length])[:, -1:]  # (1, 1, d_model): the newest token's row
            recompute_step[length] = clock() - start
            max_diff = max(max_diff, float((last - rows[length - 1]).abs().max()))

    steps = []
    for T in spec["T"]:
        recompute = stride * sum(s for length, s in recompute_step.items() if length <= T)
        steps.append(
            {
                "T": T,
                "cached_s": cached_total[T],
                "recompute_s": recompute,
                "speedup": recompute / cached_total[T],
            }
        )
    return {"steps": steps, "max_abs_diff": max_diff, "cache_bytes": cache.nbytes}


def run_decode_benchmark(quick: bool = False) -> dict[str, Any]:
    """Cached decoding against recomputing the prefix, and the KV cache's size.

    One ``GroupedQueryAttention`` layer (full: width 512, 8 query heads sharing 2
    key/value heads of 64; batch 1, float32) decodes ``T = 2048`` tokens one at a time
    (``quick``: width 64, 32 tokens), in a fresh process: through a
    [`KVCache`][attnlab.KVCache], and by running the layer over the whole prefix at
    every step and keeping the last row, as a decoder without a cache does. The total
    for each ``T`` is the first ``T`` steps of that one run. Time is CPU time on one
    thread (``CPU_CLOCK``). Also records the KV cache's bytes per token at Llama 3 8B's
    shape ([`kv_cache_sizes`][attnlab.bench.kv_cache_sizes]).
    """
    from attnlab.bench import _decode_worker as worker  # pickled by reference

    config = DECODE_QUICK if quick else DECODE_FULL
    machine = _machine_info()
    measured = _in_fresh_process(_fresh_process_context(), worker, config)
    return {
        "note": "recorded on a shared 2-core machine, busy with other jobs: "
        "times are CPU time, not wall-clock",
        "machine": machine,
        "quick": quick,
        "clock": CPU_CLOCK,
        "config": {
            **{key: config[key] for key in ("d_model", "num_heads", "num_kv_heads")},
            "head_dim": config["d_model"] // config["num_heads"],
            "B": 1,
            "dtype": "float32",
            "recompute_sampled_every": config["stride"],
        },
        **measured,
        "kv_cache_shape": {**LLAMA3_8B, "model": "Llama 3 8B", "dtype": "bfloat16"},
        "kv_cache_bytes_per_token": kv_cache_sizes(),
    }


# ------------------------------------------------------------------ sliding-window flash

WINDOW_FULL: dict[str, Any] = {
    "T": [512, 1024, 2048, 4096, 8192],
    "window": 256,
    "heads": 12,
    "head_dim": 64,
    "repeats": 3,
    "time_budget_s": 3.0,
}
WINDOW_QUICK: dict[str, Any] = {
    "T": [64, 128],
    "window": 32,
    "heads": 2,
    "head_dim": 16,
    "repeats": 2,
    "time_budget_s": 0.5,
}


def _window_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Time and peak extra memory of one flash attention call; in a fresh child."""
    import attnlab

    torch.set_num_threads(1)
    torch.manual_seed(0)
    T, H, D, W = spec["T"], spec["heads"], spec["head_dim"], spec["window"]
    q, k, v = (torch.randn(1, H, T, D) for _ in range(3))  # (B, H, T, D)
    causal = spec["method"] == "causal"
    window = None if causal else W
    with torch.no_grad():
        timing = _measure(
            lambda: attnlab.flash_attention(q, k, v, is_causal=causal, window=window),
            spec["repeats"],
            spec["budget_s"],
            clock=time.process_time,
        )
    blocks = attnlab.flash_visited_blocks(T, T, is_causal=causal, window=window)
    return {
        "method": spec["method"],
        "T": T,
        "median_ms": timing["median_ms"],
        "peak_mib": timing["peak_mib"],
        "repeats": timing["repeats"],
        "memory_method": timing["memory_method"],
        "blocks": len(blocks),
    }


def run_window_benchmark(quick: bool = False) -> dict[str, Any]:
    """Sliding-window flash attention against full causal flash attention, as ``T`` grows.

    [`flash_attention`][attnlab.flash_attention] with ``window=256`` and with
    ``is_causal=True``, 12 heads of 64, batch 1, float32, ``T = 512 ... 8192``
    (``quick``: tiny sizes), each configuration in a fresh process: time (the median of
    repeated calls after a warm-up, CPU time on one thread) and peak extra memory,
    measured as in the forward sweep; also the number of blocks each computes.
    """
    from attnlab.bench import _window_worker as worker  # pickled by reference

    config = WINDOW_QUICK if quick else WINDOW_FULL
    ctx = _fresh_process_context()
    machine = _machine_info()
    rows = []
    for T in config["T"]:
        for method in ("causal", "window"):
            spec = {
                "method": method,
                "T": T,
                **{key: config[key] for key in ("window", "heads", "head_dim", "repeats")},
                "budget_s": config["time_budget_s"],
            }
            rows.append(_in_fresh_process(ctx, worker, spec))
    return {
        "note": "recorded on a shared 2-core machine, busy with other jobs: "
        "times are CPU time, not wall-clock",
        "machine": machine,
        "quick": quick,
        "clock": CPU_CLOCK,
        "config": {
            **{key: config[key] for key in ("window", "heads", "head_dim")},
            "B": 1,
            "dtype": "float32",
        },
        "rows": rows,
    }


def _run(name: str, quick: bool, progress: bool) -> dict[str, Any]:
    """Run the benchmark ``name`` (one of ``RESULT_NAMES``)."""
    if name == "forward":
        return run_benchmark(quick=quick, progress=progress)
    if name == "backward":
        return run_backward_benchmark(quick)
    if name == "ring":
        return run_ring_memory(T=256, world_sizes=(1, 2)) if quick else run_ring_memory()
    if name == "decode":
        return run_decode_benchmark(quick)
    return run_window_benchmark(quick)


def parse_args(argv: list[str] | None = None) -> tuple[list[str], argparse.Namespace]:
    """The runs the command line chose (``forward`` when it names none), and its options."""
    parser = argparse.ArgumentParser(
        prog="python -m attnlab.bench",
        description="Run attnlab's benchmarks; each run writes <name>.json into --output.",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke test")
    parser.add_argument(
        "--output",
        type=Path,
        default=Path("."),
        help="the directory to write <name>.json into (default: the current directory)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    runs = parser.add_argument_group("runs (default: --forward only)")
    helps = {
        "forward": "the forward sweep of every attention path",
        "backward": "forward+backward memory and backward time",
        "ring": "ring attention's memory per rank",
        "decode": "KV-cached decoding against recomputing the prefix",
        "window": "sliding-window flash attention against causal flash attention",
    }
    for name in RESULT_NAMES:
        runs.add_argument(f"--{name}", action="store_true", help=f"{helps[name]} ({name}.json)")
    runs.add_argument("--all", action="store_true", help="every run above")
    args = parser.parse_args(argv)
    chosen = [name for name in RESULT_NAMES if args.all or getattr(args, name)] or ["forward"]
    return chosen, args


def main(argv: list[str] | None = None) -> None:
    """Command line: ``python -m attnlab.bench [--quick] [RUNS] [--output DIR]``."""
    chosen, args = parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    for name in chosen:
        results = _run(name, args.quick, not args.no_progress)
        out = args.output / f"{name}.json"
        out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out}", flush=True)


if __name__ == "__main__":
    main()
