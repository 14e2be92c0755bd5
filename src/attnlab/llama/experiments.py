"""Experiments that run SmolLM2 another way: StreamingLLM's window, one head's logits.

* StreamingLLM (Xiao et al. 2023): a sliding window with and without attention sinks
  ([`streaming_mask`][attnlab.llama.experiments.streaming_mask]) run through every layer
  ([`masked_logits`][attnlab.llama.experiments.masked_logits]), scored by
  [`mean_loss`][attnlab.llama.experiments.mean_loss] on a long text that ships with the
  package ([`long_text`][attnlab.llama.experiments.long_text]);
* copying (Olsson et al. 2022): what one head's output does to every logit
  ([`head_direct_logits`][attnlab.llama.experiments.head_direct_logits]).

Shape legend: ``B`` sequences, ``H`` query heads, ``T`` tokens, ``V`` vocabulary.
Layers, heads and positions count from zero, as in the code.
"""

from __future__ import annotations

from importlib import resources
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor

from .._validation import (
    check_int,
    check_length,
    check_logits_and_ids,
    check_positive_int,
    check_tensor,
    check_token_range,
    format_shape,
)
from .model import DecoderBlock, LlamaModel

__all__ = ["head_direct_logits", "long_text", "masked_logits", "mean_loss", "streaming_mask"]


def long_text() -> str:
    """A long natural text that ships with the package, for experiments over ~1,000 tokens.

    "The Lighthouse at Marrow Point", a short story written for this project (about
    1,000 words; 1,155 SmolLM2 tokens), so that no model has seen it in training. It is
    package data: ``attnlab/llama/data/long_text.txt``.

    Returns:
        The text, as one string.
    """
    return (resources.files("attnlab") / "llama" / "data" / "long_text.txt").read_text(
        encoding="utf-8"
    )


def streaming_mask(T: int, window: int, sinks: int = 0) -> Tensor:
    """StreamingLLM's mask: each query sees the first ``sinks`` tokens and its last ``window``.

    ``mask[i, j]`` is ``True`` (may attend) when ``j <= i`` and either
    ``i - window < j`` (the sliding window: the query itself and the ``window - 1``
    tokens before it, as [`sliding_window_mask`][attnlab.sliding_window_mask]) or
    ``j < sinks`` (the *attention sinks*, Xiao et al. 2023). ``sinks=0`` is the plain
    sliding window; ``window >= T`` is the full causal mask.

    Args:
        T: Tokens.
        window: Keys in the sliding window, the query's own included (``>= 1``).
        sinks: First tokens every query may also see (``>= 0``).

    Returns:
        A bool mask, ``True`` = may attend.

    Raises:
        TypeError: An argument is not an int.
        ValueError: ``T < 1``, ``window < 1`` or ``sinks < 0``.

    Shape:
        output: ``(T, T)``.
    """
    T = check_positive_int("T", T)
    window = check_positive_int("window", window)
    sinks = check_length("sinks", sinks)
    i = torch.arange(T).unsqueeze(-1)  # (T, 1): query positions
    j = torch.arange(T)  # (T,): key positions
    return (j <= i) & ((j > i - window) | (j < sinks))  # (T, T)


def _check_model(model: object) -> LlamaModel:
    if not isinstance(model, LlamaModel):
        raise TypeError(f"model must be an attnlab.llama.LlamaModel; got {type(model).__name__}")
    return model


def _blocks(model: LlamaModel) -> list[DecoderBlock]:
    """The model's decoder blocks, typed."""
    return [cast(DecoderBlock, block) for block in model.layers]


def _layer_heads(block: DecoderBlock, x: Tensor, mask: Tensor) -> Tensor:
    """One block's attention under ``mask``, per query head, before ``o_proj``.

    Shape:
        x: ``(B, T, d_model)``; mask: ``(T, T)``; output: ``(B, H, T, D)``.
    """
    attn = block.attn
    h = block.attn_norm(x)  # (B, T, d_model)
    queries = attn.split_heads(attn.q_proj(h))  # (B, H, T, D)
    keys = attn.split_heads(attn.k_proj(h))  # (B, Hkv, T, D)
    values = attn.split_heads(attn.v_proj(h))  # (B, Hkv, T, D)
    queries, keys = attn.position_queries_keys(queries, keys)  # rotated to 0 .. T-1
    return F.scaled_dot_product_attention(
        queries, keys, values, attn_mask=mask, enable_gqa=True
    )  # (B, H, T, D)


def masked_logits(model: LlamaModel, input_ids: Tensor, mask: Tensor) -> Tensor:
    """The model's next-token logits with every layer's attention restricted to ``mask``.

    The model's own forward pass, block by block, with one change: each layer attends
    under ``mask`` (for example a [`streaming_mask`][attnlab.llama.experiments.streaming_mask])
    instead of the causal mask. Tokens keep their positions ``0 .. T-1`` for the rotary
    angles. With the full causal mask it gives ``model(input_ids)``.

    Args:
        model: A [`LlamaModel`][attnlab.llama.LlamaModel].
        input_ids: Token ids.
        mask: Which keys each query may see (``True`` = may attend); every row needs
            at least one ``True``.

    Returns:
        Logits, computed without gradients.

    Raises:
        TypeError: ``model`` is not a ``LlamaModel`` or ``mask`` is not a bool tensor.
        ValueError: ``mask`` is not ``(T, T)`` for the ``T`` of ``input_ids``, or a row
            of it is all ``False``.

    Shape:
        input_ids: ``(T,)`` or ``(B, T)``; mask: ``(T, T)``; output: ``(B, T, V)``.
    """
    model = _check_model(model)
    ids = model.check_ids("input_ids", input_ids)
    mask = _check_square_mask(mask, ids.shape[1])
    with torch.no_grad():
        x = model.embed(ids)  # (B, T, d_model)
        for block in _blocks(model):
            context_vecs = _layer_heads(block, x, mask)  # (B, H, T, D)
            x = x + block.attn.o_proj(block.attn.merge_heads(context_vecs))  # residual
            x = x + block.ffn(block.ffn_norm(x))  # residual
        logits: Tensor = model.norm(x) @ model.embed.weight.transpose(-2, -1)  # (B, T, V)
    return logits


