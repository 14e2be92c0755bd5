"""Check a causal multi-head attention module you wrote against two references.

[`check_causal_self_attention`][attnlab.check_causal_self_attention] copies the weights
of your module into [`MultiHeadAttention(causal=True)`][attnlab.MultiHeadAttention] and
into a path through PyTorch's ``F.scaled_dot_product_attention(is_causal=True)``, runs
all three on the same seeded batch and reports whether the outputs agree and, if not,
the first token where they part.

Your module needs four ``nn.Linear`` layers named as on the site: ``W_query``,
``W_key`` and ``W_value`` (``d_in -> d_out``, biases optional) and ``out_proj``
(``d_out -> d_out``), and must map ``(B, T, d_in)`` to ``(B, T, d_out)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._validation import check_positive_int, format_shape
from .multihead import MultiHeadAttention

__all__ = ["AttentionCheck", "check_causal_self_attention"]

PROJECTIONS = ("W_query", "W_key", "W_value", "out_proj")
"""The layers the check copies, by the names the site's modules use."""


@dataclass(frozen=True)
class AttentionCheck:
    """What [`check_causal_self_attention`][attnlab.check_causal_self_attention] found.

    Attributes:
        passed: The module's output equals both references within ``atol``.
        problem: Why it failed, in one sentence naming the first token that differs;
            empty when it passed.
        max_diff: The largest absolute difference from either reference (``nan`` when
            the module's output holds NaN, ``inf`` when its shape is wrong).
        batch: ``B`` of the test input.
        tokens: ``T`` of the test input.
        num_heads: ``H``, as given to the check.
        atol: The tolerance used.
    """

    passed: bool
    problem: str
    max_diff: float
    batch: int
    tokens: int
    num_heads: int
    atol: float

    def __str__(self) -> str:
        setting = f"B={self.batch}, T={self.tokens}, H={self.num_heads}"
        if self.passed:
            return f"PASS ({setting}): equal to PyTorch's SDPA and attnlab's MultiHeadAttention"
        return f"FAIL ({setting}): {self.problem}"


def check_causal_self_attention(
    module: nn.Module,
    num_heads: int,
    *,
    batch: int = 2,
    tokens: int = 5,
    atol: float = 1e-5,
    seed: int = 0,
) -> AttentionCheck:
    """Compare your causal multi-head self-attention with PyTorch's and the package's.

    The module runs in evaluation mode (dropout off) without gradients, on a seeded
    ``(batch, tokens, d_in)`` input; its training mode is restored afterwards. Its four
    projections are copied into ``MultiHeadAttention(d_in, d_out, num_heads,
    causal=True)`` and used, split into heads by ``view`` and ``transpose``, around
    ``F.scaled_dot_product_attention(..., is_causal=True)``: causal (query ``i`` sees
    keys ``j <= i``), scale ``1 / sqrt(d_out // num_heads)``.

    Args:
        module: Your module, with ``nn.Linear`` layers ``W_query``, ``W_key``,
            ``W_value`` (``d_in -> d_out``) and ``out_proj`` (``d_out -> d_out``).
        num_heads: The number of heads ``H`` your module splits ``d_out`` into.
        batch: Sequences in the test input ``B``.
        tokens: Tokens per sequence ``T``.
        atol: Largest absolute difference still counted as equal.
        seed: Seed of the test input.

    Returns:
        An [`AttentionCheck`][attnlab.AttentionCheck]: ``passed``, and why not; print it.

    Raises:
        TypeError: ``module`` is not an ``nn.Module``, a projection is missing or not an
            ``nn.Linear``, or a number has the wrong type.
        ValueError: The projections' sizes do not fit together, ``num_heads`` does not
            divide ``d_out``, or a size or ``atol`` is not positive.

    Shape:
        The module maps ``(B, T, d_in)`` to ``(B, T, d_out)``; inside, the references
        attend on ``(B, H, T, D)`` with ``D = d_out // H``.
    """
    layers = _projections(module)
    d_in, d_out = layers["W_query"].in_features, layers["W_query"].out_features
    _check_sizes(layers, num_heads, batch, tokens, atol, seed)
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, tokens, d_in, generator=generator)  # (B, T, d_in)
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            output = module(x)
            expected = _sdpa_reference(layers, x, num_heads)  # (B, T, d_out)
            package = _package_reference(layers, num_heads)(x)  # (B, T, d_out)
    finally:
        module.train(was_training)
    check = AttentionCheck(True, "", 0.0, batch, tokens, num_heads, atol)
    return _compare(output, (expected, package), (batch, tokens, d_out), check)


