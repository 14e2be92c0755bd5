"""attnlab.check: the harness a reader points at their own causal multi-head attention.

The reference module here is written out in plain PyTorch (explicit scores, mask,
softmax), independently of the package and of SDPA; each classic bug is one switch in it.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab import AttentionCheck, check_causal_self_attention

BUGS = ("softmax_dim", "diagonal", "polarity", "scale_d_out", "view", "no_mask", "no_out_proj")


class Written(nn.Module):
    """Causal multi-head self-attention from scratch, with an optional classic bug."""

    def __init__(
        self, d_in: int, d_out: int, num_heads: int, *, bias: bool = False, bug: str = ""
    ) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_out // num_heads  # H, D
        self.d_out, self.bug = d_out, bug
        self.W_query = nn.Linear(d_in, d_out, bias=bias)
        self.W_key = nn.Linear(d_in, d_out, bias=bias)
        self.W_value = nn.Linear(d_in, d_out, bias=bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(0.5)

    def split(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        H, D = self.num_heads, self.head_dim
        if self.bug == "view":
            return x.view(B, H, T, D)  # the bug: tokens and heads scrambled
        return x.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)

    def forward(self, x: Tensor) -> Tensor:
        B, T, _ = x.shape
        queries, keys = self.split(self.W_query(x)), self.split(self.W_key(x))
        values = self.split(self.W_value(x))  # (B, H, T, D)
        attn_scores = queries @ keys.transpose(-2, -1)  # (B, H, T, T)
        future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
        if self.bug == "diagonal":
            future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=0)
        if self.bug == "polarity":
            future = ~future
        if self.bug != "no_mask":
            attn_scores = attn_scores.masked_fill(future, float("-inf"))
        width = self.d_out if self.bug == "scale_d_out" else self.head_dim
        dim = -2 if self.bug == "softmax_dim" else -1
        attn_weights = self.dropout(torch.softmax(attn_scores / math.sqrt(width), dim=dim))
        context_vecs = (attn_weights @ values).transpose(1, 2).reshape(B, T, self.d_out)
        if self.bug == "no_out_proj":
            return context_vecs
        out: Tensor = self.out_proj(context_vecs)
        return out


def _written(num_heads: int = 2, **kwargs: object) -> Written:
    torch.manual_seed(0)
    return Written(6, 12, num_heads, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("num_heads", [1, 3, 4])
@pytest.mark.parametrize("bias", [False, True])
def test_a_correct_module_passes_with_any_heads_and_biases(num_heads: int, bias: bool) -> None:
    """Written right, with or without biases and for several H, the check passes."""
    check = check_causal_self_attention(
        _written(num_heads, bias=bias), num_heads, batch=3, tokens=7
    )
    assert check.passed, check
    assert check.max_diff < 1e-5
    assert str(check).startswith(f"PASS (B=3, T=7, H={num_heads})")


@pytest.mark.parametrize("bug", BUGS)
def test_each_classic_bug_fails(bug: str) -> None:
    """Every classic bug is caught, with a reason naming a token."""
    check = check_causal_self_attention(_written(bug=bug), 2)
    assert not check.passed
    assert str(check).startswith("FAIL (B=2, T=5, H=2): wrong from token ")


def test_the_report_names_where_a_bug_starts() -> None:
    """The first query sees only itself, so a wrong scale shows from token 1; a masked
    diagonal leaves the first token nothing to attend to (NaN there)."""
    assert (
        "wrong from token 1 on"
        in check_causal_self_attention(_written(bug="scale_d_out"), 2).problem
    )
    diagonal = check_causal_self_attention(_written(bug="diagonal"), 2)
    assert diagonal.problem == "wrong from token 0 on (NaN at tokens [0])"
    assert math.isnan(diagonal.max_diff)


def test_the_check_uses_the_heads_it_is_told() -> None:
    """A 2-head module checked as 3 heads fails: the scale and the split differ."""
    assert not check_causal_self_attention(_written(2), 3).passed


@pytest.mark.parametrize(
    ("bug", "hint"),
    [
        ("no_out_proj", "a one-token input (its one weight is 1"),
        ("diagonal", "a one-token input gives NaN: the mask hides a token's own key"),
        ("diagonal", "(masked too, or the mask reversed"),
        ("polarity", "a one-token input gives NaN: the mask hides a token's own key"),
        ("polarity", "or the mask reversed: masked_fill fills where True)"),
        ("view", "comes out wrong: the split into heads, or a softmax over the wrong axis"),
        ("softmax_dim", "comes out wrong: the split into heads, or a softmax over the wrong"),
        ("no_mask", "it equals attention without the causal mask"),
        ("scale_d_out", "it equals attention scaled by 1/sqrt(d_out)"),
    ],
)
def test_the_hint_names_the_stage_that_is_wrong(bug: str, hint: str) -> None:
    """Each bug trips the probe meant for its stage: a one-token input for the
    projections and out_proj (token 0 wrong, at any scale or softmax axis), NaN there
    for a mask hiding the diagonal (masked too, or reversed), one token repeated for the
    split and the softmax's axis, and the mask-less and 1/sqrt(d_out) references for the
    last two."""
    check = check_causal_self_attention(_written(bug=bug), 2)
    assert hint in check.hint, check
    assert f"hint: {check.hint}" in " ".join(str(check).split())  # wrapped at 88 columns
    assert all(len(line) <= 88 for line in str(check).splitlines()[1:])


def test_a_correct_module_gets_no_hint() -> None:
    assert check_causal_self_attention(_written(), 2).hint == ""


def test_a_module_random_in_eval_mode_is_flagged() -> None:
    """Dropout that ignores self.training (F.dropout with training=True) still drops in
    eval mode: two calls differ, and the report says so before comparing anything."""

    class DropoutAlwaysOn(Written):
        def forward(self, x: Tensor) -> Tensor:
            return F.dropout(super().forward(x), p=0.1, training=True)  # the bug

    torch.manual_seed(0)
    check = check_causal_self_attention(DropoutAlwaysOn(6, 12, 2), 2)
    assert not check.passed
    assert check.problem.startswith("two calls in evaluation mode differ (largest difference ")
    assert "dropout must follow self.training" in check.hint


def test_a_deterministic_nan_is_not_called_random() -> None:
    """NaN in both calls, at the same places, is a wrong output, not a random one."""
    check = check_causal_self_attention(_written(bug="diagonal"), 2)
    assert check.problem == "wrong from token 0 on (NaN at tokens [0])"


def test_a_wrong_num_heads_is_named_from_the_modules_attribute() -> None:
    """A module whose num_heads attribute differs from the check's is told so."""
    check = check_causal_self_attention(_written(2), 3)
    assert check.hint == "module.num_heads is 2 but the check was told num_heads=3"


