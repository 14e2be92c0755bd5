"""A fresh virtual environment that has exactly what some requirements need, made in seconds.

Installing PyTorch and the docs tool chain again would take minutes and the network.
Instead the environment is created empty and a ``.pth`` file puts one directory on its
path that holds links to exactly the distributions the requirements need, with their
dependencies resolved from the installed metadata as pip would (the same versions as
the running environment's); Jupyter data files (ipykernel's kernel spec) are copied in as
pip would install them. Anything else the running environment has stays out of reach:
code that imports an undeclared package fails there as it would after a real install.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterable
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def requirement_closure(requirements: Iterable[str]) -> list[Distribution]:
    """The installed distributions ``requirements`` need (extras included), as pip resolves.

    Raises:
        PackageNotFoundError: A required distribution is not installed here.
    """
    found: dict[str, Distribution] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(line) for line in requirements]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        found[name] = dist = distribution(name)
        for line in dist.requires or []:
            needed = Requirement(line)
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in {"", *requirement.extras}
            ):
                todo.append(needed)
    return [found[name] for name in sorted(found)]


def create(venv: Path) -> Path:
    """An empty virtual environment (no pip of its own); its ``site-packages``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    return venv / "lib" / version / "site-packages"


def provide(venv: Path, site_packages: Path, dists: Iterable[Distribution]) -> Path:
    """Make ``dists`` importable in ``venv``, and nothing else; the links' directory.

    Links each distribution's top-level files (packages, modules, ``.dist-info``) into
    one directory that a ``.pth`` file in ``site_packages`` puts on ``sys.path``;
    copies their Jupyter data files into the venv, as pip would.
    """
    linked = venv / "provided"
    linked.mkdir()
    for dist in dists:
        site = Path(str(dist.locate_file("")))
        for file in dist.files or []:
            top = file.parts[0]
            if top == ".." and "jupyter" in file.parts:  # ../../../share/jupyter/...
                target = venv / Path(*file.parts[3:])
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(site / file, target)
            elif top not in {"..", "__pycache__"} and not top.endswith(".pth"):
                link = linked / top
                if not link.exists() and (site / top).exists():
                    link.symlink_to(site / top, target_is_directory=(site / top).is_dir())
    (site_packages / "_provided.pth").write_text(f"{linked}\n", encoding="utf-8")
    return linked


__all__ = ["PackageNotFoundError", "create", "provide", "requirement_closure"]
