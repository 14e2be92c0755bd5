"""Recall against the number of pairs (``hybrid_recall``): softmax, Gated DeltaNet, hybrid.

Not a timing. The experiment of the chapter *Why hybrids keep some full attention*:
[`recall_sweep`][attnlab.recall_mixers.recall_sweep] trains each stack of
[`MIXERS`][attnlab.recall_mixers.MIXERS] once, on sequences of 2 to 64 pairs, and
measures held-out accuracy at each number of pairs. Minutes on a CPU, so recorded; the
page re-runs one stack at one count.
"""

from __future__ import annotations

from typing import Any

import torch

from .measure import fresh_process_context, in_fresh_process, machine_info

__all__ = ["HYBRID_RECALL_FULL", "HYBRID_RECALL_QUICK", "hybrid_recall_worker", "run_hybrid_recall"]

HYBRID_RECALL_FULL: dict[str, Any] = {
    "num_keys": 64,
    "num_values": 16,
    "pairs": [4, 8, 16, 24, 32, 48, 64],
    "steps": 2000,
    "lr": 3e-3,
    "d_model": 32,
    "num_heads": 2,
    "seed": 0,
    "size": 1000,
}
HYBRID_RECALL_QUICK: dict[str, Any] = {
    **HYBRID_RECALL_FULL,
    "num_keys": 8,
    "pairs": [2, 4],
    "steps": 2,
    "size": 16,
}


def hybrid_recall_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """The sweep of ``spec``, in this process, on one thread."""
    from ..recall import RecallTask
    from ..recall_mixers import MixerConfig, recall_sweep

    torch.set_num_threads(1)
    task = RecallTask(spec["num_keys"], spec["num_values"], 2, 2)
    config = MixerConfig(d_model=spec["d_model"], num_heads=spec["num_heads"])
    return recall_sweep(
        task, tuple(spec["pairs"]), spec["steps"], spec["seed"], config, spec["size"], spec["lr"]
    )


def run_hybrid_recall(quick: bool = False) -> dict[str, Any]:
    """The three stacks' accuracy at each number of pairs, in a fresh process."""
    spec = HYBRID_RECALL_QUICK if quick else HYBRID_RECALL_FULL
    measured = in_fresh_process(fresh_process_context(), hybrid_recall_worker, spec)
    config = {**spec, "head_dim": spec["d_model"] // spec["num_heads"]}
    return {"machine": machine_info(), "quick": quick, "config": config, **measured}
