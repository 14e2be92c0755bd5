"""Decoding with a KV cache (``decode``) against recomputing the prefix at every step."""

from __future__ import annotations

import time
from typing import Any

import torch

from ..kv_cache import kv_cache_bytes_per_token
from .measure import cpu_time_header, fresh_process_context, in_fresh_process

__all__ = ["DECODE_FULL", "DECODE_QUICK", "LLAMA3_8B", "kv_cache_sizes", "run_decode_benchmark"]

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


def kv_cache_sizes(dtype: torch.dtype = torch.bfloat16) -> dict[str, dict[str, int]]:
    """The KV cache's bytes per token at Llama 3 8B's shape, for MHA, GQA and MQA.

    Computed with [`kv_cache_bytes_per_token`][attnlab.kv_cache_bytes_per_token], not
    measured: 32 layers, 32 query heads of 128, and 32, 8 or 1 key/value heads.
    """
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
            rows.append(layer(x[:, t : t + 1], cache=cache).output)  # (1, 1, d_model)
            elapsed += clock() - start
            cached_total[t + 1] = elapsed

        recompute_step, max_diff = {}, 0.0  # sampled prefix length -> CPU seconds
        for length in range(stride // 2, n + 1, stride):
            start = clock()
            last = layer(x[:, :length]).output[:, -1:]  # (1, 1, d_model): the newest row
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
    config = DECODE_QUICK if quick else DECODE_FULL
    header = cpu_time_header(quick)
    measured = in_fresh_process(fresh_process_context(), _decode_worker, config)
    return {
        **header,
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
