"""The benchmark runs end to end (--quick) and writes the data files the docs read.

No timing is asserted anywhere: only that every configuration ran and recorded
well-formed numbers.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from attnlab import flash_visited_blocks, kv_cache_bytes_per_token
from attnlab.bench import (
    METHODS,
    MODULE_METHODS,
    RESULT_NAMES,
    SUITES,
    kv_cache_sizes,
    load_results,
    results_file,
)
from attnlab.bench.__main__ import parse_args
from attnlab.bench.flash_steady import CONDITIONS, busy_neighbour
from attnlab.bench.window import WINDOW_BLOCK_SIZE
from attnlab.plot import plot_decode, plot_sweep, plot_window


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
        assert isinstance(row["peak_mib"], float) and math.isfinite(row["peak_mib"])
        assert _positive(row["fraction_of_roofline"])
    assert all("kernel" in row for key, row in rows.items() if key[0] == "sdpa")
    assert [row["method"] for row in results["modules"]] == list(MODULE_METHODS)
    assert all(_positive(row["median_ms"]) for row in results["modules"])
    large = results["large_run"]
    assert set(large) >= {"T", "d_in", "d_out", "forward_s", "peak_mib", "attn_matrix_mib"}
    assert _positive(large["forward_s"])
    assert large["attn_matrix_mib"] == large["T"] ** 2 * 4 / 2**20


def _bench(tmp_path: Path, *args: str) -> str:
    """Run ``python -m attnlab.bench --quick ARGS --output tmp_path``; return its stdout."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "attnlab.bench",
            "--quick",
            "--no-progress",
            *args,
            "--output",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.long
def test_quick_runs_write_well_formed_results(tmp_path: Path) -> None:
    """`python -m attnlab.bench --quick --forward --decode --window --output DIR` runs the
    forward sweep and both comparisons, and writes DIR/<run>.json for each."""
    stdout = _bench(tmp_path, "--forward", "--decode", "--window")
    names = ("forward", "decode", "window")
    assert stdout.splitlines() == [f"wrote {tmp_path / name}.json" for name in names]
    forward = load_results(tmp_path / "forward.json")
    assert forward["quick"] is True
    _check_structure(forward, [64])
    assert json.loads((tmp_path / "forward.json").read_text()) == forward
    assert load_results(str(tmp_path / "forward.json")) == forward  # a path as a string too
    decode = load_results(tmp_path / "decode.json")
    assert decode["quick"] is True
    _check_decode(decode, [16, 32])
    window = load_results(tmp_path / "window.json")
    assert window["quick"] is True
    _check_window(window, [64, 128])


def test_command_line_chooses_runs() -> None:
    """No run named: the forward sweep; --all: every run, in RESULT_NAMES' order."""
    assert parse_args([])[0] == ["forward"]
    assert parse_args(["--window", "--decode"])[0] == ["decode", "window"]
    chosen, args = parse_args(["--all", "--quick", "--output", "out"])
    assert chosen == list(RESULT_NAMES) and args.quick and args.output == Path("out")


def test_one_table_names_every_suite_its_flag_and_its_recorded_file() -> None:
    """SUITES is the one list of runs: the flags, --all and the recorded names follow it."""
    assert tuple(SUITES) == RESULT_NAMES == (
        "forward", "flash", "flash_taught", "backward", "ring", "decode", "gqa",
        "window", "llm", "streaming", "passkey", "cache_formats", "trained", "gate_sink",
        "hybrid_recall",
    )  # fmt: skip
    for name, suite in SUITES.items():
        assert parse_args([f"--{name}"])[0] == [name]
        assert callable(suite.run) and suite.help


def test_recorded_memory_shows_flash_linear_and_explicit_quadratic() -> None:
    """At T = 8192 the explicit path's peak holds the (H, T, T) scores; flash's does not."""
    rows = {(r["method"], r["T"], r["causal"]): r for r in load_results()["sweep"]}
    scores_mib = 12 * 8192**2 * 4 / 2**20  # 12 heads of (T, T) float32 scores
    for causal in (False, True):
        assert rows["explicit", 8192, causal]["peak_mib"] > scores_mib
        assert rows["flash", 8192, causal]["peak_mib"] < scores_mib / 10


def test_recorded_results_are_a_full_run() -> None:
    """The recorded forward sweep the chapters read is a full sweep, T = 256 ... 8192."""
    results = load_results()
    assert results == load_results("forward")
    assert results["quick"] is False
    _check_structure(results, [256, 512, 1024, 2048, 4096, 8192])
    assert results["large_run"]["T"] == 4096 and results["large_run"]["d_in"] == 4608


