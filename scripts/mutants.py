"""Mutation run: apply deliberate bugs to a copy of the package and see the tests fail.

``make mutants`` (not part of ``make test``) copies the working tree's ``src/``, ``tests/``,
and ``pyproject.toml`` into a temporary directory, checks that the relevant tests pass
there unchanged (the baseline), then applies each mutant of ``MUTANTS`` in turn (one
exact text substitution in one source file of the copy), runs only that mutant's tests
(``pytest -x``, the copy's ``src/`` first on ``PYTHONPATH``) and restores the file. A
mutant is *killed* when its tests fail, *survives* when they pass. The repository's own
files are never touched.

The report (``tests/mutants/REPORT.md`` by default) lists every mutant with its outcome
and time. A survivor is acceptable only as an *equivalent* mutant: one that no input
can tell from the original, with the reason written in ``MUTANTS`` (``equivalent=``).
The exit status is 1 when a mutant survives unexplained, when an equivalent one is
killed (its explanation is then wrong), when a mutant's text is no longer in its file
(the code moved on: update the mutant), or when the baseline fails.

Usage::

    python scripts/mutants.py [--only NAME ...] [--report PATH] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
COPIED = ("src", "tests", "hooks", "pyproject.toml")
DEFAULT_REPORT = REPO_ROOT / "tests" / "mutants" / "REPORT.md"
TIMEOUT_S = 240  # one mutant's tests; a mutant that hangs them counts as killed
BASELINE_TIMEOUT_S = 900  # every selected test file, once, unmutated

MASKS = ("tests/unit/test_masks.py", "tests/unit/test_causal.py")
FUNCTIONAL = ("tests/unit/test_functional.py", "tests/contract/test_torch_parity.py")
FLASH = ("tests/unit/test_flash.py", "tests/unit/test_flash_backward.py")
GQA = ("tests/unit/test_gqa.py",)
ROTARY = ("tests/unit/test_rotary.py",)
KV_CACHE = ("tests/unit/test_kv_cache.py",)
LLAMA = ("tests/llama/test_llama_reference.py",)
TOKENIZER = ("tests/llama/test_llama_reference.py", "tests/llama/test_llama_model.py")
RECALL = ("tests/unit/test_recall.py",)
SAMPLING = ("tests/llama/test_llama_temperature.py",)
CHECKS = ("tests/contract/test_errors.py",)


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: ``old`` (found exactly once in ``path``) becomes ``new``."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    equivalent: str = ""  # why no input tells it from the original, if none can


MUTANTS = (
    # --- masks -------------------------------------------------------------------------
    Mutant(
        "causal-mask-hides-the-diagonal",
        "src/attnlab/masks.py",
        "return torch.ones(L, S, dtype=torch.bool, device=device).tril()",
        "return torch.ones(L, S, dtype=torch.bool, device=device).tril(-1)",
        MASKS,
    ),
    Mutant(
        "window-one-key-too-many",
        "src/attnlab/masks.py",
        "return (keys <= positions) & (keys > positions - window)  # (L, S)",
        "return (keys <= positions) & (keys >= positions - window)  # (L, S)",
        MASKS + GQA,
    ),
    Mutant(
        "window-not-end-aligned",
        "src/attnlab/masks.py",
        "positions = torch.arange(L, device=device).unsqueeze(-1) + (S - L)  # (L, 1)",
        "positions = torch.arange(L, device=device).unsqueeze(-1)  # (L, 1)",
        MASKS + GQA,
    ),
    Mutant(
        "decode-step-skips-a-window-equal-to-S",
        "src/attnlab/masks.py",
        "if (window is None or window >= S) and L == 1:",
        "if (window is None or window > S) and L == 1:",
        MASKS + GQA,
    ),
    Mutant(
        "bool-mask-inverted",
        "src/attnlab/masks.py",
        'return attn_scores.masked_fill(~attn_mask, float("-inf"))',
        'return attn_scores.masked_fill(attn_mask, float("-inf"))',
        MASKS + FUNCTIONAL,
    ),
    Mutant(
        "fully-masked-row-shifted-by-inf",
        "src/attnlab/masks.py",
        "return torch.where(torch.isneginf(row_max), torch.zeros_like(row_max), row_max)",
        "return row_max",
        MASKS + FUNCTIONAL,
    ),
    # --- functional attention ----------------------------------------------------------
    Mutant(
        "scale-1-over-E",
        "src/attnlab/functional.py",
        "scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale",
        "scale = 1.0 / query.shape[-1] if scale is None else scale",
        FUNCTIONAL,
    ),
    Mutant(
        "softmax-over-queries",
        "src/attnlab/functional.py",
        "return _softmax(apply_mask(attn_scores, attn_mask), dim=-1)",
        "return _softmax(apply_mask(attn_scores, attn_mask), dim=-2)",
        FUNCTIONAL,
    ),
    Mutant(
        "gqa-heads-tiled-not-interleaved",
        "src/attnlab/functional.py",
        "return tensor.repeat_interleave(group, dim=-3)",
        "return torch.cat([tensor] * group, dim=-3)",
        FUNCTIONAL + GQA,
    ),
    Mutant(
        "softmax-without-its-max",
        "src/attnlab/functional.py",
        "x_max = row_shift(x.amax(dim=dim, keepdim=True))",
        "x_max = torch.zeros_like(x.amax(dim=dim, keepdim=True))",
        FUNCTIONAL,
    ),
    Mutant(
        "softmax-shift-detached",
        "src/attnlab/functional.py",
        "x_max = row_shift(x.amax(dim=dim, keepdim=True))",
        "x_max = row_shift(x.amax(dim=dim, keepdim=True)).detach()",
        (*FUNCTIONAL, "tests/unit/test_flash_backward.py"),
        equivalent=(
            "softmax(x - m) does not depend on m, so the gradient through the shift is "
            "zero: detaching it changes neither the output nor (beyond rounding) the "
            "gradient; PyTorch's own softmax does the same"
        ),
    ),
    Mutant(
        "kernel-checks-its-query-again",
        "src/attnlab/functional.py",
        "    if call.group > 1:  # (N, ..., Hkv, S, E) -> (N, ..., Hkv * group, S, E)\n",
        '    query = check_floating("query", query)\n'
        "    if call.group > 1:  # (N, ..., Hkv, S, E) -> (N, ..., Hkv * group, S, E)\n",
        CHECKS,
    ),
    # --- flash -------------------------------------------------------------------------
    Mutant(
        "flash-old-sums-not-rescaled",
        "src/attnlab/flash.py",
        "acc = acc * correction + weights @ v[:, tile.j0 : tile.j1]",
        "acc = acc + weights @ v[:, tile.j0 : tile.j1]",
        FLASH,
    ),
    Mutant(
        "flash-running-sum-not-rescaled",
        "src/attnlab/flash.py",
        "row_sum = row_sum * correction + weights.sum(dim=-1, keepdim=True)",
        "row_sum = row_sum + weights.sum(dim=-1, keepdim=True)",
        FLASH,
    ),
    Mutant(
        "flash-max-not-carried",
        "src/attnlab/flash.py",
        "        row_max = new_max\n    output = divide_rows(acc, row_sum)",
        "    output = divide_rows(acc, row_sum)",
        FLASH,
    ),
    Mutant(
        "flash-lse-without-shift",
        "src/attnlab/flash.py",
        "lse = (shift + torch.log(row_sum)).squeeze(-1)",
        "lse = torch.log(row_sum).squeeze(-1)",
        FLASH,
    ),
    # --- grouped-query attention -------------------------------------------------------
    Mutant(
        "gqa-window-plus-one",
        "src/attnlab/gqa.py",
        "return decoder_mask(L, S, self.window, device=device)",
        "return decoder_mask(L, S, None if self.window is None else self.window + 1, "
        "device=device)",
        GQA,
    ),
    Mutant(
        "gqa-group-of-one",
        "src/attnlab/attention_heads.py",
        "group=self.num_heads // self.num_kv_heads,",
        "group=1,",
        GQA,
    ),
    Mutant(
        "heads-split-without-transpose",
        "src/attnlab/attention_heads.py",
        "return x.view(*x.shape[:-1], x.shape[-1] // D, D).transpose(-3, -2)",
        "return x.reshape(*x.shape[:-2], x.shape[-1] // D, x.shape[-2], D)",
        (*GQA, "tests/unit/test_multihead.py"),
    ),
    # --- rotary ------------------------------------------------------------------------
    Mutant(
        "rotary-frequencies-over-D-not-2i-over-D",
        "src/attnlab/rotary.py",
        "exponents = torch.arange(0, D, 2, dtype=torch.int64, device=device).float() / D",
        "exponents = torch.arange(0, D // 2, dtype=torch.int64, device=device).float() / D",
        ROTARY,
    ),
    Mutant(
        "rotary-rotate-half-sign",
        "src/attnlab/rotary.py",
        "return torch.cat([-x2, x1], dim=-1)",
        "return torch.cat([x2, -x1], dim=-1)",
        ROTARY,
    ),
    Mutant(
        "rotary-pairs-interleaved",
        "src/attnlab/rotary.py",
        "emb = torch.cat([angles, angles], dim=-1)  # (T, D)",
        "emb = angles.repeat_interleave(2, dim=-1)  # (T, D)",
        ROTARY,
    ),
    Mutant(
        "rotary-default-base-1000",
        "src/attnlab/rotary.py",
        "def __init__(self, head_dim: int, theta: float = 10000.0) -> None:",
        "def __init__(self, head_dim: int, theta: float = 1000.0) -> None:",
        ROTARY,
    ),
    # --- KV cache ----------------------------------------------------------------------
    Mutant(
        "cache-keeps-only-the-new-values",
        "src/attnlab/kv_cache.py",
        "self.values = torch.cat([self.values, values], dim=-2)",
        "self.values = torch.cat([self.values[..., :0, :], values], dim=-2)",
        KV_CACHE + GQA,
    ),
    Mutant(
        "cache-positions-restart-at-zero",
        "src/attnlab/llama/model.py",
        "positions = torch.arange(past, past + ids.shape[1], device=ids.device)  # (T,)",
        "positions = torch.arange(0, ids.shape[1], device=ids.device)  # (T,)",
        LLAMA,
    ),
    # --- the Llama model ---------------------------------------------------------------
    Mutant(
        "rmsnorm-eps-outside-the-root",
        "src/attnlab/llama/model.py",
        "return self.weight * (x32 * torch.rsqrt(mean_square + self.eps)).to(x.dtype)",
        "return self.weight * (x32 * (torch.rsqrt(mean_square) + self.eps)).to(x.dtype)",
        LLAMA,
    ),
    Mutant(
        "swiglu-silu-on-the-up-branch",
        "src/attnlab/llama/model.py",
        "hidden = F.silu(self.gate_proj(x)) * self.up_proj(x)  # (..., ffn_dim)",
        "hidden = self.gate_proj(x) * F.silu(self.up_proj(x))  # (..., ffn_dim)",
        LLAMA,
    ),
    Mutant(
        "block-without-the-ffn-residual",
        "src/attnlab/llama/model.py",
        "x = x + self.ffn(self.ffn_norm(x))  # residual: (B, T, d_model)",
        "x = self.ffn(self.ffn_norm(x))  # residual: (B, T, d_model)",
        LLAMA,
    ),
    Mutant(
        "rmsnorm-default-eps-1e-6",
        "src/attnlab/llama/model.py",
        "def __init__(self, d_model: int, eps: float = 1e-5) -> None:",
        "def __init__(self, d_model: int, eps: float = 1e-6) -> None:",
        ("tests/llama/test_llama_model.py",),
    ),
    # --- generation, the recall model: the bugs issue 28 found surviving ----------------
    Mutant(
        "generate-ignores-its-temperature",
        "src/attnlab/llama/generate.py",
        "scores = (below_max.double() / sampling.temperature).float()",
        "scores = below_max.double().float()",
        SAMPLING,
    ),
    Mutant(
        "recall-scores-summed-over-heads",
        "src/attnlab/recall.py",
        "return scores.mean(dim=0)",
        "return scores.sum(dim=0)",
        RECALL,
    ),
    Mutant(
        "recall-scores-without-the-query-gain",
        "src/attnlab/recall.py",
        "attention.W_query(embeddings * model.query_gain)",
        "attention.W_query(embeddings)",
        RECALL,
    ),
    # --- the tokenizer's pre-tokenisation ----------------------------------------------
    Mutant(
        "digits-grouped",
        "src/attnlab/llama/tokenizer.py",
        "pre_tokenizers.Digits(individual_digits=True),",
        "pre_tokenizers.Digits(individual_digits=False),",
        TOKENIZER,
    ),
    Mutant(
        "prefix-space-added",
        "src/attnlab/llama/tokenizer.py",
        "pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),",
        "pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),",
        TOKENIZER,
    ),
    Mutant(
        "no-gpt2-regex-split",
        "src/attnlab/llama/tokenizer.py",
        "pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),",
        "pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),",
        TOKENIZER,
    ),
)


@dataclass
class Outcome:
    """What running one mutant's tests gave."""

    mutant: Mutant
    status: str  # killed, survived, equivalent, not-applied
    seconds: float
    detail: str = ""

    @property
    def acceptable(self) -> bool:
        """Killed, or equivalent (explained): anything else needs a test or a reason."""
        return self.status in {"killed", "equivalent"}


