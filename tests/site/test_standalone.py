"""The package stands alone: its wheel works in a fresh environment outside the repository.

A cheap test checks that the recorded benchmark runs the chapters read are package
data: a fresh interpreter, started outside the repository, finds each of them through
``importlib.resources`` inside the package, and the wheel's package-data globs cover
them. The long one, scheduled first because it takes a while (it overlaps the rest of a
parallel run), builds the wheel from the files a wheel is made of, creates a fresh virtual
environment in a temporary directory with only PyTorch, Jupyter's kernel and client
and pip, and executes a chapter's downloadable notebook there. The environment does
not have ``attnlab``: the notebook's first cell installs the wheel, and every other
cell then runs against the installed copy, nowhere near the source tree.

The environment gets those packages without installing them again (which took most of
a minute: PyTorch alone unpacks to hundreds of megabytes; tests/fresh_venv.py, as the
suite's site build does). It is created empty, and a
``.pth`` file puts one directory on its path that holds links to exactly those
distributions and their dependencies, resolved from their metadata as pip would
(the same versions as this environment's); ipykernel's kernel spec is copied in as
pip would install it. Anything else this environment has (``attnlab`` itself,
matplotlib, transformers, ...) stays out of reach, and the test checks that.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from fnmatch import fnmatch
from pathlib import Path

import fresh_venv
import nbformat
import pytest
from support import REPO_ROOT

from attnlab.bench import RESULT_NAMES
from hooks import chapter_notebooks as hook

CHAPTER = REPO_ROOT / "docs" / "transformer" / "causal-attention.md"
PACKAGE = "attention-step-by-step"

EXECUTE = """
import sys

import nbformat
from nbclient import NotebookClient

notebook = nbformat.read(sys.argv[1], as_version=4)
probe = nbformat.v4.new_code_cell(sys.argv[2])  # run last, in the same kernel; not kept
notebook.cells.append(probe)
NotebookClient(notebook, kernel_name="python3", timeout=300).execute()
notebook.cells.remove(probe)
nbformat.write(notebook, sys.argv[1])
print("".join(output.get("text", "") for output in probe.outputs))
"""
"""Execute the notebook sys.argv[1] in place; then print what the code sys.argv[2] prints,
run in the notebook's kernel after its last cell."""

RECORDED = """
import json
import sys
from importlib import resources
from pathlib import Path

import attnlab

plots = "matplotlib" in sys.modules  # before anything else of the package is imported
from attnlab.bench import RESULT_NAMES, load_results

found = {}
for name in RESULT_NAMES:
    file = resources.files("attnlab") / "results" / f"{name}.json"
    assert load_results(name) == json.loads(file.read_text(encoding="utf-8")), name
    found[name] = str(file)
print(json.dumps({"package": str(Path(attnlab.__file__).parent), "files": found, "plots": plots}))
"""
"""Resolve every recorded run through importlib.resources and read it by name; say where
the package is, and whether ``import attnlab`` alone imported matplotlib."""


# What the fresh environment starts with: these distributions and their dependencies.
PROVIDED = ("torch", "ipykernel", "nbclient", "pip")
# Here, but not there: importing any of them in the fresh environment must fail.
ABSENT = ("attnlab", "matplotlib", "transformers", "mkdocs", "pytest")


def run(args: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(arg) for arg in args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, args))} failed ({result.returncode}):\n"
            f"{result.stdout}\n{result.stderr}",
            pytrace=False,
        )
    return result.stdout


def build_wheel(tmp_path: Path) -> Path:
    """The package's wheel, built from a copy of pyproject.toml, README.md and src/."""
    source = tmp_path / "source"
    shutil.copytree(
        REPO_ROOT / "src",
        source / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO_ROOT / name, source / name)
    dist = tmp_path / "dist"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            dist,
            source,
        ],
        cwd=tmp_path,
    )
    [wheel] = dist.glob("*.whl")
    return wheel


def test_recorded_runs_resolve_as_package_data_in_a_fresh_interpreter(tmp_path: Path) -> None:
    """Outside the repository, each recorded run is found inside the package, by name;
    and ``import attnlab`` does not import matplotlib (the ``plot`` extra is optional)."""
    answer = json.loads(run([sys.executable, "-c", RECORDED], cwd=tmp_path))
    assert answer["plots"] is False
    package = Path(answer["package"])
    assert set(answer["files"]) == set(RESULT_NAMES)
    for path in map(Path, answer["files"].values()):
        assert path.is_file() and path.parent == package / "results", path
    # the wheel carries them: pyproject's package data covers every recorded file
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["attnlab"]
    shipped = sorted((REPO_ROOT / "src" / "attnlab" / "results").iterdir())
    assert shipped and all(
        any(fnmatch(f"results/{path.name}", glob) for glob in globs) for path in shipped
    )


@pytest.mark.long
def test_a_chapter_notebook_installs_the_wheel_and_runs_outside_the_repository(
    tmp_path: Path,
) -> None:
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        recorded = {name for name in archive.namelist() if name.startswith("attnlab/results/")}
    assert recorded == {f"attnlab/results/{name}.json" for name in RESULT_NAMES}
    venv = tmp_path / "venv"
    site_packages = fresh_venv.create(venv)
    python = venv / "bin" / "python"
    fresh_venv.provide(venv, site_packages, fresh_venv.requirement_closure(PROVIDED))

    work = tmp_path / "work"
    work.mkdir()
    text = CHAPTER.read_text(encoding="utf-8")
    notebook = hook.markdown_to_notebook(text, hook._title(text), f"{PACKAGE} @ {wheel.as_uri()}")
    path = work / "chapter.ipynb"
    nbformat.write(notebook, path)

    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"} and not key.startswith("JUPYTER")
    }
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(tmp_path),  # no kernelspec or config of the user's
        VIRTUAL_ENV=str(venv),
        PYTHONDONTWRITEBYTECODE="1",  # the linked packages are this environment's files
    )
    assert all(importlib.util.find_spec(name) for name in ABSENT)  # here, but not there:
    found = f"import importlib.util as u; print([n for n in {ABSENT!r} if u.find_spec(n)])"
    assert run([python, "-c", found], cwd=work, env=env).strip() == "[]"

    # the notebook, then (in its kernel) where the package and its recorded runs are
    answer = json.loads(run([python, "-c", EXECUTE, path, RECORDED], cwd=work, env=env))

    executed = nbformat.read(path, as_version=4)
    code_cells = [cell for cell in executed.cells if cell.cell_type == "code"]
    assert all(cell.get("execution_count") for cell in code_cells)
    outputs = [out for cell in code_cells for out in cell.get("outputs", [])]
    assert not [out for out in outputs if out.get("output_type") == "error"]
    # the package installed in the environment, and the recorded benchmark runs the chapters
    # print, read from the installed wheel
    installed, recorded_files = Path(answer["package"]), answer["files"]
    assert venv in installed.parents, installed
    assert REPO_ROOT not in installed.parents
    assert set(recorded_files) == set(RESULT_NAMES)
    assert all(venv in Path(path).parents for path in recorded_files.values())
