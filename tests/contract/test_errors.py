"""Bad input raises a clear error, naming the argument, what it got and what it wanted."""

from __future__ import annotations

import sys

import pytest
import torch

import attnlab.flash
import attnlab.functional
from attnlab import (
    CausalAttention,
    GroupedQueryAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttentionV1,
    SelfAttentionV2,
    _validation,
    attend,
    attention_scores,
    attention_weights,
    attention_with_weights,
    causal_mask,
    context_vectors,
    flash_attention,
    scaled_dot_product_attention,
    softmax,
    softmax_naive,
)
from attnlab.examples import tokenize

q = torch.randn(2, 3, 4)
k = torch.randn(2, 5, 4)
v = torch.randn(2, 5, 6)

SDPA_CASES = [
    (dict(query=[[1.0]]), TypeError, r"query must be a torch.Tensor; got list"),
    (
        dict(query=q.long()),
        TypeError,
        r"query must be a floating-point tensor .* got dtype torch.int64",
    ),
    (dict(key=k.double()), TypeError, r"must share one dtype; got torch.float32, torch.float64"),
    (
        dict(query=torch.randn(4)),
        ValueError,
        r"query must have shape \(N, ..., L, E\) .* got shape \(4,\)",
    ),
    (
        dict(key=torch.randn(2, 5, 3)),
        ValueError,
        r"key must have shape \(N, ..., S, E\) with E = 4 .* got shape \(2, 5, 3\)",
    ),
    (
        dict(value=torch.randn(2, 4, 6)),
        ValueError,
        r"value must have shape \(N, ..., S, Ev\) with S = 5 .* got shape \(2, 4, 6\)",
    ),
    (
        dict(key=torch.randn(3, 5, 4), value=torch.randn(3, 5, 6)),
        ValueError,
        r"broadcastable batch dims .* \(2, 3, 4\), \(3, 5, 4\)",
    ),
    (
        dict(attn_mask=torch.ones(3, 4, dtype=torch.bool)),
        ValueError,
        r"attn_mask must broadcast to \(N, ..., L, S\) = \(2, 3, 5\); got shape \(3, 4\)",
    ),
    (
        dict(attn_mask=torch.ones(4, 2, 3, 5, dtype=torch.bool)),
        ValueError,
        r"attn_mask must broadcast .* got shape \(4, 2, 3, 5\)",
    ),
    (
        dict(attn_mask=torch.ones(3, 5, dtype=torch.int64)),
        TypeError,
        r"attn_mask must be a bool tensor .* got dtype torch.int64",
    ),
    (
        dict(attn_mask=torch.ones(3, 5, dtype=torch.float64)),
        TypeError,
        r"float tensor of the query's dtype torch.float32",
    ),
    (
        dict(attn_mask=torch.ones(3, 5, dtype=torch.bool), is_causal=True),
        ValueError,
        r"attn_mask and is_causal=True were both given",
    ),
    (dict(dropout_p=1.5), ValueError, r"dropout_p must be in \[0, 1\]; got 1.5"),
    (dict(dropout_p=-0.1), ValueError, r"dropout_p must be in \[0, 1\]; got -0.1"),
    (dict(scale="big"), TypeError, r"scale must be a float or None; got str"),
]


@pytest.mark.parametrize(("overrides", "error", "message"), SDPA_CASES)
@pytest.mark.parametrize("function", ["explicit", "torch"])
def test_attention_rejects_bad_input_before_computing(
    overrides: dict[str, object], error: type[Exception], message: str, function: str
) -> None:
    """Each bad argument gets its own message, on every backend."""
    args: dict[str, object] = dict(query=q, key=k, value=v) | overrides
    with pytest.raises(error, match=message):
        if function == "explicit":
            scaled_dot_product_attention(**args)  # type: ignore[arg-type]
        else:
            attend(**args, backend="torch")  # type: ignore[arg-type]


ENTRY_POINTS = {
    "scaled_dot_product_attention": scaled_dot_product_attention,
    "attention_with_weights": attention_with_weights,
    "flash_attention": flash_attention,
    **{
        f"attend-{backend}": lambda backend=backend, **args: attend(**args, backend=backend)
        for backend in ("explicit", "torch", "flash")
    },
}


