"""The first pass teaches every term before it uses it (issue 39).

The first pass is the nav's first section (``hooks/roadmap.py`` reads it): a newcomer's
first hour, with a PyTorch primer among its pages. Each term a newcomer may not know,
the ones issue 39 found used before they were taught and those of the primer, must be
taught where it first appears on the pass, read in nav order, code included: in **bold**
(the sentence that defines it), in a heading (the section that teaches it), or in the
text of a link to the pass page that teaches it.
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path

import pytest
from support import DOCS, main_line_steps

FIRST_PASS = next(step.pages for step in main_line_steps() if step.title == "First pass")
PRIMER = "start/pytorch-primer.md"
PRIMER_WORDS = 1_200

#: Term -> the pattern of its uses (case-insensitive). Issue 39's list, then the primer's.
TERMS = {
    "encoder": r"\bencoders?\b",
    "decoder": r"\bdecoders?\b",
    "hidden state": r"\bhidden states?\b",
    "RNN": r"\bRNNs?\b",
    "batch": r"\bbatch(?:es)?\b",
    "unsqueeze": r"\bunsqueeze\b",
    "logit": r"\blogits?\b",
    "residual": r"\bresidual\b",
    "LayerNorm": r"\blayer ?norm\b",
    "GELU": r"\bgelu\b",
    "gradient": r"\bgradients?\b",
    "detach": r"\bdetach\b",
    "grad_fn": r"\bgrad_fn\b",
    "loss": r"\bloss(?:es)?\b",
    "autograd": r"\bautograd\b",
    "backward": r"\bbackward\b",
    "learning rate": r"\blearning rate\b",
    "expectation": r"\bexpectation\b",
    "variance": r"\bvariance\b",
    "diag": r"\bdiag\b",
    "vmap": r"\bvmap\b",
    "jacrev": r"\bjacrev\b",
    "dropout": r"\bdropout\b",
    "contiguous": r"\bcontiguous\b",
    "fused kernel": r"\bfused\b",
    "profiler": r"\bprofiler\b",
    "state_dict": r"\bstate_dict\b",
    "Adam": r"\badam\b",
    "cross-entropy": r"\bcross[- ]entropy\b",
    "zero_grad": r"\bzero_grad\b",
    "tensor": r"\btensors?\b(?!\s*\()",  # not the function torch.tensor(...)
    "shape": r"\bshapes?\b",
    "broadcasting": r"\bbroadcast",
    "transpose": r"\btranspose\b",
    "view": r"\.view\(|`view`",
    "reshape": r"\breshape\b",
    "nn.Linear": r"\bnn\.Linear\b",
    "nn.Module": r"\bnn\.Module\b",
    "requires_grad": r"\brequires_grad\b",
    "optimiser": r"\boptimi[sz]er\b",
    "no_grad": r"\bno_grad\b",
    "manual_seed": r"\bmanual_seed\b",
    "token": r"\btokens?\b",
    "embedding": r"\bembeddings?\b",
    "head": r"\bheads?\b",
    "weight": r"\bweights?\b",
    "dot product": r"\bdot products?\b",
    "softmax": r"\bsoftmax\b",
    "query": r"\bquer(?:y|ies)\b",
    "context vector": r"\bcontext vectors?\b",
    "causal mask": r"\bcausal\b|\bmask\b",
}
_NOT_READ = re.compile(r"<!--.*?-->|!\[[^\]]*\]\([^)]*\)", re.S)  # comments, images
_BOLD = re.compile(r"\*\*(.+?)\*\*", re.S)
_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} .*$", re.M)
_FENCE = re.compile(r"^(\s*)(`{3,}).*?^\1\2\s*$", re.S | re.M)


def _spans(pattern: re.Pattern[str], text: str, group: int = 0) -> list[tuple[int, int]]:
    return [match.span(group) for match in pattern.finditer(text)]


def _links_into_the_pass(page: str, text: str) -> list[tuple[int, int]]:
    """The spans of link texts whose target is a first-pass page."""
    spans = []
    for match in _LINK.finditer(text):
        target = match[2].split("#")[0]
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page), target))
        if not target or resolved in FIRST_PASS:
            spans.append(match.span(1))
    return spans


def first_uses(pages: tuple[str, ...]) -> dict[str, tuple[str, str, bool]]:
    """Each term's first use on ``pages``: (page, the line, whether it is taught there)."""
    found: dict[str, tuple[str, str, bool]] = {}
    for page in pages:
        text = _NOT_READ.sub(" ", (DOCS / page).read_text(encoding="utf-8"))
        prose = _FENCE.sub(lambda fence: " " * len(fence[0]), text)  # `x ** 2` is not bold
        teaching = [
            *_spans(_BOLD, prose),
            *_spans(_HEADING, text),
            *_links_into_the_pass(page, text),
        ]
        for term, pattern in TERMS.items():
            match = None if term in found else re.search(pattern, text, re.I)
            if match is not None:
                taught = any(start <= match.start() < end for start, end in teaching)
                line = text[text.rfind("\n", 0, match.start()) + 1 : text.find("\n", match.end())]
                found[term] = (page, line.strip(), taught)
    return found


def test_the_first_pass_holds_the_primer() -> None:
    assert FIRST_PASS[0] == "start/what-attention-does.md"
    assert PRIMER in FIRST_PASS
    assert all((DOCS / page).is_file() for page in FIRST_PASS)


def test_the_primer_is_short() -> None:
    from test_budgets import prose_words

    words = prose_words((DOCS / PRIMER).read_text(encoding="utf-8"))
    assert words <= PRIMER_WORDS, f"the primer holds {words} words of prose"


def test_home_links_the_primer() -> None:
    assert f"]({PRIMER})" in (DOCS / "index.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("markdown", "taught"),
    [
        ("A **tensor** is an array.\n\nx = torch.tensor(1)\n", True),
        ("## Tensors and shapes\n\nA tensor.\n", True),
        ("See [tensors](pytorch-primer.md#tensors).\n", True),
        ("A tensor is an array.\n\nA **tensor**.\n", False),
        ("See [tensors](../walkthrough/scaling.md).\n", False),
    ],
)
def test_a_first_use_is_taught_only_in_bold_a_heading_or_a_link_into_the_pass(
    markdown: str, taught: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "start" / "page.md"
    page.parent.mkdir()
    page.write_text(markdown, encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "DOCS", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "FIRST_PASS", ("start/page.md", PRIMER))
    assert first_uses(("start/page.md",))["tensor"][2] is taught


def test_no_term_is_used_on_the_first_pass_before_it_is_taught() -> None:
    untaught = [
        f"{term!r} first used on {page}, not taught there: {line}"
        for term, (page, line, taught) in first_uses(FIRST_PASS).items()
        if not taught
    ]
    assert not untaught, "\n".join(untaught)