def _check_square_mask(mask: object, T: int) -> Tensor:
    mask = check_tensor("mask", mask)
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True = may attend); got dtype {mask.dtype}")
    if mask.shape != (T, T):
        raise ValueError(
            f"mask must have shape (T, T) = ({T}, {T}) for input_ids of {T} tokens; "
            f"got shape {format_shape(mask.shape)}"
        )
    if not bool(mask.any(dim=-1).all()):
        raise ValueError("mask must let every query see at least one key; got an all-False row")
    return mask


def mean_loss(logits: Tensor, input_ids: Tensor, start: int = 1) -> float:
    """The mean next-token loss (cross-entropy, in nats) on tokens ``start .. T-1``.

    The loss on the token at position ``p`` is the cross-entropy of ``logits`` at
    ``p - 1`` against it, averaged over ``p = start .. T-1`` and the sequences.

    Args:
        logits: ``model(input_ids)``, or [`masked_logits`][attnlab.llama.experiments.masked_logits].
        input_ids: The token ids.
        start: First position whose token is scored (``1 .. T-1``).

    Returns:
        The mean loss, as a Python float.

    Raises:
        TypeError: ``logits`` is not a floating tensor, ``input_ids`` not an integer one,
            or ``start`` not an int.
        ValueError: The shapes do not match, an id is outside the vocabulary
            ``0 .. V-1``, or ``start`` is out of range.

    Shape:
        logits: ``(B, T, V)``; input_ids: ``(B, T)`` or ``(T,)``.
    """
    logits, ids = check_logits_and_ids(logits, input_ids)  # (B, T, V), (B, T)
    T = ids.shape[1]
    start = check_int("start", start)
    if not 1 <= start <= T - 1:
        raise ValueError(f"start must be in 1 .. T-1 = {T - 1}; got {start}")
    ids = check_token_range("input_ids", ids, logits.shape[-1])  # int64
    with torch.no_grad():
        losses = F.cross_entropy(
            logits[:, start - 1 : -1].transpose(1, 2).float(), ids[:, start:], reduction="none"
        )  # (B, T - start)
    return float(losses.mean())


def head_direct_logits(model: LlamaModel, input_ids: Tensor, layer: int, head: int) -> Tensor:
    """What one head's output adds to every logit, through the residual stream.

    A head's output, ``o_proj`` applied to its context vector alone, is added to the
    residual stream and reaches the logits through the final RMSNorm and the (tied)
    embedding matrix. With the final norm's scale ``1 / rms`` taken from the real
    forward pass, that path is linear, so the head's share of each logit is exact:
    ``(head_out * norm.weight / rms) @ embed.weight.T``. The logits are the sum of such
    shares over every head, MLP and the embedding. Olsson et al. call a head that raises
    the logit of the token it attends to a *copying* head.

    Args:
        model: A [`LlamaModel`][attnlab.llama.LlamaModel].
        input_ids: Token ids.
        layer: The head's layer, ``0 .. N-1``.
        head: The query head, ``0 .. H-1``.

    Returns:
        The head's contribution to every logit at every position, without gradients.

    Raises:
        TypeError: ``model`` is not a ``LlamaModel``, or ``layer``/``head`` not an int.
        ValueError: ``layer`` or ``head`` out of range.

    Shape:
        input_ids: ``(T,)`` or ``(B, T)``; output: ``(B, T, V)``.
    """
    model = _check_model(model)
    ids = model.check_ids("input_ids", input_ids)
    c = model.config
    layer = _check_index("layer", layer, c.num_layers)
    head = _check_index("head", head, c.num_heads)
    T = ids.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)
    with torch.no_grad():
        x = model.embed(ids)  # (B, T, d_model)
        head_out = torch.zeros_like(x)
        for n, block in enumerate(_blocks(model)):
            context_vecs = _layer_heads(block, x, causal)  # (B, H, T, D)
            if n == layer:
                only = torch.zeros_like(context_vecs)
                only[:, head] = context_vecs[:, head]  # every other head zeroed
                head_out = block.attn.o_proj(block.attn.merge_heads(only))  # (B, T, d_model)
            x = x + block.attn.o_proj(block.attn.merge_heads(context_vecs))
            x = x + block.ffn(block.ffn_norm(x))
        inv_rms = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + model.norm.eps)  # (B, T, 1)
        scaled = head_out * model.norm.weight * inv_rms  # (B, T, d_model)
        direct: Tensor = scaled @ model.embed.weight.transpose(-2, -1)  # (B, T, V)
    return direct


def _check_index(name: str, value: object, size: int) -> int:
    index = check_int(name, value)
    if not 0 <= index < size:
        raise ValueError(f"{name} must be in 0 .. {size - 1}; got {index}")
    return index
