"""scripts/mutation_report.py on a small made-up run: killed mutants are counted, each
survivor is listed with its reason, and a survivor without one, a reason whose diff is no
longer the mutant's, a reason for a mutant now killed, or an unfinished mutant fails it."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest
from support import REPO_ROOT


def report_script() -> ModuleType:
    """scripts/mutation_report.py, imported from its path (scripts/ is no package)."""
    name = "attnlab_mutation_report"
    if name not in sys.modules:
        path = REPO_ROOT / "scripts" / "mutation_report.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


RESULTS = """\
    attnlab.masks.x_causal_mask__mutmut_1: killed
    attnlab.masks.x_causal_mask__mutmut_2: timeout
    attnlab.masks.x_row_shift__mutmut_3: survived
    attnlab.gqa.xǁGroupedQueryAttentionǁ__init____mutmut_4: no tests
"""
SURVIVOR = "attnlab.masks.x_row_shift__mutmut_3"
NO_TESTS = "attnlab.gqa.xǁGroupedQueryAttentionǁ__init____mutmut_4"
DIFF = """\
--- src/attnlab/masks.py
+++ src/attnlab/masks.py
@@ -1,2 +1,2 @@
-    return row_max
+    return row_max.detach()
"""
REASONS = f"""\
["{SURVIVOR}"]
diff = "-return row_max | +return row_max.detach()"
why = "a detached shift changes no value and no gradient"

["{NO_TESTS}"]
diff = "+self.num_kv_heads = None"
why = "covered by the llama tests, not selected"
"""


def run(results: str = RESULTS, reasons: str = REASONS, diff: str = DIFF) -> tuple[str, list[str]]:
    script = report_script()
    outcomes = script.parse_results(results)
    diffs = {SURVIVOR: diff, NO_TESTS: "+ self.num_kv_heads = None"}
    report: str
    problems: list[str]
    report, problems = script.build_report(outcomes, diffs, script.load_reasons(reasons), 12.4)
    return report, problems


def test_a_run_with_every_survivor_explained_passes_and_is_reported() -> None:
    report, problems = run()
    assert problems == []
    assert "- Mutants: 4; killed: 1; no tests: 1; survived: 1; timeout: 1" in report
    assert "- Modules: `attnlab.gqa`, `attnlab.masks`" in report
    assert "| `attnlab.masks` | 3 | 2 | 1 |" in report
    assert "- Wall time: 12 s" in report
    assert "| a detached shift changes no value and no gradient | 1 |" in report
    assert f"- `{SURVIVOR}` (survived): a detached shift changes no value and no gradient" in report
    assert "  `-return row_max | +return row_max.detach()`" in report


def test_an_unexplained_survivor_fails() -> None:
    reasons = REASONS.split("\n\n")[1]  # only the no-tests mutant keeps its reason
    report, problems = run(reasons=reasons)
    assert problems == [f"{SURVIVOR}: survived with no reason in survivors.toml"]
    assert f"`{SURVIVOR}` (survived): **no reason given**" in report


def test_a_reason_whose_change_moved_to_another_mutant_fails() -> None:
    _, problems = run(diff=DIFF.replace("row_max.detach()", "row_max * 2"))
    wanted = "-return row_max | +return row_max.detach()"
    assert problems == [f"{SURVIVOR}: its diff is no longer {wanted!r} (renumbered?)"]


def test_an_explained_mutant_that_is_killed_or_gone_fails() -> None:
    _, problems = run(results=RESULTS.replace("_3: survived", "_3: killed"))
    assert problems == [f"{SURVIVOR}: explained in survivors.toml but killed"]
    _, problems = run(results=RESULTS.replace(f"    {SURVIVOR}: survived\n", ""))
    assert problems == [f"{SURVIVOR}: explained in survivors.toml but not in the results"]


def test_an_unfinished_mutant_fails() -> None:
    _, problems = run(results=RESULTS.replace("_1: killed", "_1: not checked"))
    assert problems == ["attnlab.masks.x_causal_mask__mutmut_1: not checked (not run to the end)"]


def test_malformed_input_is_refused() -> None:
    script = report_script()
    with pytest.raises(ValueError, match="results line must read 'name: outcome'"):
        script.parse_results("no outcome here\n")
    with pytest.raises(ValueError, match="must have a non-empty diff and why"):
        script.load_reasons('["m"]\nwhy = "no change given"\n')


def test_the_kept_reasons_file_reads() -> None:
    """tests/mutants/survivors.toml parses, every entry with its diff and reason."""
    script = report_script()
    reasons = script.load_reasons(script.EXPLANATIONS.read_text(encoding="utf-8"))
    assert all(name.startswith("attnlab.") for name in reasons)
