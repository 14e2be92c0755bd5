"""Benchmark: explicit attention, ``flash_attention`` and PyTorch's kernels, side by side.

Run it from a checkout (it needs the ``bench`` extra: tqdm, matplotlib, numpy)::

    python -m attnlab.bench            # the full sweep, written to ./benchmark-results.json
    python -m attnlab.bench --quick    # tiny sizes, to check that everything runs

What it measures, each configuration in a fresh process (forked from a server that
has imported torch and nothing else, so no configuration sees another's memory):

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
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "BACKWARD_RESULTS_PATH",
    "DEFAULT_RESULTS_PATH",
    "RING_RESULTS_PATH",
    "load_results",
    "main",
    "plot_sweep",
    "run_backward_benchmark",
    "run_benchmark",
    "run_ring_memory",
]

DEFAULT_RESULTS_PATH = Path(__file__).resolve().parents[2] / "docs/efficient/benchmark-results.json"
"""The recorded results the docs read, in a checkout: ``docs/efficient/benchmark-results.json``.

Only read from (``load_results``); the command line writes to ``--output``, by default
``benchmark-results.json`` in the current directory, never into the installed package.
"""

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
    "T": [64, 128],
    "heads": 12,
    "head_dim": 64,
    "module": {"B": 2, "T": 64, "d": 96, "heads": 12},
    "large": {"T": 128, "d": 144},
    "matmul_n": 256,
    "repeats": 2,
    "time_budget_s": 0.5,
}
MIB = 2**20


def load_results(path: Path | str = DEFAULT_RESULTS_PATH) -> dict[str, Any]:
    """Read recorded benchmark results.

    Args:
        path: A JSON file written by ``python -m attnlab.bench``; defaults to the one
            the docs show.

    Returns:
        The results: ``machine``, ``matmul_gflops``, ``sweep`` (one entry per method,
        ``T`` and ``causal``), ``modules`` and ``large_run``.
    """
    with open(path, encoding="utf-8") as file:
        results: dict[str, Any] = json.load(file)
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


def _measure(run: Callable[[], torch.Tensor], repeats: int, budget_s: float) -> dict[str, Any]:
    """Warm up, then time repeated calls, the first of which also measures peak memory.

    The number of calls is ``repeats``, cut down to fit about ``budget_s`` seconds
    (at least one).
    """
    start = time.perf_counter()
    output = run()  # warm-up: thread pools, kernels, caches
    first_s = time.perf_counter() - start
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
    start = time.perf_counter()
    output = run()
    times = [time.perf_counter() - start]  # the measured pass is also the first timing
    if method == "VmHWM":
        peak_kib = _read_status_kib("VmHWM") or 0
    else:
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del output
    extra = max(0, (peak_kib - (baseline_kib or 0)) * 1024 - output_bytes)

    n = max(1, min(repeats, math.ceil(budget_s / max(first_s, 1e-6))))
    for _ in range(n - 1):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return {
        "median_ms": statistics.median(times) * 1e3,
        "repeats": n,
        "peak_mib": extra / MIB,
        "memory_method": method,
    }


def _sdpa_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> str:
    """The aten op SDPA dispatched to, read from the profiler's op names."""
    import torch.nn.functional as F
    from torch.profiler import profile

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


def run_benchmark(quick: bool = False, progress: bool = True) -> dict[str, Any]:
    """Run every configuration, each in a fresh process, and collect the results.

    Args:
        quick: Tiny sizes and few repeats, to check that everything works.
        progress: Show a tqdm progress bar.

    Returns:
        The results dict that ``main`` writes as JSON.
    """
    import multiprocessing

    from tqdm import tqdm  # the bench extra

    # Pickled by reference: name it through the package even when run as __main__.
    from attnlab.bench import _worker as worker

    config = QUICK if quick else FULL
    specs = _specs(config)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "attnlab"])
    records: list[dict[str, Any]] = []
    bar = tqdm(specs, disable=not progress, unit="config", file=sys.stderr)
    for spec in bar:
        label = f"{spec['kind']} {spec.get('method', '')} {spec.get('T', '')}".strip()
        bar.set_description(label)
        if _needed_mib(spec) > 0.8 * _available_mib():
            records.append({**spec, "skipped": "not enough free memory"})
            continue
        with ctx.Pool(1, maxtasksperchild=1) as pool:
            records.append(pool.apply(worker, (spec,)))

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


# ------------------------------------------------------- forward + backward, issue 13

BACKWARD_RESULTS_PATH = DEFAULT_RESULTS_PATH.with_name("backward-results.json")
"""Where the forward+backward results live: ``docs/efficient/backward-results.json``."""


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
    import multiprocessing

    from attnlab.bench import _backward_worker as worker  # pickled by reference

    sizes = (128, 256) if quick else (1024, 2048, 4096, 8192)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "attnlab"])
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
            with ctx.Pool(1, maxtasksperchild=1) as pool:
                records.append(pool.apply(worker, (spec,)))
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


RING_RESULTS_PATH = DEFAULT_RESULTS_PATH.with_name("ring-results.json")
"""Where the ring attention memory results live: ``docs/efficient/ring-results.json``."""


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


def main(argv: list[str] | None = None) -> None:
    """Command line: ``python -m attnlab.bench [--quick] [--output PATH]``."""
    parser = argparse.ArgumentParser(prog="python -m attnlab.bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke test")
    parser.add_argument(
        "--output",
        "--out",
        dest="out",
        type=Path,
        default=Path("benchmark-results.json"),
        help="where to write the JSON (default: ./benchmark-results.json)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument(
        "--backward",
        action="store_true",
        help=f"forward+backward memory and time instead, written to {BACKWARD_RESULTS_PATH.name}",
    )
    parser.add_argument(
        "--ring", action="store_true", help=f"ring attention memory, to {RING_RESULTS_PATH.name}"
    )
    args = parser.parse_args(argv)
    if args.ring:
        RING_RESULTS_PATH.write_text(json.dumps(run_ring_memory(), indent=1) + "\n")
        print(f"wrote {RING_RESULTS_PATH}")
        return
    if args.backward:
        out = BACKWARD_RESULTS_PATH if args.out == DEFAULT_RESULTS_PATH else args.out
        out.write_text(json.dumps(run_backward_benchmark(args.quick), indent=1) + "\n")
        print(f"wrote {out}")
        return
    results = run_benchmark(quick=args.quick, progress=not args.no_progress)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
