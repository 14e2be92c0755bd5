"""Memory probes of this process, read from Linux's ``/proc``.

The one home of the measurements that the benchmark and ring attention share.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
from collections.abc import Callable

from torch import Tensor

__all__ = [
    "MIB",
    "available_mib",
    "peak_extra_bytes",
    "read_status_kib",
    "release_free_memory",
    "reset_peak",
]

MIB = 2**20
"""Bytes in a mebibyte."""


def read_status_kib(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``), or ``None``."""
    try:
        with open("/proc/self/status", encoding="ascii") as file:
            for line in file:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak() -> bool:
    """Reset the peak resident set (``VmHWM``) to the current size; ``False`` if impossible.

    Writes ``5`` to ``/proc/self/clear_refs``, which only Linux has.
    """
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as file:
            file.write("5")
    except OSError:
        return False
    return True


def release_free_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc only)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def available_mib() -> float:
    """``MemAvailable`` from ``/proc/meminfo`` (infinite where unreadable)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.inf


def peak_extra_bytes(run: Callable[[], Tensor]) -> int:
    """How far ``run()`` raises this process's peak resident memory, minus its output.

    ``run`` is called once to warm up (thread pools, buffers), then measured with the
    peak (``VmHWM``) reset right before it.

    Raises:
        RuntimeError: ``/proc/self/clear_refs`` is unavailable (not Linux).
    """
    run()  # warm-up; its result is freed at once
    release_free_memory()
    baseline_kib = read_status_kib("VmRSS") or 0
    if not reset_peak():
        raise RuntimeError("peak_extra_bytes needs Linux's /proc/self/clear_refs")
    output = run()
    peak_kib = read_status_kib("VmHWM") or 0
    return max(0, (peak_kib - baseline_kib) * 1024 - output.numel() * output.element_size())