@pytest.mark.parametrize("metric", ["median_ms", "peak_mib"])
def test_plot_sweep_draws_one_line_per_method(metric: str) -> None:
    """plot_sweep gives two log-log panels (not causal, causal), one line per method."""
    import matplotlib.pyplot as plt

    figures_before = plt.get_fignums()
    fig = plot_sweep(load_results(), metric)
    assert plt.get_fignums() == figures_before  # drawn without pyplot's global state
    axes = fig.get_axes()
    assert [ax.get_title() for ax in axes] == ["not causal", "causal"]
    for ax in axes:
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        assert len(ax.get_lines()) == len(METHODS)
    assert "(ms)" in axes[0].get_ylabel() or "(MiB)" in axes[0].get_ylabel()


def test_plot_sweep_rejects_an_unknown_metric() -> None:
    """Only the two recorded metrics can be plotted."""
    with pytest.raises(ValueError, match="metric must be 'median_ms' or 'peak_mib'; got 'speed'"):
        plot_sweep(load_results(), "speed")


# ------------------------------------------- flash against SDPA, quiet and beside a neighbour

FLASH_CASES = {(name, causal) for name in ("multi-head", "grouped") for causal in (False, True)}


def _check_flash(results: dict[str, Any], T: int) -> None:
    """Both conditions, every case, well-formed times and ratios, the load noted."""
    config = results["config"]
    assert (config["T"], config["heads"], config["kv_heads"]) == (T, 12, 4)
    assert results["machine"]["torch_threads"] == 2
    assert tuple(results["conditions"]) == CONDITIONS == ("quiet", "busy_neighbour")
    assert set(results["goals"]) == set(CONDITIONS)
    for run in results["conditions"].values():
        assert math.isfinite(run["load_average_1min"])
        assert {(case["name"], case["causal"]) for case in run["cases"]} == FLASH_CASES
        for case in run["cases"]:
            assert _positive(case["flash_ms"]) and _positive(case["sdpa_ms"])
            assert _positive(case["flash_over_sdpa"])
            assert case["kv_heads"] == (12 if case["name"] == "multi-head" else 4)


@pytest.mark.long
def test_quick_flash_run_writes_both_conditions(tmp_path: Path) -> None:
    """`python -m attnlab.bench --quick --flash` times flash and SDPA quiet and beside a
    busy neighbour, multi-head and grouped, and writes DIR/flash.json."""
    assert _bench(tmp_path, "--flash").splitlines() == [f"wrote {tmp_path / 'flash.json'}"]
    results = load_results(tmp_path / "flash.json")
    assert results["quick"] is True
    _check_flash(results, 64)


def test_busy_neighbour_works_pinned_and_is_stopped() -> None:
    """The neighbour process runs pinned to CPU 0 while the block runs, and not after."""
    with busy_neighbour(seconds=60) as proc:
        assert proc.poll() is None
        if hasattr(os, "sched_getaffinity"):
            assert os.sched_getaffinity(proc.pid) == {0}
    assert proc.poll() is not None


def test_recorded_flash_run_is_the_full_one() -> None:
    """The recorded flash run the chapter reads: T = 4096, both conditions, every case."""
    results = load_results("flash")
    assert results["quick"] is False
    _check_flash(results, 4096)


# ---------------------------------------------------------------- the recorded runs


def test_every_recorded_run_ships_inside_the_package() -> None:
    """Each recorded run is attnlab/results/<name>.json, found through importlib.resources."""
    import attnlab

    package = Path(attnlab.__file__).parent
    for name in RESULT_NAMES:
        found = results_file(name)
        assert found.is_file(), name
        assert Path(str(found)) == package / "results" / f"{name}.json"
        assert load_results(name) == json.loads(found.read_text(encoding="utf-8"))
    assert sorted(p.stem for p in (package / "results").glob("*.json")) == sorted(RESULT_NAMES)


def test_load_results_names_what_it_accepts() -> None:
    """An unknown name (or a missing file) is refused, naming the recorded runs."""
    known = "forward, flash, flash_taught, backward, ring"  # the first few
    with pytest.raises(ValueError, match=f"source must be one of {known}"):
        load_results("decoding")
    with pytest.raises(ValueError, match=f"name must be one of {known}"):
        results_file("benchmark-results")


# ---------------------------------------------- decoding with a cache, sliding windows

DECODE_FIELDS = {"T", "cached_s", "recompute_s", "speedup"}


def _check_decode(results: dict[str, Any], ts: list[int]) -> None:
    """Every field the kv-cache chapter and the figure read, well formed."""
    assert "shared" in results["note"] and "CPU time" in results["clock"]
    config = results["config"]
    assert config["head_dim"] * config["num_heads"] == config["d_model"]
    assert config["recompute_sampled_every"] >= 1
    assert [row["T"] for row in results["steps"]] == ts
    for row in results["steps"]:
        assert set(row) == DECODE_FIELDS
        assert _positive(row["cached_s"]) and _positive(row["recompute_s"])
        assert row["speedup"] == pytest.approx(row["recompute_s"] / row["cached_s"], rel=1e-12)
    totals = [row["cached_s"] for row in results["steps"]]
    assert totals == sorted(totals)  # the totals of one run's first T steps
    # as data: the run recorded that its two decoders agreed (float32, one layer); the
    # live comparison is test_the_decode_benchmarks_two_decoders_agree_live
    assert results["max_abs_diff"] < 1e-4
    head_dim, kv_heads, T = config["head_dim"], config["num_kv_heads"], ts[-1]
    assert results["cache_bytes"] == 2 * kv_heads * T * head_dim * 4  # keys, values, float32
    assert results["kv_cache_bytes_per_token"] == kv_cache_sizes()


