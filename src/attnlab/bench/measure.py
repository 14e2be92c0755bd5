"""Measuring one configuration: time, peak extra memory, FLOPs, and a fresh process for it.

Every suite runs each configuration in a fresh process (forked from a server that has
imported torch and attnlab and nothing else, so no configuration sees another's
memory) and measures it with ``measure``.
"""

from __future__ import annotations

import math
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from ..memory import MIB, read_status_kib, release_free_memory, reset_peak

__all__ = [
    "CPU_CLOCK",
    "attention_flops",
    "dispatched_sdpa_kernel",
    "fresh_process_context",
    "in_fresh_process",
    "machine_info",
    "measure",
]

CPU_CLOCK = "CPU time of the measuring process (time.process_time), torch on 1 thread"
"""How the decode and window runs read time: on a shared machine, wall-clock time
would also count the time other jobs hold the cores."""


def measure(
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
    release_free_memory()

    baseline_kib = read_status_kib("VmRSS")
    method = "VmHWM"
    if not reset_peak():  # no /proc/self/clear_refs: the peak since the process started
        baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        method = "ru_maxrss"
    start = clock()
    output = run()
    times = [clock() - start]  # the measured pass is also the first timing
    if method == "VmHWM":
        peak_kib = read_status_kib("VmHWM") or 0
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


def dispatched_sdpa_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> str:
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


def attention_flops(T: int, heads: int, head_dim: int, causal: bool, batch: int = 1) -> float:
    """Useful FLOPs of attention: two matmuls of ``2 T^2 D`` per head, halved if causal."""
    flops = 4.0 * batch * heads * T * T * head_dim
    return flops / 2 if causal else flops


def fresh_process_context() -> Any:
    """A ``forkserver`` multiprocessing context, for running each configuration fresh.

    Each child forks from a server that has imported torch and attnlab and nothing
    else, so no child pays for those imports or sees another's memory.
    """
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "attnlab"])
    return ctx


def in_fresh_process(ctx: Any, worker: Callable[[Any], Any], spec: Any) -> Any:
    """``worker(spec)``, run in a fresh child of ``ctx``."""
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        return pool.apply(worker, (spec,))


def machine_info() -> dict[str, Any]:
    """The software and the machine a run was recorded on, and how busy it was."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,)
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": round(load[0], 2),
    }


def cpu_time_header(quick: bool) -> dict[str, Any]:
    """The first fields of a run timed in CPU time: what was measured, where and how.

    Read before the run starts, so the load average is the one the run met.
    """
    return {
        "note": "recorded on a shared 2-core machine, busy with other jobs: "
        "times are CPU time, not wall-clock",
        "machine": machine_info(),
        "quick": quick,
        "clock": CPU_CLOCK,
    }
