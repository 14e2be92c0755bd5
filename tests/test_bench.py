"""The benchmark runs end to end (--quick) and writes the data file the docs read.

No timing is asserted anywhere: only that every configuration ran and recorded
well-formed numbers.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from attnlab.bench import DEFAULT_RESULTS_PATH, METHODS, MODULE_METHODS, load_results, plot_sweep


def _positive(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x) and x > 0


def _check_structure(results: dict[str, Any], ts: list[int]) -> None:
    machine = results["machine"]
    assert machine["cpu_count"] >= 1
    assert machine["sdpa_cpu_kernels"], "the SDPA kernel used must be recorded"
    assert all(name.startswith("aten::") for name in machine["sdpa_cpu_kernels"])
    assert machine["memory_method"] in ("VmHWM", "ru_maxrss")
    assert _positive(results["matmul_gflops"])
    rows = {(row["method"], row["T"], row["causal"]): row for row in results["sweep"]}
    assert set(rows) == {(m, T, c) for m in METHODS for T in ts for c in (False, True)}
    for row in rows.values():
        if "skipped" in row:
            continue
        assert _positive(row["median_ms"])
        assert row["peak_mib"] >= 0
        assert _positive(row["fraction_of_roofline"])
    assert all("kernel" in row for key, row in rows.items() if key[0] == "sdpa")
    assert [row["method"] for row in results["modules"]] == list(MODULE_METHODS)
    assert all(_positive(row["median_ms"]) for row in results["modules"])
    large = results["large_run"]
    assert set(large) >= {"T", "d_in", "d_out", "forward_s", "peak_mib", "attn_matrix_mib"}
    assert _positive(large["forward_s"])
    assert large["attn_matrix_mib"] == large["T"] ** 2 * 4 / 2**20


@pytest.mark.long
def test_quick_run_writes_well_formed_results(tmp_path: Path) -> None:
    """`python -m attnlab.bench --quick --out PATH` runs every configuration and writes JSON."""
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "attnlab.bench", "--quick", "--no-progress", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout
    results = load_results(out)
    assert results["quick"] is True
    _check_structure(results, [64, 128])
    assert json.loads(out.read_text()) == results


def test_recorded_results_are_a_full_run() -> None:
    """The committed data file the chapter reads is a full sweep, T = 256 ... 8192."""
    results = load_results()
    assert DEFAULT_RESULTS_PATH.name == "benchmark-results.json"
    assert results["quick"] is False
    _check_structure(results, [256, 512, 1024, 2048, 4096, 8192])
    assert results["large_run"]["T"] == 4096 and results["large_run"]["d_in"] == 4608


@pytest.mark.parametrize("metric", ["median_ms", "peak_mib"])
def test_plot_sweep_draws_one_line_per_method(metric: str) -> None:
    """plot_sweep gives two log-log panels (not causal, causal), one line per method."""
    import matplotlib.pyplot as plt

    fig = plot_sweep(load_results(), metric)
    try:
        axes = fig.get_axes()
        assert [ax.get_title() for ax in axes] == ["not causal", "causal"]
        for ax in axes:
            assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
            assert len(ax.get_lines()) == len(METHODS)
        assert "(ms)" in axes[0].get_ylabel() or "(MiB)" in axes[0].get_ylabel()
    finally:
        plt.close(fig)


def test_plot_sweep_rejects_an_unknown_metric() -> None:
    """Only the two recorded metrics can be plotted."""
    with pytest.raises(ValueError, match="metric must be 'median_ms' or 'peak_mib'; got 'speed'"):
        plot_sweep(load_results(), "speed")
