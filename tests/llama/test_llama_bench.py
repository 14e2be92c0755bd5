"""The ``llm`` benchmark suite's plumbing (no timing is asserted) and its recorded run."""

from __future__ import annotations

from typing import Any

import pytest

from attnlab.bench import SUITES, load_results
from attnlab.bench.__main__ import parse_args
from attnlab.bench.llm import LLM_QUICK, llm_worker

pytestmark = pytest.mark.xdist_group("smollm2")


def _check(results: dict[str, Any], reference: bool) -> None:
    """The fields the pages read, well formed."""
    assert set(results["load"]) == {"import_cpu_s", "load_cpu_s", "wall_s"}
    names = ["attnlab", "transformers"] if reference else ["attnlab"]
    assert list(results["models"]) == names
    for name in names:
        speeds = results["models"][name]
        assert speeds["prefill_tokens_per_s"] > 0 and speeds["decode_tokens_per_s"] > 0
    if reference:
        assert results["logits_max_abs_diff"] < 1e-3
    cached = results["cache_vs_recompute"]
    assert cached["same_tokens"] is True
    assert cached["speedup"] == pytest.approx(cached["recompute_s"] / cached["cached_s"])


def test_the_suite_is_on_the_command_line() -> None:
    """``python -m attnlab.bench --llm`` chooses the suite."""
    assert parse_args(["--llm"])[0] == ["llm"]
    assert "SmolLM2" in SUITES["llm"].help


def test_the_worker_measures_every_field_at_tiny_sizes() -> None:
    """The worker (in this process, without transformers) fills every field."""
    pytest.importorskip("gguf", reason="the llm extra is not installed")
    results = llm_worker({**LLM_QUICK, "reference": False})
    _check(results, reference=False)
    assert results["prefill_T"] == LLM_QUICK["prefill_T"]


def test_the_recorded_run_is_a_full_run() -> None:
    """attnlab/results/llm.json: both models, 256 new tokens, the cache well ahead."""
    results = load_results("llm")
    assert results["quick"] is False
    _check(results, reference=True)
    assert results["cache_vs_recompute"]["new_tokens"] == 256
    assert results["cache_vs_recompute"]["speedup"] > 1
