"""scripts/mutants.py on a tiny tree of its own: a bug the tests see is killed, one they
cannot see survives (or is equivalent, when explained), stale text is reported, and the
mutated file is restored every time."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from support import REPO_ROOT


def harness() -> ModuleType:
    """scripts/mutants.py, imported from its path (scripts/ is no package)."""
    name = "attnlab_mutants_harness"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / "mutants.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


SOURCE = "def double(x):\n    return 2 * x  # the code under test\n"
TEST = "from tiny import double\n\n\ndef test_double():\n    assert double(3) == 6\n"


def test_mutants_are_judged_by_their_tests_and_the_file_is_restored(tmp_path: Path) -> None:
    mutants = harness()
    (tmp_path / "src").mkdir()
    (tmp_path / "tests").mkdir()
    source = tmp_path / "src" / "tiny.py"
    source.write_text(SOURCE, encoding="utf-8")
    (tmp_path / "tests" / "test_tiny.py").write_text(TEST, encoding="utf-8")
    tests = ("tests/test_tiny.py",)

    def outcome(old: str, new: str, equivalent: str = "") -> str:
        mutant = mutants.Mutant("m", "src/tiny.py", old, new, tests, equivalent=equivalent)
        result = mutants.run_mutant(tmp_path, mutant)
        assert source.read_text(encoding="utf-8") == SOURCE  # restored
        return str(result.status)

    assert outcome("2 * x", "3 * x") == "killed"
    assert outcome("2 * x", "x + x") == "survived"  # no test can tell: must be explained
    assert outcome("2 * x", "x + x", equivalent="x + x is 2 * x") == "equivalent"
    assert outcome("2 * x", "3 * x", equivalent="wrong") == "killed-but-marked-equivalent"
    assert outcome("3 * x", "4 * x") == "not-applied"


def test_every_mutant_names_test_files_that_exist() -> None:
    """Each mutant's tests are files of this repository (a typo would run nothing)."""
    for mutant in harness().MUTANTS:
        assert mutant.tests, mutant.name
        for test in mutant.tests:
            assert (REPO_ROOT / test).is_file(), f"{mutant.name}: no {test}"