def _check_window(results: dict[str, Any], ts: list[int]) -> None:
    """Every field the sliding-window chapter and the figure read, well formed."""
    assert "shared" in results["note"] and "CPU time" in results["clock"]
    assert {"window", "heads", "head_dim"} <= set(results["config"])
    rows = {(row["method"], row["T"]): row for row in results["rows"]}
    assert set(rows) == {(m, T) for m in ("causal", "window") for T in ts}
    for row in rows.values():
        assert _positive(row["median_ms"]) and math.isfinite(row["peak_mib"])
        assert row["blocks"] >= 1
        assert row["memory_method"] in ("VmHWM", "ru_maxrss")


def test_the_decode_benchmarks_two_decoders_agree_live() -> None:
    """The comparison behind the recorded max_abs_diff, run now: the worker's cached rows
    equal a fresh full forward's rows of the same layer (rebuilt here from its seed)."""
    import attnlab
    from attnlab.bench.decode import _decode_worker

    spec = {"d_model": 32, "num_heads": 4, "num_kv_heads": 2, "T": [6, 12], "stride": 4}
    threads = torch.get_num_threads()
    try:
        results = _decode_worker(spec)
    finally:
        torch.set_num_threads(threads)
    assert results["max_abs_diff"] < 1e-5
    torch.manual_seed(0)  # the worker's layer and input, built again
    layer = attnlab.GroupedQueryAttention(32, 4, 2).eval()
    x = torch.randn(1, 12, 32)
    with torch.no_grad():
        cache = attnlab.KVCache()
        steps = torch.cat([layer(x[:, t : t + 1], cache=cache).output for t in range(12)], dim=1)
        torch.testing.assert_close(steps, layer(x).output, atol=1e-5, rtol=1e-5)
    assert results["cache_bytes"] == cache.nbytes == 2 * 2 * 12 * 8 * 4


def test_recorded_decode_run_is_the_full_one() -> None:
    """The recorded decode run: width 512, 8 query heads on 2 kv heads, T up to 2048."""
    results = load_results("decode")
    assert results["quick"] is False
    assert {k: results["config"][k] for k in ("d_model", "num_heads", "num_kv_heads")} == {
        "d_model": 512,
        "num_heads": 8,
        "num_kv_heads": 2,
    }
    _check_decode(results, [128, 256, 512, 1024, 2048])


def test_recorded_window_run_is_the_full_one() -> None:
    """The recorded window run: window 256 against causal, 12 heads of 64, T = 512 ... 8192."""
    results = load_results("window")
    assert results["quick"] is False
    assert results["config"] == {
        "window": 256,
        "heads": 12,
        "head_dim": 64,
        "B": 1,
        "dtype": "float32",
    }
    _check_window(results, [512, 1024, 2048, 4096, 8192])
    for row in results["rows"]:  # the blocks flash attention computes, as it does today
        causal = row["method"] == "causal"
        window = None if causal else 256
        assert row["blocks"] == len(
            flash_visited_blocks(row["T"], row["T"], WINDOW_BLOCK_SIZE, causal, window)
        )


def test_kv_cache_bytes_per_token_at_llama3_8b() -> None:
    """2 x layers x kv heads x head width numbers per token: 512, 128 and 16 KiB."""
    sizes = kv_cache_sizes()
    assert {name: s["bytes_per_token"] // 1024 for name, s in sizes.items()} == {
        "MHA": 512,
        "GQA": 128,
        "MQA": 16,
    }
    assert kv_cache_bytes_per_token(32, 8, 128, torch.float32) == 2 * 32 * 8 * 128 * 4
    with pytest.raises(ValueError, match="num_kv_heads must be a positive int; got 0"):
        kv_cache_bytes_per_token(32, 0, 128)
    with pytest.raises(TypeError, match=r"dtype must be a torch\.dtype; got int 2"):
        kv_cache_bytes_per_token(32, 8, 128, 2)  # type: ignore[arg-type]


def test_plot_decode_and_plot_window_draw_log_log_panels() -> None:
    """Two log-log panels each: decode time and speed-up; window time and memory."""
    for fig, lines in ((plot_decode(load_results("decode")), [2, 2]),
                       (plot_window(load_results("window")), [2, 2])):  # fmt: skip
        axes = fig.get_axes()
        assert [len(ax.get_lines()) for ax in axes] == lines
        assert all(ax.get_xscale() == "log" and ax.get_yscale() == "log" for ax in axes)
