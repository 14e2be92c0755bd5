"""Shared fixtures: the repository root and one strict build of the site per test run.

The suite runs in parallel (``pytest -n auto``, pytest-xdist): ``make test`` does.
The site is built once per run, not once per worker. In a parallel run of the whole
suite the controller starts the build in the background before the workers start
(``pytest_configure``), so it overlaps the tests that do not need it, and those tests
are collected first, the long ones first of all (``pytest_collection_modifyitems``;
``--dist loadgroup`` keeps that order); every worker's ``built_site`` then waits for
that one build. The build is the run's critical path, so the workers run at a lower
priority (niceness 5) and take the cores it leaves. In any other run the first test
that asks for the site builds it, under a file lock that the other workers wait on.
In a parallel run every process computes on one thread (``OMP_NUM_THREADS=1``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

# PyTorch 2.13's cache of compiled graphs is keyed without ATEN_CPU_CAPABILITY: when the
# suite forces another set of CPU kernels (as a reader's machine would have), a graph cached
# under this machine's own set came back and FlexAttention's compiled block printed wrong
# numbers. A reader's machine has one set; a forced run compiles its graphs afresh.
if "ATEN_CPU_CAPABILITY" in os.environ:
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")

# Triton's kernels (attnlab.triton_attention, its page) run in Triton's interpreter on every
# machine the suite runs on, GPU or not: ``@triton.jit`` reads TRITON_INTERPRET when it
# decorates, and Triton's own library functions are decorated when torch.compile first
# imports Triton, so it is set before any test or page block can import either.
os.environ.setdefault("TRITON_INTERPRET", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent

# tests/ is on the path by pyproject.toml's pytest `pythonpath` option.
import kernel_settings  # noqa: E402
from prompt_paste import use_the_prompt  # noqa: E402
from site_build import build  # noqa: E402

# Every python block of the docs runs as a reader pastes it at the Python prompt, line by
# line into code.InteractiveConsole, not exec'd whole (tests/prompt_paste.py): the suite's
# one run of a block is the paste.
use_the_prompt()

SITE_FIXTURE = "built_site"
BUILD_TIMEOUT_S = 900
BUILD_IN_BACKGROUND = "attnlab_site_builds_in_background"
WORKER_NICENESS = 5  # enough for the scheduler to give the build (niceness 0) a core of its own
_building = pytest.StashKey[bool]()
_background: list[subprocess.Popen[bytes]] = []


def _shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory shared by every worker of this run (the controller's basetemp)."""
    basetemp = tmp_path_factory.getbasetemp()
    return basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp


def _whole_suite_in_parallel(config: pytest.Config) -> bool:
    if hasattr(config, "workerinput"):
        return False  # an xdist worker
    workers = config.getoption("numprocesses", default=None)
    return bool(workers) and config.args_source != pytest.Config.ArgsSource.ARGS


