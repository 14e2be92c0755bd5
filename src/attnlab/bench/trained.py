"""What trained attention does (``trained``): copying scores and sinks, on SmolLM2.

Not a timing. Two experiments of the chapter *What trained attention does* that take
minutes on a CPU, recorded so the page can show them and re-run a slice:

* every head's OV-circuit copying scores
  ([`ov_copying_scores`][attnlab.llama.experiments.ov_copying_scores]): the eigenvalue
  score of Elhage et al. (2021) and ARENA's top-1 fraction on 1,000 sampled tokens;
* StreamingLLM's sink tests on the package's long text (first 1,024 tokens, loss on
  tokens 256..1023, window 128): the first tokens replaced by line breaks (Xiao et al.
  2023, section 3.1: does what the sinks *say* matter?), and positions renumbered inside
  the cache as StreamingLLM does
  ([`renumbered_streaming_logits`][attnlab.llama.experiments.renumbered_streaming_logits]).
"""

from __future__ import annotations

from typing import Any

import torch

from .measure import fresh_process_context, in_fresh_process, machine_info

__all__ = ["TRAINED_FULL", "TRAINED_QUICK", "run_trained_experiment", "trained_worker"]

TRAINED_FULL: dict[str, Any] = {
    "sample": 1000,
    "T": 1024,
    "start": 256,
    "window": 128,
    "sinks": [1, 4],
}
TRAINED_QUICK: dict[str, Any] = {"sample": 20, "T": 64, "start": 32, "window": 16, "sinks": [1]}


def trained_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """The copying scores and the sink rows; in this process."""
    from ..llama import load_smollm2
    from ..llama.experiments import (
        long_text,
        masked_logits,
        mean_loss,
        ov_copying_scores,
        renumbered_streaming_logits,
        streaming_mask,
    )

    torch.set_num_threads(1)
    model, tokenizer = load_smollm2()
    scores = ov_copying_scores(model, sample=spec["sample"], seed=0)
    T, start, window = spec["T"], spec["start"], spec["window"]
    ids = torch.tensor(tokenizer.encode(long_text())[:T])  # (T,)
    newline = tokenizer.encode("\n")
    if len(newline) != 1:
        raise RuntimeError(f"'\\n' should be one token; got {newline}")
    rows = []
    for sinks in [0, *spec["sinks"]]:
        replaced = ids.clone()
        replaced[:sinks] = newline[0]  # the sinks say "\n", the rest is the text
        variants = [("original", ids, False), ("newline", replaced, False)]
        variants += [("original", ids, True)]
        for first, tokens, renumbered in variants:
            if sinks == 0 and (first == "newline" or renumbered):
                continue
            if renumbered:
                logits = renumbered_streaming_logits(model, tokens, window, sinks)
            else:
                logits = masked_logits(model, tokens, streaming_mask(T, window, sinks))
            rows.append(
                {
                    "window": window,
                    "sinks": sinks,
                    "first_tokens": first,
                    "positions": "renumbered" if renumbered else "original",
                    "mean_loss": mean_loss(logits, tokens, start),
                }
            )
    full = masked_logits(model, ids, streaming_mask(T, T, 0))
    rows.insert(
        0,
        {
            "window": None,
            "sinks": 0,
            "first_tokens": "original",
            "positions": "original",
            "mean_loss": mean_loss(full, ids, start),
        },
    )
    return {
        "copying": {
            "eigenvalue": scores["eigenvalue"].tolist(),
            "top1": scores["top1"].tolist(),
        },
        "sinks": rows,
        "newline_id": newline[0],
    }


def run_trained_experiment(quick: bool = False) -> dict[str, Any]:
    """Copying scores of all 270 heads and the sink rows, in a fresh process on one thread."""
    spec = TRAINED_QUICK if quick else TRAINED_FULL
    measured = in_fresh_process(fresh_process_context(), trained_worker, spec)
    return {
        "machine": machine_info(),
        "quick": quick,
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to float32), B = 1",
        "config": dict(spec),
        **measured,
    }
