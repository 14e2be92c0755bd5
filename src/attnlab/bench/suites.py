"""The table of benchmark suites: one entry per run, the command line's flag included.

Each suite is one entry of [`SUITES`][attnlab.bench.SUITES]: its name (the flag
``--<name>`` of ``python -m attnlab.bench``, and the recorded file
``attnlab/results/<name>.json``), the function that runs it and the flag's help. A new
suite is one module beside these and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .backward import run_backward_benchmark
from .cache_formats import run_cache_formats
from .decode import run_decode_benchmark
from .flash_steady import run_flash_benchmark, run_flash_taught_benchmark
from .forward import run_benchmark
from .gate_sink import run_gate_sink_experiment
from .gqa import run_gqa_benchmark
from .hybrid_recall import run_hybrid_recall
from .llm import run_llm_benchmark
from .passkey import run_passkey_experiment
from .ring_memory import run_ring_memory
from .streaming import run_streaming_experiment
from .trained import run_trained_experiment
from .window import run_window_benchmark

__all__ = ["SUITES", "Suite"]


@dataclass(frozen=True)
class Suite:
    """One benchmark run that the command line can choose.

    Attributes:
        run: ``run(quick, progress)`` returns the results that are written as JSON;
            ``quick`` asks for tiny sizes (a smoke test), ``progress`` for a progress
            bar where the suite has one.
        help: What the run measures, for ``--help``.
    """

    run: Callable[[bool, bool], dict[str, Any]]
    help: str


def _quick_only(run: Callable[[bool], dict[str, Any]]) -> Callable[[bool, bool], dict[str, Any]]:
    """A suite that reports no progress: ``run(quick)``."""
    return lambda quick, progress: run(quick)


def _ring(quick: bool, progress: bool) -> dict[str, Any]:
    """The ring suite: small ``T`` and two world sizes when ``quick``."""
    return run_ring_memory(T=256, world_sizes=(1, 2)) if quick else run_ring_memory()


SUITES: dict[str, Suite] = {
    "forward": Suite(run_benchmark, "the forward sweep of every attention path"),
    "flash": Suite(
        _quick_only(run_flash_benchmark),
        "flash against SDPA timed in turn, quiet and beside a busy neighbour process",
    ),
    "flash_taught": Suite(
        _quick_only(run_flash_taught_benchmark),
        "flash's fast path and its loop as taught, each against SDPA, timed in turn",
    ),
    "backward": Suite(
        _quick_only(run_backward_benchmark),
        "forward+backward memory and backward time",
    ),
    "ring": Suite(_ring, "ring attention's memory per rank"),
    "decode": Suite(
        _quick_only(run_decode_benchmark),
        "KV-cached decoding against recomputing the prefix",
    ),
    "gqa": Suite(
        _quick_only(run_gqa_benchmark),
        "one decoding step at a long cache, 9 against 3 key/value heads",
    ),
    "window": Suite(
        _quick_only(run_window_benchmark),
        "sliding-window flash attention against causal flash attention",
    ),
    "llm": Suite(
        _quick_only(run_llm_benchmark),
        "SmolLM2-135M on attnlab against transformers; cached against recomputed decoding",
    ),
    "streaming": Suite(
        _quick_only(run_streaming_experiment),
        "SmolLM2-135M's loss with a sliding window, with and without attention sinks",
    ),
    "passkey": Suite(
        _quick_only(run_passkey_experiment),
        "SmolLM2-135M past its trained length: a pass key retrieved or not, with each rope scaling",
    ),
    "cache_formats": Suite(
        _quick_only(run_cache_formats),
        "SmolLM2-135M's loss with its KV cache's keys and/or values in 8 and 4 bits",
    ),
    "trained": Suite(
        _quick_only(run_trained_experiment),
        "SmolLM2-135M: every head's OV copying score; sinks replaced by newlines, renumbered",
    ),
    "gate_sink": Suite(
        _quick_only(run_gate_sink_experiment),
        "two tiny recall models, with and without an output gate: the first token's weight",
    ),
    "hybrid_recall": Suite(
        _quick_only(run_hybrid_recall),
        "associative recall against the number of pairs: softmax, Gated DeltaNet, 3:1 hybrid",
    ),
}
"""Every suite, by name, in the order ``--all`` runs them; ``forward`` is the default."""
