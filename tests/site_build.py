"""Build the documentation site exactly as it is published; record how it went.

``python tests/site_build.py SITE_DIR`` runs the Pages workflow's own build steps (the
``run`` steps of the ``build`` job in .github/workflows/pages.yml, read from the file:
``make site``) in a fresh virtual environment, building into ``SITE_DIR``. Then it writes
``SITE_DIR.log`` (everything the steps printed) and, last, ``SITE_DIR.rc`` (the exit
status of the first step that failed, else 0). ``tests/conftest.py`` starts this in the
background at the start of a parallel run, so the build overlaps the tests that do not
need the site; the ``built_site`` fixture waits for the ``.rc`` file. So the suite's one
build of the site is the workflow's: if its install or build commands stop working in a
fresh environment, every test of the site fails with their output.

What differs from the workflow's runner, and why:

- The fresh environment (``SITE_DIR.venv``, handed to make as ``VENV``) gets its
  packages linked, not installed (tests/fresh_venv.py): exactly the distributions that
  PyTorch, the package's ``docs`` extra and the no-deps wheels need (plus pip and the
  build backend), resolved from this environment's metadata. A hook that imports a
  package the ``docs`` extra does not declare fails, as after a real install.
- pip runs with no index and no build isolation (the build backend is linked in too):
  the install steps run and must succeed, but nothing is downloaded during a test.
- ``ATTNLAB_TORCH_INDEX`` is empty: PyTorch is already there, so no index is probed.
- ``SITE_URL``, which the workflow takes from GitHub Pages, is a project subpath
  (``SITE_URL`` below), so the tests check the 404 page and the sitemap under one.

The build cache (``.cache/``, keyed on the sources) is the checkout's, so a build that
changed nothing computes no figure and runs no notebook.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path

import fresh_venv  # beside this file: on the path when run as a script or under pytest
import yaml
from packaging.requirements import Requirement

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = REPO_ROOT / ".github" / "workflows" / "pages.yml"
PAGES_BASE_URL = "https://owner.github.io/attention-step-by-step"
"""What ``steps.pages.outputs.base_url`` is on GitHub for a project site (no final /)."""
SITE_URL = f"{PAGES_BASE_URL}/"
"""The ``site_url`` the suite's build gets: a project site, served under a subpath."""
EXPRESSIONS = {"steps.pages.outputs.base_url": PAGES_BASE_URL}
"""Values of the GitHub expressions (``${{ ... }}``) the build job's steps use."""
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
TOOLS = ("pip", "setuptools", "wheel")  # pip, and the build backend of `pip install -e .`


def _substitute(value: str) -> str:
    def known(match: re.Match[str]) -> str:
        if match[1] not in EXPRESSIONS:
            raise KeyError(f"{WORKFLOW.name}: no test value for ${{{{ {match[1]} }}}}")
        return EXPRESSIONS[match[1]]

    return EXPRESSION.sub(known, str(value))


def workflow_steps(workflow: Path = WORKFLOW) -> list[tuple[str, dict[str, str]]]:
    """The build job's ``run`` steps: ``(command, env)``, expressions given their values."""
    job = yaml.safe_load(workflow.read_text(encoding="utf-8"))["jobs"]["build"]
    steps = []
    for step in job["steps"]:
        if "run" in step:
            env = {**job.get("env", {}), **step.get("env", {})}
            steps.append((_substitute(step["run"]), {k: _substitute(v) for k, v in env.items()}))
    return steps


def project_requirements(extras: set[str]) -> list[str]:
    """The package's requirements with ``extras``, read from pyproject.toml (an extra that
    names the package itself, ``name[a,b]``, brings in extras ``a`` and ``b``)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    name = project["project"]["name"]
    requirements: list[str] = list(project["project"]["dependencies"])
    todo, done = set(extras), set()
    while todo:
        extra = todo.pop()
        done.add(extra)
        for line in project["project"]["optional-dependencies"][extra]:
            requirement = Requirement(line)
            if requirement.name == name:
                todo |= requirement.extras - done
            else:
                requirements.append(line)
    return requirements


def fresh_environment(venv: Path) -> None:
    """``venv``: a fresh environment with what ``make site`` would install (linked).

    The package's own requirements come from pyproject.toml (the installed copy's
    metadata may be older); the package itself is left for the workflow to install.
    """
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    settings = project["tool"]["attnlab"]
    with_deps = [str(settings["torch"]), *project_requirements({"docs"}), *TOOLS]
    dists = fresh_venv.requirement_closure(with_deps)
    no_deps = [Requirement(str(line)).name for line in settings["no-deps"]]
    dists += [distribution(name) for name in no_deps]  # without their dependencies
    site_packages = fresh_venv.create(venv)
    fresh_venv.provide(venv, site_packages, dists)


def step_environment(venv: Path, site_dir: Path, step_env: dict[str, str]) -> dict[str, str]:
    """The environment a workflow step runs in here (see the module's docstring)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "MAKEFLAGS", "MFLAGS"}
        and not key.startswith("PIP_")
    }
    env.update(step_env)
    env.update(
        MAKEFLAGS=f"VENV={venv} SITE_DIR={site_dir}",  # make's command-line variables
        PIP_NO_INDEX="1",
        PIP_NO_BUILD_ISOLATION="0",  # pip reads "0" here as: build without isolation
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        ATTNLAB_TORCH_INDEX="",
    )
    return env


def run_workflow(site_dir: Path, venv: Path) -> tuple[int, str]:
    """Run the build job's steps in order; the first failure's status (or 0), their output."""
    output = []
    try:
        if venv.exists():
            shutil.rmtree(venv)
        fresh_environment(venv)
    except Exception as error:  # any failure here is reported in the log
        return 1, f"could not make the fresh environment {venv}: {error!r}"
    for command, step_env in workflow_steps():
        output.append(f"$ {command}\n")
        result = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", command],
            cwd=REPO_ROOT,
            env=step_environment(venv, site_dir, step_env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        output.append(result.stdout)
        if result.returncode != 0:
            return result.returncode, "".join(output)
    return 0, "".join(output)


def build(site_dir: Path) -> int:
    """Build into ``site_dir``; write ``.log`` then ``.rc`` beside it; return the status."""
    status, output = run_workflow(site_dir, site_dir.with_suffix(".venv"))
    site_dir.with_suffix(".log").write_text(output, encoding="utf-8")
    rc = site_dir.with_suffix(".rc")
    partial = rc.with_suffix(".rc.partial")
    partial.write_text(str(status), encoding="utf-8")
    partial.replace(rc)  # atomic: a reader sees no .rc or a complete one
    return status


if __name__ == "__main__":
    sys.exit(build(Path(sys.argv[1])))
