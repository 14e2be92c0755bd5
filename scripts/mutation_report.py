"""Write mutmut's results as tests/mutants/REPORT.md; fail on a survivor nobody explained.

``make mutants`` runs ``mutmut run`` (configured in pyproject.toml's ``[tool.mutmut]``),
then this script in the same directory (the repository root). It reads
``mutmut results --all true`` (one ``name: outcome`` line per mutant), counts the outcomes,
and lists every mutant the tests did not kill (``survived``, or ``no tests``: no selected
test calls its function) with its diff (``mutmut show``) and the reason kept for it in
``tests/mutants/survivors.toml``:

    ["attnlab.masks.x_row_shift__mutmut_3"]
    diff = "-return row_max | +return row_max.detach()"  # its changed lines: still this mutant
    why = "subtracting a detached maximum changes no value and no gradient"

The exit status is 1 when a survivor has no reason, when a reason's ``diff`` is not its
mutant's diff (mutmut numbers mutants per function, so an edit can renumber them),
when an explained mutant is now killed or gone, or when a mutant was not run to the end
(``not checked``, ``suspicious``, a crash).

Usage::

    python scripts/mutation_report.py [--wall-seconds S] [--results FILE] [--report PATH]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
EXPLANATIONS = REPO_ROOT / "tests" / "mutants" / "survivors.toml"
REPORT = REPO_ROOT / "tests" / "mutants" / "REPORT.md"
MUTMUT = Path(sys.executable).parent / "mutmut"

KILLED = ("killed", "timeout", "caught by type check")  # the tests (or mypy) told it apart
UNKILLED = ("survived", "no tests")  # each needs a reason in survivors.toml


@dataclass(frozen=True)
class Reason:
    """Why a mutant is not killed, and its diff (so that its name still means it)."""

    diff: str  # the mutant's changed lines, as ``signature`` writes them
    why: str


def parse_results(text: str) -> dict[str, str]:
    """``mutmut results --all true``'s lines (``    name: outcome``) as ``{name: outcome}``."""
    outcomes = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, outcome = line.strip().rpartition(": ")
        if not sep or not name:
            raise ValueError(f"results line must read 'name: outcome'; got {line!r}")
        outcomes[name] = outcome
    return outcomes


def load_reasons(text: str) -> dict[str, Reason]:
    """survivors.toml: one table per mutant name with ``diff`` and ``why``."""
    reasons = {}
    for name, entry in tomllib.loads(text).items():
        if set(entry) != {"diff", "why"} or not all(
            isinstance(v, str) and v for v in entry.values()
        ):
            raise ValueError(
                f"{name} in survivors.toml must have a non-empty diff and why; got {entry!r}"
            )
        reasons[name] = Reason(entry["diff"], entry["why"])
    return reasons


def module_of(name: str) -> str:
    """``attnlab.masks.x_causal_mask__mutmut_3`` -> ``attnlab.masks``."""
    return name.split(".x")[0] if ".x" in name else name.rpartition(".")[0]


def build_report(
    outcomes: dict[str, str],
    diffs: dict[str, str],
    reasons: dict[str, Reason],
    wall_seconds: float | None = None,
) -> tuple[str, list[str]]:
    """The report's Markdown and the problems that make ``make mutants`` fail."""
    problems = []
    unkilled = sorted(name for name, outcome in outcomes.items() if outcome in UNKILLED)
    for name, outcome in sorted(outcomes.items()):
        if outcome not in KILLED + UNKILLED:
            problems.append(f"{name}: {outcome} (not run to the end)")
    for name in unkilled:
        reason = reasons.get(name)
        if reason is None:
            problems.append(f"{name}: {outcomes[name]} with no reason in survivors.toml")
        elif reason.diff != signature(diffs.get(name, "")):
            problems.append(f"{name}: its diff is no longer {reason.diff!r} (renumbered?)")
    for name in sorted(set(reasons) - set(unkilled)):
        problems.append(
            f"{name}: explained in survivors.toml but {outcomes.get(name, 'not in the results')}"
        )

    counts = Counter(outcomes.values())
    modules = sorted({module_of(name) for name in outcomes})
    lines = [
        "# Mutation report",
        "",
        "Written by `make mutants`: mutmut (configured in pyproject.toml's `[tool.mutmut]`)",
        "mutates each module below one change at a time and runs, against each mutant, only",
        "the selected tests that call the mutated function; `scripts/mutation_report.py`",
        "writes this file. Every mutant the tests do not kill is listed with its reason",
        "(`tests/mutants/survivors.toml`).",
        "",
        f"- Modules: {', '.join(f'`{m}`' for m in modules)}",
        f"- Mutants: {len(outcomes)}; "
        + "; ".join(f"{outcome}: {counts[outcome]}" for outcome in sorted(counts)),
    ]
    if wall_seconds is not None:
        lines.append(f"- Wall time: {wall_seconds:.0f} s")
    lines.append(f"- Problems (unexplained or stale): {len(problems)}")
    lines += ["", "| Module | Mutants | Killed | Not killed |", "| --- | ---: | ---: | ---: |"]
    for module in modules:
        mine = [outcome for name, outcome in outcomes.items() if module_of(name) == module]
        killed = sum(outcome in KILLED for outcome in mine)
        lines.append(f"| `{module}` | {len(mine)} | {killed} | {len(mine) - killed} |")
    kinds = Counter(reasons[name].why.split(":")[0] for name in unkilled if name in reasons)
    if kinds:
        lines += ["", "| Why not killed (kind) | Mutants |", "| --- | ---: |"]
        lines += [f"| {kind} | {count} |" for kind, count in sorted(kinds.items())]
    if problems:
        lines += ["", "## Problems", ""] + [f"- {problem}" for problem in problems]
    lines += ["", "## Mutants the tests do not kill", ""]
    for name in unkilled:
        reason = reasons.get(name)
        lines.append(
            f"- `{name}` ({outcomes[name]}): {reason.why if reason else '**no reason given**'}"
        )
        lines.append(f"  `{signature(diffs.get(name, ''))}`")
    return "\n".join(lines) + "\n", problems


def signature(diff: str) -> str:
    """A unified diff's changed lines, stripped, each after its sign, joined by `` | ``."""
    return " | ".join(
        line[0] + line[1:].strip()
        for line in diff.splitlines()
        if line[:1] in "+-" and line[:3] not in ("+++", "---")
    )


def mutmut_results() -> str:
    """``mutmut results --all true``, run where mutmut ran (the current directory)."""
    command = [str(MUTMUT), "results", "--all", "true"]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def mutant_diff(name: str) -> str:
    """What ``mutmut show NAME`` prints, without starting mutmut once per mutant."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    return get_diff_for_mutant(name)


def main(argv: list[str] | None = None) -> int:
    """Write the report; 1 when a mutant is unexplained, wrongly explained or unfinished."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="saved `mutmut results --all true` output")
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--wall-seconds", type=float, help="the run's wall time, for the report")
    args = parser.parse_args(argv)

    text = args.results.read_text(encoding="utf-8") if args.results else mutmut_results()
    outcomes = parse_results(text)
    reasons = load_reasons(EXPLANATIONS.read_text(encoding="utf-8"))
    diffs = {name: mutant_diff(name) for name, outcome in outcomes.items() if outcome in UNKILLED}
    report, problems = build_report(outcomes, diffs, reasons, args.wall_seconds)
    args.report.write_text(report, encoding="utf-8")
    print(f"{args.report}: {len(outcomes)} mutants, {len(problems)} problems")
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
