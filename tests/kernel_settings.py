"""The suite's second set of CPU kernels: the pages' blocks run under two.

A printed number must not depend on the CPU's kernels: a reader whose CPU has no AVX-512
gets other BLAS and ATen kernels than the machine that recorded the page, and their sums
round differently. So in a parallel run (``make test``: ``pytest -n auto --dist
loadgroup``) the odd-numbered workers (gw1, gw3, ...) run under *the other setting*:

- on a CPU where PyTorch picks its AVX-512 kernels: the AVX2 ones, in ATen, MKL and
  oneDNN alike (``ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2
  ONEDNN_MAX_CPU_ISA=AVX2``), what most readers' x86 machines run;
- anywhere else (AVX2 x86, ARM, macOS): ATen's scalar kernels
  (``ATEN_CPU_CAPABILITY=default``).

Every test, a page's block or not, runs under whichever setting its worker has; on 2
cores about half the pages' blocks run under each, which half depending on the load, so
runs in a row cover every page under both (the report header names the setting, and a
failure the worker: ``[gw1]``). Why not every page under both in each run: the pages'
blocks are about 75 s of CPU (45 s of a 2-core run's wall time), and a second pass takes
``make test`` past its 5-minute budget; one worker under the other setting costs nothing.
Why not a fixed split of the pages: pinning pages to workers means replacing
pytest-xdist's scheduler, whose crash handling then hung the run.

A run that sets one of these variables itself runs every worker under that setting.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

AVX512_ELSEWHERE = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}
"""The other setting on a CPU where PyTorch runs AVX-512 kernels: AVX2 everywhere."""
SCALAR = {"ATEN_CPU_CAPABILITY": "default"}
"""The other setting on any other CPU: ATen's scalar kernels (MKL/oneDNN keep theirs)."""
KERNEL_VARIABLES = tuple(AVX512_ELSEWHERE)
WORKERINPUT_KEY = "attnlab_other_kernels"
#: PyTorch's rule for its AVX-512 kernels (aten/src/ATen/native/DispatchStub.cpp).
AVX512_FLAGS = {"avx512vl", "avx512bw", "avx512dq", "fma"}


def pytorch_picks_avx512(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether PyTorch runs its AVX-512 kernels on this CPU (read from /proc/cpuinfo)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:  # not Linux: macOS, or no /proc
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split()) >= AVX512_FLAGS
    return False


def other_setting() -> dict[str, str]:
    """The variables of the second kernel setting on this machine; empty when the run
    already sets one of them itself."""
    if any(name in os.environ for name in KERNEL_VARIABLES):
        return {}
    return dict(AVX512_ELSEWHERE if pytorch_picks_avx512() else SCALAR)


def configure_worker(node: Any) -> None:
    """(Controller) Give the odd-numbered workers the other setting, when there is one."""
    setting = other_setting()
    if setting and int(node.workerinput["workerid"].removeprefix("gw")) % 2 == 1:
        node.workerinput[WORKERINPUT_KEY] = setting


def enter_setting(workerinput: dict[str, Any]) -> None:
    """(Worker) Switch to the other setting before any PyTorch kernel runs here.

    PyTorch reads ATEN_CPU_CAPABILITY at its first dispatched operation, MKL and oneDNN
    their variables at their first call; nothing in this process has computed yet.
    PyTorch's cache of compiled graphs is keyed without ATEN_CPU_CAPABILITY, so it is off
    here: a graph compiled by a worker under the machine's own kernels gave FlexAttention's
    compiled block wrong numbers under avx2.
    """
    setting = workerinput.get(WORKERINPUT_KEY)
    if setting:
        os.environ.update(setting)
        os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")


def report_header() -> str:
    """The report's line on the kernels (for a parallel run)."""
    setting = other_setting()
    if not setting:
        return "CPU kernels: one setting for every worker (the run sets it)"
    named = " ".join(f"{k}={v}" for k, v in setting.items())
    return f"CPU kernels: odd-numbered workers (gw1, gw3, ...) under {named}"