def _projections(module: object) -> dict[str, nn.Linear]:
    """The four ``nn.Linear`` layers of ``module``, by name; raise if one is missing."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be an nn.Module; got {type(module).__name__}")
    layers = {}
    for name in PROJECTIONS:
        layer = getattr(module, name, None)
        if not isinstance(layer, nn.Linear):
            got = "nothing" if layer is None else type(layer).__name__
            raise TypeError(f"module.{name} must be an nn.Linear; got {got}")
        layers[name] = layer
    return layers


def _check_sizes(
    layers: dict[str, nn.Linear], num_heads: int, batch: int, tokens: int, atol: float, seed: int
) -> None:
    """Raise unless the projections fit together and the check's settings are valid."""
    d_in, d_out = layers["W_query"].in_features, layers["W_query"].out_features
    for name in ("W_key", "W_value"):
        shape = (layers[name].in_features, layers[name].out_features)
        if shape != (d_in, d_out):
            raise ValueError(
                f"module.{name} must map d_in={d_in} to d_out={d_out} like W_query; "
                f"got Linear({shape[0]}, {shape[1]})"
            )
        has_bias = layers[name].bias is not None
        if has_bias != (layers["W_query"].bias is not None):
            raise ValueError(
                f"module.{name} must have a bias like W_query (qkv_bias) has; got bias={has_bias}"
            )
    out_shape = (layers["out_proj"].in_features, layers["out_proj"].out_features)
    if out_shape != (d_out, d_out):
        raise ValueError(f"module.out_proj must be Linear({d_out}, {d_out}); got Linear{out_shape}")
    check_positive_int("num_heads", num_heads)
    if d_out % num_heads != 0:
        raise ValueError(f"num_heads must divide d_out={d_out}; got num_heads={num_heads}")
    check_positive_int("batch", batch)
    check_positive_int("tokens", tokens)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int; got {type(seed).__name__} {seed!r}")
    if isinstance(atol, bool) or not isinstance(atol, int | float):
        raise TypeError(f"atol must be a positive float; got {type(atol).__name__}")
    if not atol > 0:
        raise ValueError(f"atol must be a positive float; got {atol}")


def _sdpa_reference(layers: dict[str, nn.Linear], x: Tensor, num_heads: int) -> Tensor:
    """Your projections around PyTorch's causal SDPA: the first reference."""
    B, T, _ = x.shape  # batch, tokens, d_in
    d_out = layers["W_query"].out_features
    H, D = num_heads, d_out // num_heads

    def split(t: Tensor) -> Tensor:
        return t.view(B, T, H, D).transpose(1, 2)  # (B, T, d_out) -> (B, H, T, D)

    queries, keys, values = (split(layers[n](x)) for n in ("W_query", "W_key", "W_value"))
    context_vecs = F.scaled_dot_product_attention(
        queries, keys, values, is_causal=True, scale=1 / math.sqrt(D)
    )  # (B, H, T, D)
    merged = context_vecs.transpose(1, 2).reshape(B, T, d_out)  # (B, H, T, D) -> (B, T, d_out)
    output: Tensor = layers["out_proj"](merged)  # (B, T, d_out)
    return output


def _package_reference(layers: dict[str, nn.Linear], num_heads: int) -> MultiHeadAttention:
    """``MultiHeadAttention(causal=True)`` holding copies of your projections."""
    query = layers["W_query"]
    package = MultiHeadAttention(
        query.in_features,
        query.out_features,
        num_heads,
        qkv_bias=query.bias is not None,
        causal=True,
        out_bias=layers["out_proj"].bias is not None,
    )
    for name, layer in layers.items():
        target: nn.Linear = getattr(package, name)
        target.load_state_dict(layer.state_dict())
    return package.eval()


def _compare(
    output: object,
    references: tuple[Tensor, Tensor],
    shape: tuple[int, int, int],
    check: AttentionCheck,
) -> AttentionCheck:
    """``check`` filled in from comparing ``output`` with both references, token by token."""
    if not isinstance(output, Tensor) or tuple(output.shape) != shape:
        got = format_shape(output.shape) if isinstance(output, Tensor) else type(output).__name__
        problem = f"the output must have shape (B, T, d_out) = {format_shape(shape)}; got {got}"
        return replace(check, passed=False, problem=problem, max_diff=math.inf)
    sdpa, package = (reference.double() for reference in references)  # (B, T, d_out) each
    diff = torch.maximum((output - sdpa).abs(), (output - package).abs())  # (B, T, d_out)
    wrong_tokens = (diff.isnan() | (diff > check.atol)).any(dim=2).any(dim=0)  # (T,)
    if not bool(wrong_tokens.any()):
        return replace(check, max_diff=diff.max().item())
    first = int(wrong_tokens.nonzero()[0].item())
    nan_tokens = diff.isnan().any(dim=2).any(dim=0).nonzero().flatten().tolist()
    if nan_tokens:
        problem = f"wrong from token {first} on (NaN at tokens {nan_tokens})"
        return replace(check, passed=False, problem=problem, max_diff=math.nan)
    max_diff = diff.max().item()
    problem = f"wrong from token {first} on (largest difference {max_diff:.2g})"
    return replace(check, passed=False, problem=problem, max_diff=max_diff)
