"""Weight bookkeeping between this package's multi-head modules and PyTorch's.

The one home of the layouts: ``nn.MultiheadAttention``'s fused ``in_proj_weight``
``(3E, E)`` split into and joined from ``W_query``/``W_key``/``W_value``, and a
[`MultiHeadAttentionWrapper`][attnlab.MultiHeadAttentionWrapper]'s per-head
projections stacked into one. It knows the modules only by the attributes of
``FusedProjections``, so it imports none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch import Tensor, nn

__all__ = [
    "FusedProjections",
    "check_torch_mha",
    "copy_from_heads",
    "copy_from_torch",
    "to_torch_mha",
    "torch_mha_config",
]


class FusedProjections(Protocol):
    """What these functions read and write of a multi-head module."""

    W_query: nn.Linear
    W_key: nn.Linear
    W_value: nn.Linear
    out_proj: nn.Linear
    d_in: int
    d_out: int
    num_heads: int
    kdim: int
    vdim: int
    dropout: float
    causal: bool
    training: bool
    torch_batch_first: bool

    def train(self, mode: bool = True) -> Any: ...  # noqa: D102


def check_torch_mha(module: object) -> nn.MultiheadAttention:
    """Return ``module`` if it is an ``nn.MultiheadAttention`` this package can copy.

    Raises:
        TypeError: ``module`` is not an ``nn.MultiheadAttention``.
        ValueError: It uses ``add_bias_kv`` or ``add_zero_attn``.
    """
    if not isinstance(module, nn.MultiheadAttention):
        raise TypeError(f"module must be a nn.MultiheadAttention; got {type(module).__name__}")
    if module.bias_k is not None or module.bias_v is not None:
        raise ValueError("module has add_bias_kv=True, which MultiHeadAttention does not support")
    if module.add_zero_attn:
        raise ValueError("module has add_zero_attn=True, which MultiHeadAttention does not support")
    return module


def torch_mha_config(module: nn.MultiheadAttention) -> dict[str, Any]:
    """The ``MultiHeadAttention`` arguments that match a (checked) PyTorch module."""
    E = module.embed_dim
    return {
        "d_in": E,
        "d_out": E,
        "num_heads": module.num_heads,
        "dropout": float(module.dropout),
        "qkv_bias": module.in_proj_bias is not None,
        "kdim": module.kdim,
        "vdim": module.vdim,
        "out_bias": module.out_proj.bias is not None,
    }


def copy_from_torch(new: FusedProjections, module: nn.MultiheadAttention) -> None:
    """Copy PyTorch's weights, layout and mode into ``new`` (built by ``torch_mha_config``).

    ``new`` must already be on the source's device and dtype.
    """
    if module._qkv_same_embed_dim:
        w_q, w_k, w_v = module.in_proj_weight.chunk(3)  # (3E, E) -> three (E, E)
    else:
        w_q, w_k, w_v = module.q_proj_weight, module.k_proj_weight, module.v_proj_weight
    projections = (new.W_query, new.W_key, new.W_value)
    with torch.no_grad():
        for projection, weight in zip(projections, (w_q, w_k, w_v), strict=True):
            projection.weight.copy_(weight)
        if module.in_proj_bias is not None:
            biases = module.in_proj_bias.chunk(3)  # (3E,) -> three (E,)
            for projection, bias in zip(projections, biases, strict=True):
                projection.bias.copy_(bias)
        new.out_proj.weight.copy_(module.out_proj.weight)
        if module.out_proj.bias is not None:
            new.out_proj.bias.copy_(module.out_proj.bias)
    new.torch_batch_first = bool(module.batch_first)
    new.train(module.training)


def copy_from_heads(fused: FusedProjections, heads: Sequence[nn.Module]) -> None:
    """Stack the heads' projections into ``fused``'s; ``out_proj`` becomes the identity.

    Head ``h``'s projection weights become rows ``h * D`` to ``(h + 1) * D``; ``fused``
    must already be on the heads' device and dtype.
    """
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            target: nn.Linear = getattr(fused, name)
            parts: list[nn.Linear] = [getattr(head, name) for head in heads]
            # H weights of (D, d_in) -> (H * D, d_in) = (d_out, d_in)
            target.weight.copy_(torch.cat([part.weight for part in parts]))
            if target.bias is not None:
                target.bias.copy_(torch.cat([part.bias for part in parts]))
        fused.out_proj.weight.copy_(torch.eye(fused.d_out))


def to_torch_mha(
    mha: FusedProjections, *, batch_first: bool | None = None
) -> nn.MultiheadAttention:
    """Build a ``torch.nn.MultiheadAttention`` equal to ``mha``: ``MultiHeadAttention.to_torch``."""
    if mha.d_in != mha.d_out:
        raise ValueError(
            "to_torch needs d_in == d_out (nn.MultiheadAttention has one embed_dim); "
            f"got d_in={mha.d_in}, d_out={mha.d_out}"
        )
    if mha.causal:
        raise ValueError(
            "to_torch needs causal=False: nn.MultiheadAttention has no causal flag "
            "(pass it attn_mask=nn.Transformer.generate_square_subsequent_mask(L))"
        )
    batch_first = mha.torch_batch_first if batch_first is None else batch_first
    has_bias = mha.W_query.bias is not None or mha.out_proj.bias is not None
    weight = mha.out_proj.weight
    module = nn.MultiheadAttention(
        mha.d_out,
        mha.num_heads,
        dropout=mha.dropout,
        bias=has_bias,
        kdim=mha.kdim,
        vdim=mha.vdim,
        batch_first=batch_first,
        device=weight.device,
        dtype=weight.dtype,
    )
    projections = (mha.W_query, mha.W_key, mha.W_value)
    with torch.no_grad():
        if module._qkv_same_embed_dim:
            # three (E, E) -> (3E, E)
            module.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
        else:
            module.q_proj_weight.copy_(mha.W_query.weight)
            module.k_proj_weight.copy_(mha.W_key.weight)
            module.v_proj_weight.copy_(mha.W_value.weight)
        if has_bias:
            biases: list[Tensor] = [
                torch.zeros_like(p.weight[:, 0]) if p.bias is None else p.bias for p in projections
            ]
            module.in_proj_bias.copy_(torch.cat(biases))  # three (E,) -> (3E,)
            out_bias = mha.out_proj.bias
            module.out_proj.bias.copy_(0.0 if out_bias is None else out_bias)
        module.out_proj.weight.copy_(mha.out_proj.weight)
    module.train(mha.training)
    return module
