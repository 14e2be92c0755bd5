"""Sliding-window flash attention (``window``) against full causal flash attention."""

from __future__ import annotations

import time
from typing import Any

import torch

from .measure import cpu_time_header, fresh_process_context, in_fresh_process, measure

__all__ = ["WINDOW_BLOCK_SIZE", "WINDOW_FULL", "WINDOW_QUICK", "run_window_benchmark"]

WINDOW_BLOCK_SIZE = (256, 512)
"""The blocks of both runs: the window of 256 then skips whole key blocks from ``T = 1024``."""

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
        timing = measure(
            lambda: (
                attnlab.flash_attention(
                    q, k, v, is_causal=causal, block_size=WINDOW_BLOCK_SIZE, window=window
                ).output
            ),
            spec["repeats"],
            spec["budget_s"],
            clock=time.process_time,
        )
    blocks = attnlab.flash_visited_blocks(T, T, WINDOW_BLOCK_SIZE, causal, window)
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
    config = WINDOW_QUICK if quick else WINDOW_FULL
    ctx = fresh_process_context()
    header = cpu_time_header(quick)
    rows = []
    for T in config["T"]:
        for method in ("causal", "window"):
            spec = {
                "method": method,
                "T": T,
                **{key: config[key] for key in ("window", "heads", "head_dim", "repeats")},
                "budget_s": config["time_budget_s"],
            }
            rows.append(in_fresh_process(ctx, _window_worker, spec))
    return {
        **header,
        "config": {
            **{key: config[key] for key in ("window", "heads", "head_dim")},
            "B": 1,
            "dtype": "float32",
        },
        "rows": rows,
    }