@pytest.mark.parametrize(("overrides", "error", "message"), SDPA_CASES)
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_no_bad_input_reaches_the_maths(
    overrides: dict[str, object],
    error: type[Exception],
    message: str,
    entry: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the maths behind every entry point made to fail if reached (the explicit
    softmax, flash's tiles, PyTorch's SDPA), each entry point still refuses each bad
    argument with its own message: validation happens before any kernel runs."""

    def reached(*args: object, **kwargs: object) -> None:
        raise AssertionError("bad input reached the maths")

    monkeypatch.setattr(attnlab.functional, "_masked_softmax", reached)
    monkeypatch.setattr(attnlab.flash, "_run_path", reached)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", reached)
    args: dict[str, object] = dict(query=q, key=k, value=v) | overrides
    with pytest.raises(error, match=message):
        ENTRY_POINTS[entry](**args)  # type: ignore[operator]


def test_unknown_backend_is_named() -> None:
    with pytest.raises(ValueError, match=r"backend must be one of 'explicit', 'torch'.*got 'fast'"):
        attend(q, k, v, backend="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"got 'fast'"):
        SelfAttentionV1(3, 2, backend="fast")  # type: ignore[arg-type]


def test_smaller_functions_check_their_input() -> None:
    with pytest.raises(TypeError, match=r"x must be a torch.Tensor; got list"):
        softmax([1.0, 2.0])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor"):
        softmax_naive(torch.tensor([1, 2]))
    with pytest.raises(
        ValueError, match=r"keys must have shape \(N, ..., S, E\) with E = 4 .* got shape \(5, 3\)"
    ):
        attention_scores(torch.randn(3, 4), torch.randn(5, 3))
    with pytest.raises(
        ValueError,
        match=r"values must have shape \(N, ..., S, Ev\) with S = 5 .* got shape \(4, 2\)",
    ):
        context_vectors(torch.rand(3, 5), torch.randn(4, 2))
    with pytest.raises(ValueError, match=r"attn_mask must broadcast"):
        attention_weights(
            torch.randn(3, 4), torch.randn(5, 4), attn_mask=torch.ones(5, 3, dtype=torch.bool)
        )
    with pytest.raises(ValueError, match=r"L must be an int >= 0; got -1"):
        causal_mask(-1)
    with pytest.raises(ValueError, match=r"tokens missing from vocab: \['cake'\]"):
        tokenize("eat cake", {"eat": 0})


@pytest.mark.parametrize("module", [SelfAttentionV1, SelfAttentionV2])
def test_modules_check_sizes_and_input_shape(module: type[torch.nn.Module]) -> None:
    with pytest.raises(ValueError, match=r"d_out must be a positive int; got 0"):
        module(3, 0)
    with pytest.raises(TypeError, match=r"d_in must be a positive int; got float 3.0"):
        module(3.0, 2)
    layer = module(3, 2)
    with pytest.raises(
        ValueError,
        match=r"x must have shape \(T, d_in\) or \(B, T, d_in\) with d_in = 3; got shape \(6, 4\)",
    ):
        layer(torch.randn(6, 4))
    with pytest.raises(ValueError, match=r"with d_in = 3; got shape \(3,\)"):
        layer(torch.randn(3))
    with pytest.raises(ValueError, match=r"got shape \(1, 2, 6, 3\)"):
        layer(torch.randn(1, 2, 6, 3))
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor"):
        layer(torch.ones(6, 3, dtype=torch.int64))


def test_from_v2_refuses_biases_and_other_types() -> None:
    with pytest.raises(ValueError, match=r"qkv_bias=True; SelfAttentionV1 has no bias"):
        SelfAttentionV1.from_v2(SelfAttentionV2(3, 2, qkv_bias=True))
    with pytest.raises(TypeError, match=r"v2 must be a SelfAttentionV2; got Linear"):
        SelfAttentionV1.from_v2(torch.nn.Linear(3, 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"v2 must be a SelfAttentionV2; got CausalAttention"):
        SelfAttentionV1.from_v2(CausalAttention(3, 2))  # V1 has no mask: it would differ


CHECKED_CALLS = {
    "scaled_dot_product_attention": lambda: scaled_dot_product_attention(q, k, v),
    "attention_with_weights": lambda: attention_with_weights(q, k, v),
    "flash_attention": lambda: flash_attention(q, k, v).output,
    "attend-explicit": lambda: attend(q, k, v, backend="explicit"),
    "attend-flash": lambda: attend(q, k, v, backend="flash"),
    "attend-gqa": lambda: attend(q.expand(4, 2, 3, 4), k[:1], v[:1], enable_gqa=True),
    "MultiHeadAttention": lambda: MultiHeadAttention(4, 4, 2, backend="explicit")(q).output,
    "MultiHeadAttention-weights": lambda: MultiHeadAttention(4, 4, 2)(q, need_weights=True),
    "MultiHeadAttentionWrapper": lambda: MultiHeadAttentionWrapper(4, 4, 2)(q),
    "GroupedQueryAttention": lambda: GroupedQueryAttention(4, 2, 1, backend="flash")(q).output,
}


@pytest.mark.parametrize("name", CHECKED_CALLS)
def test_each_call_checks_its_query_once(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A public call validates its arguments once; the kernels it runs check nothing again."""
    checked: list[str] = []
    check_floating = _validation.check_floating

    def counting(argument: str, value: object) -> torch.Tensor:
        checked.append(argument)
        return check_floating(argument, value)

    patched = patch_every_reference(monkeypatch, "check_floating", counting)
    assert {"attnlab._validation", "attnlab.functional"} <= patched  # the by-name imports too
    CHECKED_CALLS[name]()
    assert checked.count("query") + checked.count("x") == 1, checked


def patch_every_reference(
    monkeypatch: pytest.MonkeyPatch, name: str, replacement: object
) -> set[str]:
    """Replace ``_validation.<name>`` in every attnlab module holding it (``from
    ._validation import name`` keeps a reference of its own); the patched modules' names."""
    original = getattr(_validation, name)
    patched: set[str] = set()
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("attnlab") and getattr(module, name, None) is original:
            monkeypatch.setattr(module, name, replacement)
            patched.add(module_name)
    return patched