# Thread pools that would otherwise each take every core (PyTorch's intra-op pool is OpenMP's).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _one_thread_per_process(config: pytest.Config) -> None:
    """In a parallel run, each process computes on one thread.

    pytest-xdist starts one worker per core; with PyTorch's default of one thread per
    core in each of them (and in the site build, and in the subprocesses tests start),
    the threads outnumber the cores and spin against each other. Set on the controller
    before the workers start, so that they and everything they start inherit it; a
    value already set in the environment wins.
    """
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", default=None):
        return
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """On the controller of a parallel run: one thread per process; for the whole suite,
    start building the site now."""
    _one_thread_per_process(config)
    if getattr(config.option, "loadscopereorder", False):
        # pytest-xdist hands out the biggest groups first (the browser's pages), which
        # would make every worker wait for the site build; keep the order chosen in
        # pytest_collection_modifyitems instead: long tests first, the site's last.
        config.option.loadscopereorder = False
    if hasattr(config, "workerinput"):
        kernel_settings.enter_setting(config.workerinput)
        if config.workerinput.get(BUILD_IN_BACKGROUND):
            # The build is the run's critical path (the browser's tests wait for it);
            # while it runs, the workers' tests take the cores it leaves.
            os.nice(WORKER_NICENESS)
        return
    if not _whole_suite_in_parallel(config):
        return
    config.stash[_building] = True
    site_dir = _shared_dir(config._tmp_path_factory) / "site"
    site_dir.with_suffix(".started").touch()  # before any worker starts
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve().parent / "site_build.py"), str(site_dir)],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _background.append(process)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(pytest-xdist, on the controller) Tell each worker whether the site builds beside it."""
    node.workerinput[BUILD_IN_BACKGROUND] = node.config.stash.get(_building, False)
    kernel_settings.configure_worker(node)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Which CPU kernels the workers of a parallel run use."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", default=None):
        return None
    return kernel_settings.report_header()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop a background build that is still running when the run ends early."""
    for process in _background:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def _group_by_mark(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Suffix ``@<group>`` to the ids of ``xdist_group`` tests under ``--dist loadgroup``.

    pytest-xdist does this itself by assigning ``item._nodeid``, which pytest 9 no
    longer reads (node ids live in ``item._id``), so without this every group is
    silently spread over all workers. Where xdist's own suffix took, this does nothing.
    """
    if not getattr(config.option, "loadgroup", False):  # set on workers of a loadgroup run
        return
    for item in items:
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
             for m in item.iter_markers("xdist_group")}
        )  # fmt: skip
        if not names or item.nodeid.rfind("@") > item.nodeid.rfind("]"):
            continue
        grouped = f"{item.nodeid}@{'_'.join(names)}"
        if hasattr(item, "_id"):
            item._id = type(item._id).parse(grouped)
        else:  # pytest < 9
            item._nodeid = grouped


# Files whose tests (those not on the built site) share one worker, with the work they
# all repeat once per process: `attnlab.recall.trained_recall_model()` trains once per
# process; `import transformers` takes about 4 s (the HF tests in tests/unit mark
# themselves with support.HF_GROUP).
SHARED_WORK = {
    "trained-recall-model": {
        "tests/unit/test_recall.py",
        "tests/site/test_explorer_data.py",
        "docs/explorer.md",
        "docs/transformer/watch-attention-learn.md",
    },
    "transformers": {
        "docs/llm/grouped-query-attention.md",
        "docs/llm/kv-cache.md",
        "docs/llm/rotary.md",
    },
    # `attnlab.llama.load_smollm2()` loads once per process (tests/llama mark themselves).
    "smollm2": {
        "docs/start/what-attention-does.md",
        "docs/start/self-attention.md",
        "docs/llm/real-llm.md",
        "docs/llm/trained-attention.md",
        "docs/walkthrough/where-next.md",
    },
}
GROUP_OF_FILE = {path: group for group, paths in SHARED_WORK.items() for path in paths}

# TensorFlow and Triton each bring their own LLVM, and a process that has loaded both aborts
# ("LLVM ERROR: inconsistency in registered CommandLine options"; torch.func, torch.compile
# and attnlab.triton_attention load Triton): a page that imports TensorFlow runs last.
TENSORFLOW = re.compile(r"^\s*(?:import|from) tensorflow\b", re.MULTILINE)


def _imports_tensorflow(item: pytest.Item) -> bool:
    return bool(TENSORFLOW.search(str(getattr(getattr(item, "obj", None), "code", ""))))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long tests first, tests that need the built site last: both overlap the build;
    then a page that imports TensorFlow (`TENSORFLOW`).

    Tests that repeat the same costly work run on one worker (`SHARED_WORK`).
    """
    root = Path(str(config.rootpath))
    for item in items:
        if SITE_FIXTURE in getattr(item, "fixturenames", ()):
            continue
        group = GROUP_OF_FILE.get(Path(str(item.path)).relative_to(root).as_posix())
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    _group_by_mark(config, items)
    tensorflow_pages = {item.path for item in items if _imports_tensorflow(item)}
    items.sort(
        key=lambda item: (
            item.path in tensorflow_pages,
            SITE_FIXTURE in getattr(item, "fixturenames", ()),
            item.get_closest_marker("long") is None,
        )
    )


def _wait_for(rc: Path) -> None:
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    while not rc.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the site build did not finish in {BUILD_TIMEOUT_S} s", pytrace=False)
        time.sleep(0.5)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once per run as it is published; its directory.

    The build is the Pages workflow's own steps (``make site``: setup, then ``mkdocs build
    --strict``) in a fresh environment (tests/site_build.py). The test using it fails
    with their full output when the build fails, so a
    broken link, a missing anchor or an unimportable ``attnlab`` is reported there.
    """
    shared = _shared_dir(tmp_path_factory)
    site_dir = shared / "site"
    rc = site_dir.with_suffix(".rc")
    with FileLock(str(shared / "site.lock")):
        if not rc.exists() and not site_dir.with_suffix(".started").exists():
            build(site_dir)
    _wait_for(rc)
    status = int(rc.read_text(encoding="utf-8"))
    if status != 0:
        log = site_dir.with_suffix(".log").read_text(encoding="utf-8")
        pytest.fail(f"the site's build failed (exit {status}):\n{log}", pytrace=False)
    return site_dir
