"""Quantised KV caches on SmolLM2 (``cache_formats``): the loss with keys or values in 8 and 4 bits.

Not a timing: the mean next-token loss of SmolLM2-135M-Instruct on the package's long
text ([`long_text`][attnlab.llama.experiments.long_text], its first 1,024 tokens, scored
on tokens 256..1023 as the StreamingLLM run is) when every layer's cache stores its keys,
its values or both in one of GGUF's formats
([`cache_format_loss`][attnlab.llama.quantized_cache.cache_format_loss]), with the
cache's bytes per token; and, per layer, what the 4-bit format does to the attention
weights and output when it quantises only the keys or only the values
([`attention_errors`][attnlab.llama.quantized_cache.attention_errors]). Recorded because
the full run takes minutes on a CPU; the chapter re-runs a short version.
"""

from __future__ import annotations

from typing import Any

import torch

from .measure import fresh_process_context, in_fresh_process, machine_info

__all__ = ["CACHE_FORMATS_FULL", "CACHE_FORMATS_QUICK", "cache_formats_worker", "run_cache_formats"]

_PAIRS = [  # (keys format, values format); None: float32 as computed
    (None, None),
    ("f16", "f16"),
    ("q8_0", None),
    (None, "q8_0"),
    ("q8_0", "q8_0"),
    ("q4_1", None),
    (None, "q4_1"),
    ("q4_1", "q4_1"),
    ("q4_0", None),
    (None, "q4_0"),
    ("q4_0", "q4_0"),
    ("q8_0", "q4_0"),
]
CACHE_FORMATS_FULL: dict[str, Any] = {"T": 1024, "start": 256, "errors_T": 256, "pairs": _PAIRS}
CACHE_FORMATS_QUICK: dict[str, Any] = {
    "T": 48,
    "start": 16,
    "errors_T": 16,
    "pairs": [(None, None), ("q4_0", None), (None, "q4_0")],
}


def cache_formats_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Every pair's loss and bytes per token, then the per-layer errors; in this process."""
    from ..llama import load_smollm2
    from ..llama.experiments import long_text
    from ..llama.quantized_cache import attention_errors, cache_format_loss, quantized_caches

    torch.set_num_threads(1)
    model, tokenizer = load_smollm2()
    ids = torch.tensor(tokenizer.encode(long_text())[: spec["T"]])  # (T,)
    rows = []
    for keys_format, values_format in spec["pairs"]:
        caches = quantized_caches(len(model.layers), keys_format, values_format)
        with torch.no_grad():
            model(ids[:1], cache=caches)  # one token: the bytes one position takes
        rows.append(
            {
                "keys": keys_format,
                "values": values_format,
                "mean_loss": cache_format_loss(
                    model, ids, keys_format, values_format, spec["start"]
                ),
                "bytes_per_token": sum(cache.nbytes for cache in caches),
            }
        )
    errors = {
        fmt: attention_errors(model, ids[: spec["errors_T"]], fmt) for fmt in ("q8_0", "q4_0")
    }
    return {"rows": rows, "layer_errors": errors}


def run_cache_formats(quick: bool = False) -> dict[str, Any]:
    """Loss over tokens 256..1023 of the long text for each pair of cache formats.

    In a fresh process on one thread (``quick``: 48 tokens, three pairs). A format of
    ``None`` stores float32 numbers as the model computes them; ``layer_errors`` holds,
    for ``q8_0`` and ``q4_0``, one dict per layer from
    [`attention_errors`][attnlab.llama.quantized_cache.attention_errors] on the first
    ``errors_T`` tokens.
    """
    spec = CACHE_FORMATS_QUICK if quick else CACHE_FORMATS_FULL
    measured = in_fresh_process(fresh_process_context(), cache_formats_worker, spec)
    return {
        "machine": machine_info(),
        "quick": quick,
        "model": "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to float32), B = 1",
        "text": "attnlab.llama.experiments.long_text(), first T tokens",
        "config": {key: spec[key] for key in ("T", "start", "errors_T")},
        **measured,
    }
