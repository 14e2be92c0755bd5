"""The suite's second set of CPU kernels: the pages' blocks run under two, split by page.

A printed number must not depend on the CPU's kernels: a reader whose CPU has no AVX-512
gets other BLAS and ATen kernels than the machine that recorded the page, and their sums
round differently. So in a parallel run (``make test``: ``pytest -n auto --dist
loadgroup``) the odd-numbered workers (gw1, gw3, ...) run under *the other setting*:

- on a CPU where PyTorch picks its AVX-512 kernels: the AVX2 ones, in ATen, MKL and
  oneDNN alike (``ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2
  ONEDNN_MAX_CPU_ISA=AVX2``), what most readers' x86 machines run;
- anywhere else (AVX2 x86, ARM, macOS): ATen's scalar kernels
  (``ATEN_CPU_CAPABILITY=default``).

Each page (a docs/*.md file, README.md, or the ``xdist_group`` holding it) is pinned to
one side by a hash of its name, so a run is reproducible: a failure names the page, and
the report header says which half ran under which kernels. The halves swap each UTC day
(``ATTNLAB_PAGES_HALF=0`` or ``1`` picks one), so two days' runs give every page both.
Why not every page twice: the pages' blocks are about 75 s of CPU (45 s of the 2-core
run's wall time), and a second pass would take ``make test`` past its 5-minute budget;
half the pages under each setting costs nothing.

A run that sets one of these variables itself runs every worker under that setting.
"""

from __future__ import annotations

import datetime
import os
import zlib
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
HALF_VARIABLE = "ATTNLAB_PAGES_HALF"
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


def pages_half() -> int:
    """Which half of the pages the other setting runs: $ATTNLAB_PAGES_HALF, else the UTC
    day's parity."""
    chosen = os.environ.get(HALF_VARIABLE, "")
    if chosen in {"0", "1"}:
        return int(chosen)
    return datetime.datetime.now(datetime.UTC).toordinal() % 2


def is_page(nodeid: str) -> bool:
    """Whether ``nodeid`` is a block of a Markdown page (pytest-codeblocks' items)."""
    return nodeid.split("::", 1)[0].endswith(".md")


def on_other_side(name: str, half: int) -> bool:
    """Whether the page or group ``name`` runs under the other setting, in ``half``."""
    return zlib.crc32(name.encode()) % 2 == half


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


def make_scheduler(config: Any, log: Any) -> Any:
    """pytest-xdist's ``loadgroup`` scheduler, each page pinned to its half's workers."""
    from xdist.scheduler import LoadGroupScheduling

    half = pages_half()

    class PagesSplit(LoadGroupScheduling):  # type: ignore[misc]
        def _side(self, scope: str, unit: dict[str, bool]) -> bool | None:
            """True: the other setting's workers; False: the others; None: any worker."""
            if not any(is_page(nodeid) for nodeid in unit):
                return None
            # A page's block: its file ("docs/x.md::line 5" -> "docs/x.md"); a group: its name.
            return on_other_side(scope.split("::", 1)[0], half)

        def _assign_work_unit(self, node: Any) -> None:
            other = WORKERINPUT_KEY in node.workerinput
            # Were a side's last worker gone (crashed, not replaced), any worker takes its pages.
            sides = {WORKERINPUT_KEY in n.workerinput for n in self.nodes if not n.shutting_down}
            for scope, unit in self.workqueue.items():
                if self._side(scope, unit) in (None, other) or len(sides) < 2:
                    self.workqueue.move_to_end(scope, last=False)
                    super()._assign_work_unit(node)
                    return
            # Only the other side's pages are left: this worker is done once it is idle.
            if not self._pending_of(self.assigned_work.get(node, {})):
                node.shutdown()

    return PagesSplit(config, log)


def report_header() -> str:
    """The report's line on the kernels (for a parallel run)."""
    setting = other_setting()
    if not setting:
        return "CPU kernels: one setting for every worker (the run sets it)"
    named = " ".join(f"{k}={v}" for k, v in setting.items())
    return (
        f"CPU kernels: odd-numbered workers under {named}, running half {pages_half()} of "
        f"the pages ({HALF_VARIABLE}=0/1 picks the half)"
    )
