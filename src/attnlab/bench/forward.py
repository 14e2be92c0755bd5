"""The forward sweep (``forward``): explicit attention, ``flash_attention`` and PyTorch's kernels.

What it measures, each configuration in a fresh process (see
``measure``):

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

import os
import platform
import sys
from collections.abc import Callable
from typing import Any

import torch

from ..memory import MIB, available_mib
from .measure import (
    attention_flops,
    dispatched_sdpa_kernel,
    fresh_process_context,
    in_fresh_process,
    measure,
)

__all__ = ["FULL", "METHODS", "MODULE_METHODS", "QUICK", "run_benchmark"]

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
            timing = measure(lambda: a @ b, spec["repeats"] * 2, spec["budget_s"])
            result["gflops"] = 2.0 * n**3 / (timing["median_ms"] / 1e3) / 1e9
            return result
        if kind == "attention":
            T, H, D, causal = spec["T"], spec["heads"], spec["head_dim"], spec["causal"]
            q, k, v = (torch.randn(1, H, T, D) for _ in range(3))  # (B, H, T, D)
            runs: dict[str, Callable[[], torch.Tensor]] = {
                "explicit": lambda: attnlab.scaled_dot_product_attention(q, k, v, is_causal=causal),
                "flash": lambda: attnlab.flash_attention(q, k, v, is_causal=causal).output,
                "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
            }

            def math_only() -> torch.Tensor:
                with sdpa_kernel(SDPBackend.MATH):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            runs["sdpa_math"] = math_only
            result.update(measure(runs[spec["method"]], spec["repeats"], spec["budget_s"]))
            if spec["method"] == "sdpa":
                result["kernel"] = dispatched_sdpa_kernel(q, k, v, causal)
            result["gflops"] = attention_flops(T, H, D, causal) / result["median_ms"] / 1e6
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
                run = lambda: mha(x).output  # noqa: E731
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

            result.update(measure(run, spec["repeats"], spec["budget_s"]))
            flops = attention_flops(T, H, d // H, True, B) + 4 * 2.0 * B * T * d * d
            result["gflops"] = flops / result["median_ms"] / 1e6
            return result
        if kind == "large_run":
            T, d = spec["T"], spec["d"]
            torch.manual_seed(123)
            module = attnlab.SelfAttentionV2(d, d, backend="explicit")
            x = torch.rand(T, d)
            timing = measure(lambda: module(x), spec["repeats"], spec["budget_s"])
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
    from tqdm import tqdm  # the bench extra

    config = QUICK if quick else FULL
    specs = _specs(config)
    ctx = fresh_process_context()
    records: list[dict[str, Any]] = []
    bar = tqdm(specs, disable=not progress, unit="config", file=sys.stderr)
    for spec in bar:
        label = f"{spec['kind']} {spec.get('method', '')} {spec.get('T', '')}".strip()
        bar.set_description(label)
        if _needed_mib(spec) > 0.8 * available_mib():
            records.append({**spec, "skipped": "not enough free memory"})
            continue
        records.append(in_fresh_process(ctx, _worker, spec))

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
