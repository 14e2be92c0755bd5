"""What the hooks compute from the package, kept between builds (not a hook itself).

Drawing the figures and training the explorer's recall model take most of a build that
has nothing new to compute, so each result is memoised under a key made of everything
it is computed from: the package's sources, the hooks' and the recorded benchmark
runs (and matplotlib's version). The memo lives in memory (``mkdocs serve`` rebuilds
in the same process) and on disk under ``.cache/build/<key>/``, and a change to any
of those files makes a new key: nothing stale is ever read. The package's part of the
key is read once per process, as the package is imported once: ``mkdocs serve`` shows
an edit of the package after a restart (and never stores the old package's results
under the new sources' key); an edit of a hook, which ``serve`` imports again on each
rebuild, shows at once.

Processes that want the same result at once (the test suite's workers and its site
build) compute it once: the first takes a lock on it, the others wait for its file.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
import types
from collections.abc import Callable
from pathlib import Path

import matplotlib as mpl
from filelock import FileLock

import attnlab
from attnlab.bench import RESULT_NAMES, results_file

HOOKS = Path(__file__).resolve().parent
DISK_CACHE = HOOKS.parent / ".cache" / "build"


@functools.cache
def _package_digest() -> str:
    """A hash of the package's sources, as this process imported them."""
    digest = hashlib.sha256()
    for path in sorted(Path(attnlab.__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def source_key() -> str:
    """A hash of the package's sources, the hooks' and every recorded benchmark run."""
    digest = hashlib.sha256(f"matplotlib {mpl.__version__} {_package_digest()}".encode())
    for path in sorted(HOOKS.glob("*.py")):
        digest.update(path.read_bytes())
    for name in RESULT_NAMES:
        recorded = results_file(name)
        # A suite not yet recorded keys as missing; whatever draws from it fails by itself.
        digest.update(recorded.read_bytes() if recorded.is_file() else f"no {name}".encode())
    return digest.hexdigest()


def _memo() -> dict[tuple[str, str], str]:
    """A dict that outlives the hooks' modules, which ``mkdocs serve`` re-imports."""
    holder = sys.modules.setdefault("_attnlab_build_memo", types.ModuleType("memo"))
    memo: dict[tuple[str, str], str] = holder.__dict__.setdefault("texts", {})
    return memo


def cached_text(name: str, key: str, compute: Callable[[], str]) -> str:
    """``compute()``, memoised as ``name`` (a file name) under the source ``key``."""
    memo = _memo()
    if (name, key) not in memo:
        cached = DISK_CACHE / key[:16] / name
        cached.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(cached.with_name(cached.name + ".lock"))):
            if cached.is_file():
                memo[(name, key)] = cached.read_text(encoding="utf-8")
            else:
                text = compute()
                # A build of other sources may have evicted this key's directory meanwhile.
                cached.parent.mkdir(parents=True, exist_ok=True)
                partial = cached.with_name(f"{cached.name}.{os.getpid()}.partial")
                partial.write_text(text, encoding="utf-8")
                partial.replace(cached)  # atomic: a reader without the lock sees all or none
                memo[(name, key)] = text
    return memo[(name, key)]


def evict_stale(key: str) -> None:
    """Remove the disk cache of every other source key."""
    if DISK_CACHE.is_dir():
        for stale in DISK_CACHE.iterdir():
            if stale.is_dir() and stale.name != key[:16]:
                shutil.rmtree(stale, ignore_errors=True)
