"""StreamingLLM on SmolLM2 (``streaming``): a sliding window with and without sinks.

Not a timing: the mean next-token loss of SmolLM2-135M-Instruct on the package's long
text ([`long_text`][attnlab.llama.experiments.long_text], its first 1,024 tokens) when
every layer attends through a [`streaming_mask`][attnlab.llama.experiments.streaming_mask]:
a sliding window alone, the window plus the first tokens (Xiao et al. 2023's *attention
sinks*), and full causal attention. Recorded because the full run takes a minute on a
CPU; the chapter re-runs a short version in a few seconds.
"""

from __future__ import annotations

from typing import Any

import torch

from .measure import fresh_process_context, in_fresh_process, machine_info

__all__ = ["STREAMING_FULL", "STREAMING_QUICK", "run_streaming_experiment", "streaming_worker"]

STREAMING_FULL: dict[str, Any] = {
    "T": 1024,
    "start": 256,
    "bucket": 64,
    "settings": [  # (window, sinks); window None: full causal attention
        (None, 0),
        (128, 0),
        (128, 1),
        (128, 4),
        (64, 0),
        (64, 4),
        (256, 0),
        (256, 4),
    ],
}
STREAMING_QUICK: dict[str, Any] = {
    "T": 64,
    "start": 32,
    "bucket": 16,
    "settings": [(None, 0), (16, 0), (16, 4)],
}


def streaming_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Every setting's mean loss, and its loss per bucket of positions; in this process."""
    import torch.nn.functional as F

    from ..llama import load_smollm2
    from ..llama.experiments import long_text, masked_logits, mean_loss, streaming_mask

    torch.set_num_threads(1)
    model, tokenizer = load_smollm2()
    T, start, bucket = spec["T"], spec["start"], spec["bucket"]
    ids = torch.tensor(tokenizer.encode(long_text())[:T])  # (T,)
    rows = []
    for window, sinks in spec["settings"]:
        mask = streaming_mask(T, T if window is None else window, sinks)  # (T, T)
        logits = masked_logits(model, ids, mask)  # (1, T, V)
        per_token = F.cross_entropy(logits[0, :-1], ids[1:], reduction="none")  # (T-1,)
        buckets = [  # per_token[p - 1] is the loss on the token at position p
            float(per_token[max(k * bucket, 1) - 1 : (k + 1) * bucket - 1].mean())
            for k in range(T // bucket)
        ]  # the tokens at positions k * bucket .. (k + 1) * bucket - 1 (from 1)
        rows.append(
            {
                "window": window,
                "sinks": sinks,
                "mean_loss": mean_loss(logits, ids, start),
                "bucket_losses": buckets,
            }
        )
    return {"rows": rows}


def run_streaming_experiment(quick: bool = False) -> dict[str, Any]:
    """Mean loss over tokens 256..1023 of the long text, windowed with and without sinks.

    In a fresh process on one thread (``quick``: 64 tokens). ``window None`` is full
    causal attention; ``bucket_losses[k]`` is the mean loss on the tokens at positions
    ``k * bucket .. (k + 1) * bucket - 1`` (position 0 has no loss).
    """
    spec = STREAMING_QUICK if quick else STREAMING_FULL
    measured = in_fresh_process(fresh_process_context(), streaming_worker, spec)
    return {
        "machine": machine_info(),
        "quick": quick,
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to float32), B = 1",
        "text": "attnlab.llama.experiments.long_text(), first T tokens",
        "config": {key: spec[key] for key in ("T", "start", "bucket")},
        **measured,
    }