def copy_tree(destination: Path) -> None:
    """The working tree's files the tests need, without caches."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in COPIED:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=ignore)
        else:
            shutil.copy2(source, destination / name)


def run_tests(tree: Path, tests: tuple[str, ...], timeout: float = TIMEOUT_S) -> tuple[int, str]:
    """``pytest -x`` on ``tests`` in ``tree`` (its ``src`` first); exit status, last line."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-n0", "-p", "no:cacheprovider"]
    try:
        result = subprocess.run(
            [*command, *tests],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:.0f} s"
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return result.returncode, lines[-1] if lines else result.stderr.strip()[-200:]


def table_safe(summary: str) -> str:
    """One line of pytest's output, fit for a Markdown table cell."""
    return summary.replace("|", "/")


def run_mutant(tree: Path, mutant: Mutant) -> Outcome:
    """Apply ``mutant`` to ``tree``, run its tests, restore the file."""
    path = tree / mutant.path
    original = path.read_text(encoding="utf-8")
    count = original.count(mutant.old)
    if count != 1:
        return Outcome(mutant, "not-applied", 0.0, f"text found {count} times")
    path.write_text(original.replace(mutant.old, mutant.new), encoding="utf-8")
    start = time.perf_counter()
    try:
        status, summary = run_tests(tree, mutant.tests)
    finally:
        path.write_text(original, encoding="utf-8")
    seconds = time.perf_counter() - start
    if status == 0:
        kind = "equivalent" if mutant.equivalent else "survived"
        return Outcome(mutant, kind, seconds, table_safe(summary))
    kind = "killed" if not mutant.equivalent else "killed-but-marked-equivalent"
    return Outcome(mutant, kind, seconds, table_safe(summary))


