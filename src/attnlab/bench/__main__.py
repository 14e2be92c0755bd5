"""Command line: ``python -m attnlab.bench [--quick] [--<suite> ...|--all] [--output DIR]``.

One flag per entry of [`SUITES`][attnlab.bench.SUITES]; each chosen run writes
``<name>.json`` into ``--output``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .suites import SUITES

__all__ = ["main", "parse_args"]


def parse_args(argv: list[str] | None = None) -> tuple[list[str], argparse.Namespace]:
    """The runs the command line chose (``forward`` when it names none), and its options."""
    parser = argparse.ArgumentParser(
        prog="python -m attnlab.bench",
        description="Run attnlab's benchmarks; each run writes <name>.json into --output.",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke test")
    parser.add_argument(
        "--output",
        type=Path,
        default=Path("."),
        help="the directory to write <name>.json into (default: the current directory)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    runs = parser.add_argument_group("runs (default: --forward only)")
    for name, suite in SUITES.items():
        runs.add_argument(f"--{name}", action="store_true", help=f"{suite.help} ({name}.json)")
    runs.add_argument("--all", action="store_true", help="every run above")
    args = parser.parse_args(argv)
    chosen = [name for name in SUITES if args.all or getattr(args, name)] or ["forward"]
    return chosen, args


def main(argv: list[str] | None = None) -> None:
    """Run the chosen suites and write each one's results as ``<name>.json``."""
    chosen, args = parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    for name in chosen:
        results = SUITES[name].run(args.quick, not args.no_progress)
        out = args.output / f"{name}.json"
        out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {out}", flush=True)


if __name__ == "__main__":
    main()