def test_a_wrong_num_heads_is_found_without_the_attribute() -> None:
    """Without a num_heads attribute, the check tries the head counts dividing d_out and
    names the one the module matches."""

    class Anonymous(Written):
        def __init__(self) -> None:
            super().__init__(6, 12, 4)
            del self.num_heads  # the heads live only in split: 4 of width 3

        def split(self, x: Tensor) -> Tensor:
            B, T, _ = x.shape
            return x.view(B, T, 4, 3).transpose(1, 2)

    torch.manual_seed(0)
    anonymous = Anonymous()
    check = check_causal_self_attention(anonymous, 2)
    assert check.hint == (
        "it equals causal attention with H=4 heads, but the check was told num_heads=2"
    )


def test_the_modules_mode_is_restored_and_dropout_is_off_during_the_check() -> None:
    """Dropout p=0.5 would make a training-mode run differ: the check runs in eval mode,
    then gives the module back in the mode it had."""
    module = _written()
    assert module.training
    assert check_causal_self_attention(module, 2).passed
    assert module.training
    module.eval()
    check_causal_self_attention(module, 2)
    assert not module.training


def test_a_wrong_output_shape_is_a_failure_not_a_crash() -> None:
    """A module that forgets out_proj's width is reported, with both shapes."""

    class Narrow(Written):
        def forward(self, x: Tensor) -> Tensor:
            return super().forward(x)[..., :4]

    torch.manual_seed(0)
    check = check_causal_self_attention(Narrow(6, 12, 2), 2)
    assert not check.passed
    assert check.problem == "the output must have shape (B, T, d_out) = (2, 5, 12); got (2, 5, 4)"


