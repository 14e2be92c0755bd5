"""Grouped-query attention's benefit (``gqa``): one decoding step at a long cache.

SmolLM2-135M's attention shape, 9 query heads of width 64 on a model width of 576,
with 9 key/value heads (multi-head attention) and with 3 (SmolLM2's grouped-query
attention): the CPU time of one new token's step through a
[`GroupedQueryAttention`][attnlab.GroupedQueryAttention] layer whose
[`KVCache`][attnlab.KVCache] already holds ``S`` positions, and the cache's bytes.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from .measure import cpu_time_header, fresh_process_context, in_fresh_process, measure

__all__ = ["GQA_FULL", "GQA_QUICK", "run_gqa_benchmark"]

GQA_FULL: dict[str, Any] = {
    "d_model": 576,
    "num_heads": 9,
    "num_kv_heads": [9, 3],
    "S": [1024, 4096, 16384],
    "repeats": 25,
    "time_budget_s": 2.0,
}
GQA_QUICK: dict[str, Any] = {
    "d_model": 64,
    "num_heads": 4,
    "num_kv_heads": [4, 2],
    "S": [32, 64],
    "repeats": 3,
    "time_budget_s": 0.2,
}


def _gqa_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Time one decoding step after ``S`` cached positions; in a fresh child.

    The cache is filled with random keys and values (a step's cost does not depend on
    their values). Each timed call appends its token, so the cache grows by one per
    call, a negligible change at these lengths.
    """
    import attnlab

    torch.set_num_threads(1)
    torch.manual_seed(0)
    d, H, Hkv, S = spec["d_model"], spec["num_heads"], spec["num_kv_heads"], spec["S"]
    D = d // H
    layer = attnlab.GroupedQueryAttention(d, H, Hkv).eval()
    cache = attnlab.KVCache()
    cache.append(torch.randn(1, Hkv, S, D), torch.randn(1, Hkv, S, D))  # (B, Hkv, S, D)
    cache_bytes = cache.nbytes
    x = torch.randn(1, 1, d)  # (B, 1, d_model): the new token
    with torch.no_grad():
        timing = measure(
            lambda: layer(x, cache=cache).output,
            spec["repeats"],
            spec["budget_s"],
            clock=time.process_time,
        )
    return {
        "num_kv_heads": Hkv,
        "S": S,
        "step_ms": timing["median_ms"],
        "repeats": timing["repeats"],
        "cache_bytes": cache_bytes,
    }


def run_gqa_benchmark(quick: bool = False) -> dict[str, Any]:
    """One decoding step with 9 against 3 key/value heads, at long caches.

    A ``GroupedQueryAttention(576, 9, num_kv_heads)`` layer (SmolLM2-135M's attention;
    ``quick``: tiny sizes) decodes one token after ``S = 1024, 4096, 16384`` cached
    positions, batch 1, float32, each configuration in a fresh process: the median CPU
    time of a step (one thread; projections, rotation, the append to the cache and
    attention over all ``S + 1`` keys) and the bytes of the layer's cache.
    """
    config = GQA_QUICK if quick else GQA_FULL
    ctx = fresh_process_context()
    header = cpu_time_header(quick)
    rows = []
    for S in config["S"]:
        for kv_heads in config["num_kv_heads"]:
            spec = {
                "d_model": config["d_model"],
                "num_heads": config["num_heads"],
                "num_kv_heads": kv_heads,
                "S": S,
                "repeats": config["repeats"],
                "budget_s": config["time_budget_s"],
            }
            rows.append(in_fresh_process(ctx, _gqa_worker, spec))
    return {
        **header,
        "config": {
            "d_model": config["d_model"],
            "num_heads": config["num_heads"],
            "head_dim": config["d_model"] // config["num_heads"],
            "B": 1,
            "dtype": "float32",
        },
        "rows": rows,
    }
