"""Choosing how attention is computed: one registry of kernels for every module.

A kernel is a function ``kernel(query, key, value, call) -> output`` on arguments
already checked, whose [`AttentionCall`][attnlab.AttentionCall] carries the mask,
dropout, causal flag, scale and grouped-query group (as Hugging Face's
``ALL_ATTENTION_FUNCTIONS``). Modules check their inputs, project them, then call
``KERNELS[backend]``; [`attend`][attnlab.attend] is the checked entry point. Every
kernel has the semantics of
[`scaled_dot_product_attention`][attnlab.scaled_dot_product_attention]:

* ``"explicit"``: the package's step-by-step computation (materialises the
  ``(L, S)`` weights; the one to read);
* ``"torch"``: ``torch.nn.functional.scaled_dot_product_attention``, PyTorch's fused
  kernels (the fastest, and the modules' default);
* ``"flash"``: [`flash_attention`][attnlab.flash_attention]'s blocks and online
  softmax, which never materialise the ``(L, S)`` matrix.

[`register_kernel`][attnlab.register_kernel] adds a backend under a new name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor

from ._validation import broadcast_shape, check_attention_args, check_sinks
from .flash import DEFAULT_BLOCK_SIZE, flash_with_lse
from .functional import AttentionCall, explicit_attention
from .masks import apply_mask, causal_mask

__all__ = [
    "BACKENDS",
    "KERNELS",
    "AttentionCall",
    "AttentionKernel",
    "Backend",
    "attend",
    "check_backend",
    "register_kernel",
]

Backend = Literal["explicit", "torch", "flash"]
"""Names of the built-in attention backends."""

BACKENDS: tuple[str, ...] = get_args(Backend)
"""Every built-in backend name, in the order the docs list them."""

AttentionKernel = Callable[[Tensor, Tensor, Tensor, AttentionCall], Tensor]
"""A backend's kernel: ``kernel(query, key, value, call) -> output``, arguments checked."""


def explicit_kernel(query: Tensor, key: Tensor, value: Tensor, call: AttentionCall) -> Tensor:
    """The ``"explicit"`` backend: the package's step-by-step computation."""
    output, _ = explicit_attention(query, key, value, call)
    return output


def torch_kernel(query: Tensor, key: Tensor, value: Tensor, call: AttentionCall) -> Tensor:
    """The ``"torch"`` backend: PyTorch's fused ``scaled_dot_product_attention``.

    SDPA takes no sinks: a sink is then a key of zeros (score 0) with a value of zeros,
    its logit added by the mask's extra column.
    """
    attn_mask, is_causal = call.attn_mask, call.is_causal
    if call.sinks is not None:
        key, value, attn_mask = _sink_as_key(query, key, value, call, call.sinks)
        is_causal = False
    return F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attn_mask,
        dropout_p=call.dropout_p,
        is_causal=is_causal,
        scale=call.scale,
        enable_gqa=call.group > 1,
    )


def _sink_as_key(
    query: Tensor, key: Tensor, value: Tensor, call: AttentionCall, sinks: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Key and value with one more position of zeros, and a float mask whose column is the sink."""
    L, S = query.shape[-2], key.shape[-2]
    rule = causal_mask(L, S, device=query.device) if call.is_causal else call.attn_mask
    mask = query.new_zeros(L, S) if rule is None else rule  # (..., L, S)
    if mask.dtype == torch.bool:  # additive: 0 where a key may be seen, -inf elsewhere
        mask = apply_mask(query.new_zeros(mask.shape), mask)
    heads = broadcast_shape(mask.shape[:-2], sinks.shape) or ()  # (..., H)
    sink_column = sinks.to(query.dtype).view(-1, 1, 1).expand(*heads, L, 1)
    mask = torch.cat([mask.expand(*heads, L, S), sink_column], dim=-1)  # (..., H, L, S + 1)
    key = torch.cat([key, key.new_zeros(*key.shape[:-2], 1, key.shape[-1])], dim=-2)
    value = torch.cat([value, value.new_zeros(*value.shape[:-2], 1, value.shape[-1])], dim=-2)
    return key, value, mask


def flash_kernel(query: Tensor, key: Tensor, value: Tensor, call: AttentionCall) -> Tensor:
    """The ``"flash"`` backend: [`flash_attention`][attnlab.flash_attention]'s maths."""
    output, _ = flash_with_lse(
        query,
        key,
        value,
        call.attn_mask,
        call.dropout_p,
        call.is_causal,
        call.scale,
        DEFAULT_BLOCK_SIZE,
        window=None,
        batch=_batch_shape(query, key, value, call.group),
        group=call.group,
        sinks=call.sinks,
    )
    return output


def _batch_shape(query: Tensor, key: Tensor, value: Tensor, group: int) -> tuple[int, ...]:
    """The broadcast batch ``(N, ...)`` of the three, counting the query's heads (GQA)."""
    kv_batch = broadcast_shape(key.shape[:-2], value.shape[:-2]) or ()  # checked: broadcasts
    if group > 1:  # (N, ..., Hkv) -> (N, ..., Hkv * group): the query's heads
        kv_batch = (*kv_batch[:-1], kv_batch[-1] * group)
    return broadcast_shape(query.shape[:-2], kv_batch) or ()


KERNELS: dict[str, AttentionKernel] = {
    "explicit": explicit_kernel,
    "torch": torch_kernel,
    "flash": flash_kernel,
}
"""The backend registry: each backend's name and its kernel."""


def register_kernel(name: str, kernel: AttentionKernel) -> None:
    """Add (or replace) a backend: modules built with ``backend=name`` then call ``kernel``.

    Args:
        name: The backend's name, a non-empty string.
        kernel: ``kernel(query, key, value, call) -> output`` with the semantics of
            PyTorch's SDPA, given arguments already checked; it adds ``call.sinks``
            when set (or refuses them by name, never drops them).
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str; got {name!r}")
    if not callable(kernel):
        raise TypeError(f"kernel must be callable; got {type(kernel).__name__}")
    KERNELS[name] = kernel


def check_backend(backend: object) -> Backend:
    """Return ``backend`` if it names a registered backend, else raise ``ValueError``."""
    if not isinstance(backend, str) or backend not in KERNELS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, KERNELS))}; got {backend!r}")
    return backend  # type: ignore[return-value]


def attend(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    backend: Backend = "torch",
    enable_gqa: bool = False,
    *,
    sinks: Tensor | None = None,
) -> Tensor:
    """Scaled dot-product attention computed by the kernel that ``backend`` names.

    ``backend`` is ``"explicit"``, ``"torch"``, ``"flash"`` or a name added by
    [`register_kernel`][attnlab.register_kernel]; the other arguments mean what they
    mean in [`scaled_dot_product_attention`][attnlab.scaled_dot_product_attention].
    """
    check_backend(backend)
    batch, group = check_attention_args(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa=enable_gqa
    )
    call = AttentionCall(
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        is_causal=is_causal,
        scale=scale,
        group=group,
        sinks=check_sinks(sinks, batch, query),
    )
    return KERNELS[backend](query, key, value, call)