def test_equal_to_pytorchs_own_module() -> None:
    """nn.MultiheadAttention with a causal mask, its projections exposed under the site's
    names, passes: a reference the package did not write."""

    class TorchBacked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mha = nn.MultiheadAttention(8, 2, batch_first=True, bias=False)
            d = 8
            self.W_query, self.W_key, self.W_value = (nn.Linear(d, d, bias=False) for _ in range(3))
            self.out_proj = self.mha.out_proj
            self.out_proj.bias = nn.Parameter(torch.randn(d))
            with torch.no_grad():
                weight = torch.cat([self.W_query.weight, self.W_key.weight, self.W_value.weight])
                self.mha.in_proj_weight.copy_(weight)  # (3 * d, d)

        def forward(self, x: Tensor) -> Tensor:
            T = x.shape[1]
            future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)  # True = ignore
            out, _ = self.mha(x, x, x, attn_mask=future, need_weights=False)
            return out

    torch.manual_seed(0)
    assert check_causal_self_attention(TorchBacked(), 2).passed


def test_the_result_is_a_frozen_record() -> None:
    check = check_causal_self_attention(_written(), 2)
    assert isinstance(check, AttentionCheck)
    with pytest.raises(AttributeError):
        check.passed = False  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ("not_module", TypeError, "module must be an nn.Module; got str"),
        ("no_out_proj", TypeError, "module.out_proj must be an nn.Linear; got nothing"),
        (
            "narrow_key",
            ValueError,
            "module.W_key must map d_in=6 to d_out=12 like W_query; got Linear(6, 8)",
        ),
        ("heads", ValueError, "num_heads must divide d_out=12; got num_heads=5"),
        ("atol", ValueError, "atol must be a positive float; got 0.0"),
        ("tokens", ValueError, "tokens must be a positive int; got 0"),
        ("key_bias", ValueError, "module.W_key must have a bias like W_query (qkv_bias) has"),
    ],
)
def test_bad_input_is_refused_before_any_arithmetic(
    change: str, error: type[Exception], message: str
) -> None:
    """Each refusal names the argument, what it got and what it wanted."""
    module = _written()
    kwargs: dict[str, object] = {}
    target: object = module
    if change == "not_module":
        target = "attention"
    elif change == "no_out_proj":
        del module.out_proj
    elif change == "narrow_key":
        module.W_key = nn.Linear(6, 8, bias=False)
    elif change == "key_bias":
        module.W_key = nn.Linear(6, 12, bias=True)
    elif change in ("atol", "tokens"):
        kwargs[change] = {"atol": 0.0, "tokens": 0}[change]
    heads = 5 if change == "heads" else 2
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_causal_self_attention(target, heads, **kwargs)  # type: ignore[arg-type]


def test_the_chapters_class_is_the_one_examples_keeps() -> None:
    """The from-scratch chapter writes MyCausalMultiHeadAttention and later blocks import
    examples.MyCausalMultiHeadAttention: the two copies say the same, line for line."""
    import inspect

    from support import DOCS

    from attnlab import examples

    page = (DOCS / "transformer" / "from-scratch.md").read_text(encoding="utf-8")
    start = page.index("class MyCausalMultiHeadAttention(nn.Module):")
    written = page[start : page.index("\n\n", start)].splitlines()
    kept = inspect.getsource(examples.MyCausalMultiHeadAttention).splitlines()
    assert written == [line for line in kept if line.strip()]


def test_the_kept_class_passes_the_check() -> None:
    """examples.MyCausalMultiHeadAttention, with dropout and biases, is correct."""
    from attnlab import examples

    torch.manual_seed(1)
    module = examples.MyCausalMultiHeadAttention(8, 12, 4, dropout=0.2, qkv_bias=True)
    assert check_causal_self_attention(module, 4, batch=3, tokens=9).passed
