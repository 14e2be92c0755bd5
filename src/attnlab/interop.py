"""Conversion between this package's multi-head modules and PyTorch's.

The one home of the weight bookkeeping: ``torch.nn.MultiheadAttention``'s fused
``in_proj_weight`` (``(3E, E)``) split into, and joined from, the three projections
``W_query``/``W_key``/``W_value``; and the per-head projections of a
[`MultiHeadAttentionWrapper`][attnlab.MultiHeadAttentionWrapper] stacked into one.
``from_torch``, ``to_torch`` and ``from_wrapper`` of
[`MultiHeadAttention`][attnlab.MultiHeadAttention] call these functions.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .backends import Backend
from .causal import CausalAttention
from .multihead import MultiHeadAttention, MultiHeadAttentionWrapper

__all__ = ["mha_from_torch", "mha_from_wrapper", "mha_to_torch"]


def mha_from_wrapper(wrapper: MultiHeadAttentionWrapper) -> MultiHeadAttention:
    """Build the ``MultiHeadAttention`` that computes exactly what ``wrapper`` computes.

    The implementation behind ``MultiHeadAttention.from_wrapper``, whose docstring states
    the full contract.
    """
    if not isinstance(wrapper, MultiHeadAttentionWrapper):
        raise TypeError(
            f"wrapper must be a MultiHeadAttentionWrapper; got {type(wrapper).__name__}"
        )
    heads = [head for head in wrapper.heads if isinstance(head, CausalAttention)]
    qkv_bias = heads[0].W_query.bias is not None
    module = MultiHeadAttention(
        wrapper.d_in,
        wrapper.d_out,
        wrapper.num_heads,
        wrapper.dropout,
        qkv_bias,
        wrapper.causal,
        out_bias=False,
        backend=wrapper.backend,
    )
    weight = heads[0].W_query.weight
    module.to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            fused: nn.Linear = getattr(module, name)
            parts = [getattr(head, name) for head in heads]
            # H weights of (D, d_in) -> (H * D, d_in) = (d_out, d_in)
            fused.weight.copy_(torch.cat([part.weight for part in parts]))
            if fused.bias is not None:
                fused.bias.copy_(torch.cat([part.bias for part in parts]))
        module.out_proj.weight.copy_(torch.eye(wrapper.d_out))
    module.train(wrapper.training)
    return module


def mha_from_torch(
    module: nn.MultiheadAttention, *, backend: Backend = "torch"
) -> MultiHeadAttention:
    """Build a ``MultiHeadAttention`` equal to a ``torch.nn.MultiheadAttention``.

    The implementation behind ``MultiHeadAttention.from_torch``, whose docstring states
    the full contract.
    """
    if not isinstance(module, nn.MultiheadAttention):
        raise TypeError(f"module must be a nn.MultiheadAttention; got {type(module).__name__}")
    if module.bias_k is not None or module.bias_v is not None:
        raise ValueError("module has add_bias_kv=True, which MultiHeadAttention does not support")
    if module.add_zero_attn:
        raise ValueError("module has add_zero_attn=True, which MultiHeadAttention does not support")
    E = module.embed_dim
    in_bias = module.in_proj_bias
    new = MultiHeadAttention(
        E,
        E,
        module.num_heads,
        float(module.dropout),
        in_bias is not None,
        kdim=module.kdim,
        vdim=module.vdim,
        out_bias=module.out_proj.bias is not None,
        backend=backend,
    )
    weight = module.out_proj.weight
    new.to(device=weight.device, dtype=weight.dtype)
    if module._qkv_same_embed_dim:
        # (3E, E) -> three (E, E)
        w_q, w_k, w_v = module.in_proj_weight.chunk(3)
    else:
        w_q, w_k, w_v = module.q_proj_weight, module.k_proj_weight, module.v_proj_weight
    with torch.no_grad():
        new.W_query.weight.copy_(w_q)
        new.W_key.weight.copy_(w_k)
        new.W_value.weight.copy_(w_v)
        if in_bias is not None:
            b_q, b_k, b_v = in_bias.chunk(3)  # (3E,) -> three (E,)
            new.W_query.bias.copy_(b_q)
            new.W_key.bias.copy_(b_k)
            new.W_value.bias.copy_(b_v)
        new.out_proj.weight.copy_(module.out_proj.weight)
        if module.out_proj.bias is not None:
            new.out_proj.bias.copy_(module.out_proj.bias)
    new.torch_batch_first = bool(module.batch_first)
    new.train(module.training)
    return new


def mha_to_torch(
    mha: MultiHeadAttention, *, batch_first: bool | None = None
) -> nn.MultiheadAttention:
    """Build a ``torch.nn.MultiheadAttention`` equal to ``module``.

    The implementation behind ``MultiHeadAttention.to_torch``, whose docstring states
    the full contract.
    """
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
