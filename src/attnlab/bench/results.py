"""The recorded benchmark results that ship with the package, and reading them back.

The recorded runs are ``attnlab/results/<name>.json``, one per suite of
[`SUITES`][attnlab.bench.SUITES]; [`load_results`][attnlab.bench.load_results] reads
them by name, from a checkout or from an installed wheel alike, or reads a file the
command line wrote.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from .suites import SUITES

__all__ = ["RESULT_NAMES", "load_results", "results_file"]

RESULT_NAMES: tuple[str, ...] = tuple(SUITES)
"""The recorded runs, by name (one per suite): each is ``attnlab/results/<name>.json``."""


def results_file(name: str) -> Traversable:
    """The recorded results file of run ``name`` (one of ``RESULT_NAMES``), in the package.

    Read through ``importlib.resources`` (``read_text()``), so it is found in a checkout
    and in an installed wheel alike.
    """
    if name not in RESULT_NAMES:
        raise ValueError(f"name must be one of {', '.join(RESULT_NAMES)}; got {name!r}")
    return resources.files("attnlab") / "results" / f"{name}.json"


def load_results(source: str | os.PathLike[str] = "forward") -> dict[str, Any]:
    """Read benchmark results: a recorded run by name, or a file the command line wrote.

    ``source`` is a name in ``RESULT_NAMES`` (by default the forward sweep) or the path of
    a JSON file written by ``python -m attnlab.bench``. The results are what the run's
    ``run_*`` function returned (for ``forward``: ``machine``, ``matmul_gflops``,
    ``sweep``, ``modules``, ``large_run``; ``sweep`` has one entry per method, ``T`` and
    ``causal``).
    """
    if isinstance(source, str) and source in RESULT_NAMES:
        text = results_file(source).read_text(encoding="utf-8")
    else:
        path = Path(source)
        if not path.is_file():
            raise ValueError(
                f"source must be one of {', '.join(RESULT_NAMES)} or a results file; "
                f"got {str(source)!r}"
            )
        text = path.read_text(encoding="utf-8")
    results: dict[str, Any] = json.loads(text)
    return results