def report_text(outcomes: list[Outcome], baseline: str, seconds: float) -> str:
    """The Markdown report: a table of every mutant, then the equivalent ones explained."""
    killed = sum(outcome.status == "killed" for outcome in outcomes)
    lines = [
        "# Mutation report",
        "",
        "Written by `make mutants` (`scripts/mutants.py`): each mutant is one deliberate",
        "bug applied to a copy of the working tree, then only its tests run (`pytest -x`).",
        "",
        f"- Mutants: {len(outcomes)}; killed: {killed}; "
        f"equivalent (explained below): {sum(o.status == 'equivalent' for o in outcomes)}; "
        f"unexplained survivors: {sum(not o.acceptable for o in outcomes)}",
        f"- Baseline (every selected test file, unmutated): {baseline}",
        f"- Wall time: {seconds:.0f} s",
        "",
        "| Mutant | File | Outcome | Tests' last line | Seconds |",
        "| --- | --- | --- | --- | ---: |",
    ]
    for outcome in outcomes:
        mutant = outcome.mutant
        lines.append(
            f"| `{mutant.name}` | `{mutant.path.removeprefix('src/attnlab/')}` | "
            f"{outcome.status} | {outcome.detail} | {outcome.seconds:.1f} |"
        )
    equivalents = [outcome.mutant for outcome in outcomes if outcome.mutant.equivalent]
    if equivalents:
        lines += ["", "## Equivalent mutants", ""]
        lines += [f"- `{mutant.name}`: {mutant.equivalent}." for mutant in equivalents]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the mutants, write the report; 0 when every mutant is killed or explained."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", nargs="*", default=[], help="run only these mutants")
    parser.add_argument("--report", type=Path, default=DEFAULT_REPORT)
    parser.add_argument("--keep", action="store_true", help="keep the copied tree")
    args = parser.parse_args(argv)
    mutants = [m for m in MUTANTS if not args.only or m.name in args.only]
    start = time.perf_counter()
    tree = Path(tempfile.mkdtemp(prefix="attnlab-mutants-"))
    try:
        copy_tree(tree)
        selected = tuple(dict.fromkeys(test for m in mutants for test in m.tests))
        status, baseline = run_tests(tree, selected, BASELINE_TIMEOUT_S)
        print(f"baseline: {baseline}", flush=True)
        if status != 0:
            print("the unmutated tests fail: no mutant can be judged", file=sys.stderr)
            return 1
        outcomes = []
        for mutant in mutants:
            outcome = run_mutant(tree, mutant)
            print(f"{outcome.status:>12}  {mutant.name}  ({outcome.seconds:.0f} s)", flush=True)
            outcomes.append(outcome)
    finally:
        if args.keep:
            print(f"tree kept in {tree}")
        else:
            shutil.rmtree(tree, ignore_errors=True)
    text = report_text(outcomes, baseline, time.perf_counter() - start)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(text, encoding="utf-8")
    print(f"report: {args.report}")
    return 0 if all(outcome.acceptable for outcome in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
