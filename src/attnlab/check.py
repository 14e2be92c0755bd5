"""Check a causal multi-head attention module you wrote against two references.

[`check_causal_self_attention`][attnlab.check_causal_self_attention] copies the weights
of your module into [`MultiHeadAttention(causal=True)`][attnlab.MultiHeadAttention] and
into a path through PyTorch's ``F.scaled_dot_product_attention(is_causal=True)``, runs
all three on the same seeded batch and reports whether the outputs agree and, if not,
the first token where they part and, where it can tell, which stage is wrong: it calls
your module twice (a module still random in evaluation mode is reported), tries the
other head counts that divide ``d_out``, and probes it with a one-token sequence and a
sequence of one token repeated, on which the mask, the scale and the softmax cannot
matter.

Your module needs four ``nn.Linear`` layers named as on the site: ``W_query``,
``W_key`` and ``W_value`` (``d_in -> d_out``, biases optional) and ``out_proj``
(``d_out -> d_out``), and must map ``(B, T, d_in)`` to ``(B, T, d_out)``. If it has an
integer ``num_heads`` attribute, the check also compares it with the ``num_heads`` it is
given.
"""

from __future__ import annotations

import math
import textwrap
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
        hint: Which stage is likely wrong, where the check can tell; empty otherwise.
    """

    passed: bool
    problem: str
    max_diff: float
    batch: int
    tokens: int
    num_heads: int
    atol: float
    hint: str = ""

    def __str__(self) -> str:
        setting = f"B={self.batch}, T={self.tokens}, H={self.num_heads}"
        if self.passed:
            return f"PASS ({setting}): equal to PyTorch's SDPA and attnlab's MultiHeadAttention"
        hint = (
            "\n"
            + textwrap.fill(f"hint: {self.hint}", 88, initial_indent="  ", subsequent_indent="    ")
            if self.hint
            else ""
        )
        return f"FAIL ({setting}): {self.problem}{hint}"


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
    ``(batch, tokens, d_in)`` input, twice: two calls that differ are a failure (something
    random, such as dropout that ignores ``self.training``, still runs). Its training mode
    is restored afterwards. Its four
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

    Where the output is wrong, the check looks for the stage: ``num_heads`` against the
    module's own ``num_heads`` attribute and against every other head count dividing
    ``d_out``; then a one-token input (its one weight is 1 whatever the scale or softmax
    axis, provided the mask keeps the diagonal, so a wrong output there points at the
    projections, the merge or ``out_proj``, and NaN at a mask hiding the diagonal, by
    masking it too or by being reversed); then one token repeated
    ``tokens`` times (any weights summing to one give every token the same output, so a
    wrong output points at the split into heads or a softmax over the wrong axis); then
    attention without the mask and with the scale ``1 / sqrt(d_out)``.

    Returns:
        An [`AttentionCheck`][attnlab.AttentionCheck]: ``passed``, and why not, with a
        ``hint`` where the check can tell the stage; print it.

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
            again = module(x)
            expected = _sdpa_reference(layers, x, num_heads)  # (B, T, d_out)
            package = _package_reference(layers, num_heads)(x).output  # (B, T, d_out)
            check = AttentionCheck(True, "", 0.0, batch, tokens, num_heads, atol)
            check = _compare(output, (expected, package), (batch, tokens, d_out), check)
            if math.isinf(check.max_diff):  # wrong shape: nothing more to compare
                return check
            if not torch.allclose(output, again, rtol=0.0, atol=atol, equal_nan=True):
                return _random_in_eval(output, again, check)
            if not check.passed:
                check = replace(check, hint=_diagnose(module, layers, x, num_heads, atol))
    finally:
        module.train(was_training)
    return check


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


def _sdpa_reference(
    layers: dict[str, nn.Linear],
    x: Tensor,
    num_heads: int,
    *,
    causal: bool = True,
    scale: float | None = None,
) -> Tensor:
    """Your projections around PyTorch's causal SDPA: the first reference.

    ``causal`` and ``scale`` are changed only to name a bug.
    """
    B, T, _ = x.shape  # batch, tokens, d_in
    d_out = layers["W_query"].out_features
    H, D = num_heads, d_out // num_heads

    def split(t: Tensor) -> Tensor:
        return t.view(B, T, H, D).transpose(1, 2)  # (B, T, d_out) -> (B, H, T, D)

    queries, keys, values = (split(layers[n](x)) for n in ("W_query", "W_key", "W_value"))
    context_vecs = F.scaled_dot_product_attention(
        queries, keys, values, is_causal=causal, scale=scale or 1 / math.sqrt(D)
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


def _same(output: Tensor, reference: Tensor, atol: float) -> bool:
    """Equal within ``atol`` everywhere, NaN in neither."""
    diff = (output.double() - reference.double()).abs()
    return not bool(diff.isnan().any()) and bool((diff <= atol).all())


def _random_in_eval(output: Tensor, again: Tensor, check: AttentionCheck) -> AttentionCheck:
    """The failure of a module whose two calls in evaluation mode differ."""
    diff = (output.double() - again.double()).abs()  # NaN only where one call gave NaN
    largest = diff.nan_to_num(nan=math.inf).max().item()
    problem = f"two calls in evaluation mode differ (largest difference {largest:.2g})"
    hint = (
        "dropout must follow self.training: nn.Dropout does; F.dropout needs "
        "training=self.training, SDPA dropout_p=0.0 outside training"
    )
    return replace(check, passed=False, problem=problem, max_diff=largest, hint=hint)


def _diagnose(
    module: nn.Module, layers: dict[str, nn.Linear], x: Tensor, num_heads: int, atol: float
) -> str:
    """Which stage of ``module`` is wrong, where probes can tell; empty where they cannot."""
    try:
        return _probe(module, layers, x, num_heads, atol)
    except Exception:  # a module that refuses a probe's input: no hint, not a crash
        return ""


def _probe(
    module: nn.Module, layers: dict[str, nn.Linear], x: Tensor, num_heads: int, atol: float
) -> str:
    """The hint of ``_diagnose``, from the probes it lists."""
    heads = _heads_hint(module, layers, x, num_heads, atol)
    if heads:
        return heads
    d_out = layers["out_proj"].out_features
    one = x[:, :1]  # (B, 1, d_in): its one weight is 1 at any scale or softmax axis, or NaN
    one_out = module(one)
    if not isinstance(one_out, Tensor) or one_out.shape != (x.shape[0], 1, d_out):
        return ""
    if bool(one_out.isnan().any()):
        return (
            "a one-token input gives NaN: the mask hides a token's own key, the diagonal "
            "(masked too, or the mask reversed: masked_fill fills where True)"
        )
    if not _same(one_out, _sdpa_reference(layers, one, num_heads), atol):
        return (
            "a one-token input (its one weight is 1 whatever the scale or softmax axis) "
            "is already wrong: the projections, the merge of the heads or out_proj"
        )
    repeated = one.expand_as(x).contiguous()  # (B, T, d_in): one token, T times
    repeated_out = module(repeated)
    nan_tokens = repeated_out.isnan().any(dim=2).any(dim=0).nonzero().flatten().tolist()
    if nan_tokens:
        return (
            f"tokens {nan_tokens} have no key left to attend to: the mask hides too much "
            "(masked_fill fills where True)"
        )
    if not _same(repeated_out, _sdpa_reference(layers, repeated, num_heads), atol):
        return (
            "one token repeated (any weights summing to 1 give it the same output) comes "
            "out wrong: the split into heads, or a softmax over the wrong axis"
        )
    output = module(x)
    if _same(output, _sdpa_reference(layers, x, num_heads, causal=False), atol):
        return "it equals attention without the causal mask: every token sees its future"
    if _same(output, _sdpa_reference(layers, x, num_heads, scale=1 / math.sqrt(d_out)), atol):
        return "it equals attention scaled by 1/sqrt(d_out), not 1/sqrt(D) with D=d_out//H"
    return "the one-token and repeated-token probes pass: look at the mask, scale, softmax"


def _heads_hint(
    module: nn.Module, layers: dict[str, nn.Linear], x: Tensor, num_heads: int, atol: float
) -> str:
    """A sentence when the module's heads are not the ``num_heads`` the check was told."""
    d_out = layers["out_proj"].out_features
    output = module(x)
    matching = [
        h
        for h in range(1, d_out + 1)
        if d_out % h == 0 and h != num_heads and _same(output, _sdpa_reference(layers, x, h), atol)
    ]
    declared = getattr(module, "num_heads", None)
    told = f"the check was told num_heads={num_heads}"
    if isinstance(declared, int) and not isinstance(declared, bool) and declared != num_heads:
        return f"module.num_heads is {declared} but {told}"
    if matching:
        return f"it equals causal attention with H={matching[0]} heads, but {told}"
    return ""
