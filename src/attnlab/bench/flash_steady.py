"""Flash against SDPA, timed in turn in one process, quiet and beside a busy neighbour (``flash``).

Absolute times on a shared machine drift with whatever else runs; the ratio of two
methods timed in turn, in one process, on the same inputs, drifts far less. This run
times [`flash_attention`][attnlab.flash_attention] and PyTorch's
``F.scaled_dot_product_attention`` alternately (the order swaps at every repeat), on 2
threads, and records the median of the per-repeat ratios, under two conditions:

* ``quiet``: nothing started by the benchmark runs beside it;
* ``busy_neighbour``: a process of the benchmark's own, pinned to CPU 0 with
  ``os.sched_setaffinity``, multiplies matrices on one thread the whole time (it is
  stopped when the condition ends, and stops itself after a deadline in any case).
  A kernel split into many small parallel regions waits, at each region's end, for
  the thread that shares its core with the neighbour; one large region waits once.

The cases, at ``T = 4096`` with 12 query heads of 64 (batch 1, float32): multi-head,
causal and not, and grouped-query attention with 4 key/value heads
(``enable_gqa=True``, 3 query heads per key/value head), causal and not. The load
average is recorded before each condition: on a shared machine, read it with the
ratios.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from .measure import fresh_process_context, in_fresh_process, machine_info

__all__ = ["CONDITIONS", "busy_neighbour", "run_flash_benchmark", "run_flash_taught_benchmark"]

CONDITIONS = ("quiet", "busy_neighbour")
"""The conditions of the run, in the order it measures them."""

GOALS = {"quiet": 1.25, "busy_neighbour": 2.0}
"""The largest flash/SDPA time ratio each condition aims for."""

FULL: dict[str, Any] = {"T": 4096, "heads": 12, "kv_heads": 4, "head_dim": 64, "repeats": 5}
QUICK: dict[str, Any] = {"T": 64, "heads": 12, "kv_heads": 4, "head_dim": 16, "repeats": 2}

THREADS = 2
"""Torch threads of the measuring process (the recorded machine has 2 cores)."""

NEIGHBOUR_CPU = 0
"""The CPU the busy neighbour is pinned to."""

_NEIGHBOUR = """
import os, sys, time
cpu, seconds = int(sys.argv[1]), float(sys.argv[2])
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {cpu})
import torch
torch.set_num_threads(1)
a = torch.randn(256, 256)
print("ready", flush=True)
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    a @ a
"""


@contextmanager
def busy_neighbour(
    cpu: int = NEIGHBOUR_CPU, seconds: float = 900.0
) -> Iterator[subprocess.Popen[str]]:
    """Run a process that keeps CPU ``cpu`` busy with matmuls while the block runs.

    The process pins itself to ``cpu`` (where ``os.sched_setaffinity`` exists), works
    on one thread, and is stopped when the block ends; it stops itself after
    ``seconds`` in any case, so it cannot outlive a benchmark that was killed. The
    block receives the process, already pinned and working.
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", _NEIGHBOUR, str(cpu), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        if proc.stdout is not None:
            proc.stdout.readline()  # "ready": torch imported, pinned, about to loop
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _cases(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Multi-head and grouped-query attention, causal and not."""
    return [
        {"name": name, "kv_heads": kv_heads, "causal": causal}
        for name, kv_heads in (("multi-head", config["heads"]), ("grouped", config["kv_heads"]))
        for causal in (False, True)
    ]


def _time_in_turn(
    runs: tuple[Callable[[], torch.Tensor], Callable[[], torch.Tensor]], repeats: int
) -> tuple[list[float], list[float]]:
    """Seconds of each run, called in turn ``repeats`` times (order swapped every time)."""
    for run in runs:
        run()  # warm-up
    seconds: tuple[list[float], list[float]] = ([], [])
    for repeat in range(repeats):
        order = (0, 1) if repeat % 2 == 0 else (1, 0)
        for index in order:
            start = time.perf_counter()
            runs[index]()
            seconds[index].append(time.perf_counter() - start)
    return seconds


def _time_case(case: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Flash and SDPA on one case: median times and the median of the paired ratios."""
    import torch.nn.functional as F

    from attnlab import flash_attention

    T, H, D = config["T"], config["heads"], config["head_dim"]
    causal, gqa = case["causal"], case["kv_heads"] != H
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, H, T, D, generator=gen)  # (B, H, T, D)
    k, v = (torch.randn(1, case["kv_heads"], T, D, generator=gen) for _ in range(2))
    with torch.no_grad():
        flash_s, sdpa_s = _time_in_turn(
            (
                lambda: flash_attention(q, k, v, is_causal=causal, enable_gqa=gqa).output,
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa),
            ),
            config["repeats"],
        )
    ratios = [f / s for f, s in zip(flash_s, sdpa_s, strict=True)]
    return {
        **case,
        "flash_ms": statistics.median(flash_s) * 1e3,
        "sdpa_ms": statistics.median(sdpa_s) * 1e3,
        "flash_over_sdpa": statistics.median(ratios),
    }


