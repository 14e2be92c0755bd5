"""The suite's second set of CPU kernels (tests/kernel_settings.py)."""

from __future__ import annotations

import os
from pathlib import Path

import kernel_settings
import pytest
import torch


def test_this_process_runs_the_kernels_its_worker_was_given() -> None:
    """On a worker given the other setting PyTorch runs it; elsewhere, the CPU's own,
    as kernel_settings predicts them from /proc/cpuinfo."""
    capability = torch.backends.cpu.get_cpu_capability()
    forced = os.environ.get("ATEN_CPU_CAPABILITY")
    if forced is not None:
        assert capability.lower() == forced.lower()
    elif Path("/proc/cpuinfo").exists():
        assert (capability == "AVX512") == kernel_settings.pytorch_picks_avx512()


@pytest.mark.parametrize(
    ("flags", "picks"),
    [
        ("fpu sse avx2 fma avx512f avx512dq avx512bw avx512vl", True),
        ("fpu sse avx2 fma avx512f", False),  # no VL/BW/DQ: PyTorch stays on AVX2
        ("fpu sse avx2 fma", False),
    ],
)
def test_avx512_is_read_as_pytorch_reads_it(tmp_path: Path, flags: str, picks: bool) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\n\nprocessor\t: 1\n", "utf-8")
    assert kernel_settings.pytorch_picks_avx512(cpuinfo) is picks
    assert kernel_settings.pytorch_picks_avx512(tmp_path / "missing") is False


def test_the_other_setting_fits_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in kernel_settings.KERNEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    expected = (
        kernel_settings.AVX512_ELSEWHERE
        if kernel_settings.pytorch_picks_avx512()
        else kernel_settings.SCALAR
    )
    assert kernel_settings.other_setting() == expected
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # the run chose: no second setting
    assert kernel_settings.other_setting() == {}
