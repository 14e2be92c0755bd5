"""The forward+backward run (``backward``): peak extra memory and time of a training step."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from ..memory import MIB, available_mib
from .measure import fresh_process_context, in_fresh_process, measure

__all__ = ["run_backward_benchmark"]


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
        "flash": lambda: attnlab.flash_attention(q, k, v, is_causal=True).output,
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

    memory = measure(forward_backward, 1, 0.0)  # warm-up, then one measured pass
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
    sizes = (128, 256) if quick else (1024, 2048, 4096, 8192)
    ctx = fresh_process_context()
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
            if method == "explicit" and needed_mib > 0.8 * available_mib():
                records.append({**spec, "skipped": "not enough free memory"})
                continue
            records.append(in_fresh_process(ctx, _backward_worker, spec))
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