def _worker(config: dict[str, Any]) -> dict[str, Any]:
    """Every condition and case; called in a fresh child process."""
    torch.set_num_threads(THREADS)
    conditions: dict[str, Any] = {}
    for condition in CONDITIONS:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        beside = busy_neighbour() if condition == "busy_neighbour" else nullcontext()
        with beside:
            cases = [_time_case(case, config) for case in _cases(config)]
        conditions[condition] = {"load_average_1min": round(load, 2), "cases": cases}
    return conditions


def _time_taught_case(case: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The fast path, the loop as taught and SDPA on one case, timed in turn."""
    import torch.nn.functional as F

    from attnlab import flash_attention
    from attnlab.flash import flash_attention_taught

    T, H, D = config["T"], config["heads"], config["head_dim"]
    causal, gqa = case["causal"], case["kv_heads"] != H
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, H, T, D, generator=gen)  # (B, H, T, D)
    k, v = (torch.randn(1, case["kv_heads"], T, D, generator=gen) for _ in range(2))
    runs: tuple[Callable[[], torch.Tensor], ...] = (
        lambda: flash_attention(q, k, v, is_causal=causal, enable_gqa=gqa).output,
        lambda: flash_attention_taught(q, k, v, is_causal=causal, enable_gqa=gqa),
        lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa),
    )
    with torch.no_grad():
        for run in runs:
            run()  # warm-up
        seconds: list[list[float]] = [[], [], []]
        for repeat in range(config["repeats"]):
            order = [0, 1, 2] if repeat % 2 == 0 else [2, 1, 0]
            for index in order:
                start = time.perf_counter()
                runs[index]()
                seconds[index].append(time.perf_counter() - start)
    fast_s, taught_s, sdpa_s = seconds
    return {
        **case,
        "fast_ms": statistics.median(fast_s) * 1e3,
        "taught_ms": statistics.median(taught_s) * 1e3,
        "sdpa_ms": statistics.median(sdpa_s) * 1e3,
        "fast_over_sdpa": statistics.median(f / s for f, s in zip(fast_s, sdpa_s, strict=True)),
        "taught_over_sdpa": statistics.median(t / s for t, s in zip(taught_s, sdpa_s, strict=True)),
    }


def _taught_worker(config: dict[str, Any]) -> dict[str, Any]:
    """Every case, quiet; called in a fresh child process."""
    torch.set_num_threads(THREADS)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cases = [_time_taught_case(case, config) for case in _cases(config)]
    after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return {
        "load_average_1min": round(load, 2),
        "load_average_after": round(after, 2),
        "cases": cases,
    }


def run_flash_taught_benchmark(quick: bool = False) -> dict[str, Any]:
    """The fast path and the loop as taught, each against SDPA, timed in turn.

    ``flash_attention`` without a mask, dropout or gradients takes its fixed-reference
    fast path; ``attnlab.flash.flash_attention_taught`` runs
    the online softmax of the chapter on the same tiles. Same cases, threads and
    inputs as the ``flash`` run, no neighbour; the load average is recorded before and
    after. The order of the three calls reverses at every repeat.
    """
    config = QUICK if quick else FULL
    machine = {**machine_info(), "torch_threads": THREADS}
    measured = in_fresh_process(fresh_process_context(), _taught_worker, config)
    return {
        "note": "fast path, taught loop and SDPA timed in turn in one process "
        "(wall-clock, medians of the per-repeat ratios); a shared machine",
        "machine": machine,
        "quick": quick,
        "config": {**config, "B": 1, "dtype": "float32"},
        **measured,
    }


def run_flash_benchmark(quick: bool = False) -> dict[str, Any]:
    """Flash against SDPA, quiet and beside a busy neighbour, in a fresh process.

    Args:
        quick: Tiny sizes and two repeats, to check that everything works.

    Returns:
        The results written as ``flash.json``: the machine, the configuration, the
        goals, and per condition the load average before it and, per case, the
        median times of both methods and ``flash_over_sdpa``, the median of the
        per-repeat ratios.
    """
    config = QUICK if quick else FULL
    machine = {**machine_info(), "torch_threads": THREADS}
    conditions = in_fresh_process(fresh_process_context(), _worker, config)
    return {
        "note": "flash and SDPA timed in turn in one process (wall-clock, median of "
        "the per-repeat ratios); the busy neighbour is a one-thread matmul loop "
        f"pinned to CPU {NEIGHBOUR_CPU}",
        "machine": machine,
        "quick": quick,
        "config": {**config, "B": 1, "dtype": "float32"},
        "goals": GOALS,
        "conditions": conditions,
    }
