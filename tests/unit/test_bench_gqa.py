"""The ``gqa`` benchmark suite (one decoding step, 9 against 3 key/value heads) and its record.

No timing is asserted: the suite's plumbing runs at tiny sizes, and the recorded run's
cache sizes are checked against ``2 * Hkv * S * D`` float32 numbers, counted here.
"""

from __future__ import annotations

from typing import Any

from attnlab.bench import SUITES, load_results
from attnlab.bench.__main__ import parse_args
from attnlab.bench.gqa import GQA_QUICK, _gqa_worker


def _check(results: dict[str, Any], kv_heads: list[int], lengths: list[int]) -> None:
    config = results["config"]
    D = config["d_model"] // config["num_heads"]
    assert config["head_dim"] == D
    seen = {(r["S"], r["num_kv_heads"]) for r in results["rows"]}
    assert seen == {(S, h) for S in lengths for h in kv_heads}
    for row in results["rows"]:
        assert row["cache_bytes"] == 2 * row["num_kv_heads"] * row["S"] * D * 4  # K and V, float32
        assert row["step_ms"] > 0 and row["repeats"] >= 1


def test_the_suite_is_on_the_command_line() -> None:
    """``python -m attnlab.bench --gqa`` chooses the suite."""
    assert parse_args(["--gqa"])[0] == ["gqa"]
    assert "key/value heads" in SUITES["gqa"].help


def test_the_worker_times_one_step_at_tiny_sizes() -> None:
    """One configuration, in this process: a step after S cached positions, the cache's bytes."""
    spec = {
        "d_model": GQA_QUICK["d_model"],
        "num_heads": GQA_QUICK["num_heads"],
        "num_kv_heads": 2,
        "S": 32,
        "repeats": 2,
        "budget_s": 0.1,
    }
    row = _gqa_worker(spec)
    D = GQA_QUICK["d_model"] // GQA_QUICK["num_heads"]
    assert row["cache_bytes"] == 2 * 2 * 32 * D * 4
    assert row["step_ms"] > 0


def test_the_recorded_run_is_a_full_run() -> None:
    """attnlab/results/gqa.json: SmolLM2's shape, 9 and 3 key/value heads, three lengths."""
    results = load_results("gqa")
    assert results["quick"] is False
    assert results["config"]["d_model"] == 576 and results["config"]["num_heads"] == 9
    _check(results, [9, 3], [1024, 4096, 16384])
