"""The notebooks' kernels start quietly (hooks/notebook_pages.py, hooks/jupyter/).

Without CurveZMQ keys every kernel that mkdocs-jupyter starts logs "Kernel is running
over TCP without encryption", once per notebook of a cold build. The hook points
Jupyter's configuration path at hooks/jupyter/, whose nbconvert configuration has
the kernel manager provision keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import HOOKS, REPO_ROOT

from hooks import notebook_pages

RUN_ONE_CELL = """
import nbformat
from nbconvert.nbconvertapp import NbConvertApp
from nbconvert.preprocessors import ExecutePreprocessor

from hooks import notebook_pages

notebook_pages.encrypted_kernels()
app = NbConvertApp()
app.load_config_file()  # as mkdocs-jupyter does
notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
ExecutePreprocessor(config=app.config, kernel_name="python3").preprocess(notebook, {})
print(notebook.cells[0].outputs[0]["text"], end="")
"""


def test_config_asks_for_encrypted_kernels() -> None:
    config = json.loads((HOOKS / "jupyter" / "jupyter_nbconvert_config.json").read_text("utf-8"))
    assert config == {"KernelManager": {"transport_encryption": "auto"}}


def test_hook_puts_its_config_first_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbconvert.nbconvertapp import NbConvertApp

    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "/elsewhere")
    notebook_pages.encrypted_kernels()
    notebook_pages.encrypted_kernels()
    expected = os.pathsep.join([str(HOOKS / "jupyter"), "/elsewhere"])
    assert os.environ["JUPYTER_CONFIG_PATH"] == expected
    app = NbConvertApp()
    app.load_config_file()
    assert app.config.KernelManager.transport_encryption == "auto"


def test_a_kernel_runs_without_the_tcp_warning() -> None:
    """One cell in a real kernel, started as mkdocs-jupyter starts it: no warning."""
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_CONFIG_PATH"}
    result = subprocess.run(
        [sys.executable, "-c", RUN_ONE_CELL],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "42\n"
    assert "without encryption" not in result.stderr, result.stderr
