"""Experiments that run SmolLM2 another way: StreamingLLM's window, one head's logits.

* StreamingLLM (Xiao et al. 2023): a sliding window with and without attention sinks
  ([`streaming_mask`][attnlab.llama.experiments.streaming_mask]) run through every layer
  ([`masked_logits`][attnlab.llama.experiments.masked_logits]), scored by
  [`mean_loss`][attnlab.llama.experiments.mean_loss] on a long text that ships with the
  package ([`long_text`][attnlab.llama.experiments.long_text]);
* StreamingLLM's own position rule: sinks and window renumbered inside the cache
  ([`renumbered_streaming_logits`][attnlab.llama.experiments.renumbered_streaming_logits]);
* copying (Olsson et al. 2022): what one head's output does to every logit
  ([`head_direct_logits`][attnlab.llama.experiments.head_direct_logits]), and every
  head's OV circuit read as a copying score
  ([`ov_copying_scores`][attnlab.llama.experiments.ov_copying_scores]).

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
from ..gqa import GroupedQueryAttention
from ..rotary import RotaryEmbedding
from .model import DecoderBlock, LlamaModel

__all__ = [
    "head_direct_logits",
    "long_text",
    "masked_logits",
    "mean_loss",
    "ov_copying_scores",
    "renumbered_streaming_logits",
    "streaming_mask",
]


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


def _attention(block: DecoderBlock) -> GroupedQueryAttention:
    """The block's softmax attention; a linear-attention layer is refused."""
    if not isinstance(block.attn, GroupedQueryAttention):
        raise TypeError(
            f"these experiments read softmax attention; layer kind {block.kind!r} has "
            f"{type(block.attn).__name__}"
        )
    return block.attn


def _layer_heads(block: DecoderBlock, x: Tensor, mask: Tensor) -> Tensor:
    """One block's attention under ``mask``, per query head, before ``o_proj``.

    Shape:
        x: ``(B, T, d_model)``; mask: ``(T, T)``; output: ``(B, H, T, D)``.
    """
    attn = _attention(block)
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
            x = x + _attention(block).o_proj(
                _attention(block).merge_heads(context_vecs)
            )  # residual
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
                head_out = _attention(block).o_proj(
                    _attention(block).merge_heads(only)
                )  # (B, T, d_model)
            x = x + _attention(block).o_proj(_attention(block).merge_heads(context_vecs))
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


def _rotary(attn: object) -> RotaryEmbedding:
    """The layer's rotary embedding (its positions part), to rotate at any positions."""
    for name in ("positions", "rotary"):
        part = getattr(attn, name, None)
        if isinstance(part, RotaryEmbedding):
            return part
    raise TypeError("renumbered positions need a layer with a RotaryEmbedding")


def _unembedding(model: LlamaModel) -> Tensor:
    """``(V, d_model)``: the matrix that scores the vocabulary (the embedding, if tied)."""
    lm_head = getattr(model, "lm_head", None)
    weight: Tensor = model.embed.weight if lm_head is None else lm_head.weight
    return weight


def renumbered_streaming_logits(
    model: LlamaModel, input_ids: Tensor, window: int, sinks: int
) -> Tensor:
    """StreamingLLM as Xiao et al. run it: positions counted inside the cache.

    [`masked_logits`][attnlab.llama.experiments.masked_logits] under a
    [`streaming_mask`][attnlab.llama.experiments.streaming_mask] keeps every token at
    its place in the text. StreamingLLM instead numbers the cache: the ``sinks`` first
    tokens at ``0 .. sinks-1``, the window after them, the query last, at
    ``min(i, sinks + window - 1)``. Rotary scores depend only on the distance between
    query and key, and inside the window the distance is the same either way; what
    changes is the distance to the sinks, ``sinks + window - 1 - j`` instead of
    ``i - j``. So each layer scores the window with the original rotation and the sinks
    with the query rotated to its cache position.

    Args:
        model: A [`LlamaModel`][attnlab.llama.LlamaModel].
        input_ids: Token ids.
        window: Keys in the sliding window, the query's own included (``>= 1``).
        sinks: First tokens every query also sees (``>= 0``).

    Returns:
        Logits, computed without gradients.

    Raises:
        TypeError: ``model`` is not a ``LlamaModel``, or ``window``/``sinks`` not an int.
        ValueError: ``window < 1`` or ``sinks < 0``.

    Shape:
        input_ids: ``(T,)`` or ``(B, T)``; output: ``(B, T, V)``.
    """
    model = _check_model(model)
    ids = model.check_ids("input_ids", input_ids)
    T = ids.shape[1]
    mask = streaming_mask(T, window, sinks)  # (T, T), checks window and sinks
    positions = torch.arange(T)  # (T,)
    cache_positions = positions.clamp(max=sinks + window - 1)  # the query's place in the cache
    is_sink = (positions < sinks).expand(T, T)  # (T, T): key j is a sink
    bias = torch.zeros(T, T).masked_fill_(~mask, float("-inf"))  # (T, T)
    with torch.no_grad():
        x = model.embed(ids)  # (B, T, d_model)
        for block in _blocks(model):
            attn = _attention(block)
            h = block.attn_norm(x)  # (B, T, d_model)
            queries = attn.split_heads(attn.q_proj(h))  # (B, H, T, D)
            keys = attn.split_heads(attn.k_proj(h))  # (B, Hkv, T, D)
            values = attn.split_heads(attn.v_proj(h))  # (B, Hkv, T, D)
            group = queries.shape[1] // keys.shape[1]
            keys, values = keys.repeat_interleave(group, 1), values.repeat_interleave(group, 1)
            rotary = _rotary(attn)
            keys_rot = rotary.rotate(keys, positions)  # sinks keep 0 .. sinks-1 either way
            window_scores = rotary.rotate(queries, positions) @ keys_rot.transpose(-2, -1)
            sink_scores = rotary.rotate(queries, cache_positions) @ keys_rot.transpose(-2, -1)
            scores = torch.where(is_sink, sink_scores, window_scores) / queries.shape[-1] ** 0.5
            weights = torch.softmax(scores + bias, dim=-1)  # (B, H, T, T)
            context_vecs = weights @ values  # (B, H, T, D)
            x = x + attn.o_proj(attn.merge_heads(context_vecs))  # residual
            x = x + block.ffn(block.ffn_norm(x))  # residual
        logits: Tensor = model.norm(x) @ _unembedding(model).transpose(-2, -1)  # (B, T, V)
    return logits


def ov_copying_scores(
    model: LlamaModel, sample: int = 1000, seed: int = 0, layers: list[int] | None = None
) -> dict[str, Tensor]:
    """Every head's OV circuit, read as two copying scores (Elhage et al. 2021; ARENA).

    A head's *OV circuit* is what it writes to the logits for the token it attends to,
    skipping every other layer: token ``t``'s embedding, through the head's RMSNorm
    scale, its value and output projections, the final norm's scale and the
    unembedding, ``W_E W_V W_O W_U``, a ``(V, V)`` matrix of rank ``D``. A copying
    head puts each token's own logit high on its row. Two standard readings:

    * ``eigenvalue``: Elhage et al.'s *A Mathematical Framework for Transformer
      Circuits* (2021), ``sum(eig) / sum(|eig|)`` over the circuit's eigenvalues, in
      ``[-1, 1]``; near 1 for a head that copies. The nonzero eigenvalues of the
      ``(V, V)`` product are those of its ``(D, D)`` rotation, computed instead.
    * ``top1``: ARENA's induction-heads exercise, the fraction of tokens whose own
      logit is the largest of their row, here on ``sample`` tokens drawn without
      replacement (``seed``), each ranked against the whole vocabulary.

    RMSNorm's division by each vector's size scales a whole row by one positive number,
    which changes no ranking; the eigenvalue score includes the embedding's.

    Args:
        model: A [`LlamaModel`][attnlab.llama.LlamaModel].
        sample: Tokens (rows) for ``top1``, ``1 .. V``.
        seed: The sample's seed.
        layers: Score only these layers (the others stay ``nan``); ``None``: every layer.

    Returns:
        ``{"eigenvalue": ..., "top1": ...}``, each ``(num_layers, num_heads)``.

    Raises:
        TypeError: ``model`` is not a ``LlamaModel``, or ``sample``/``seed`` not an int.
        ValueError: ``sample`` outside ``1 .. V``.
    """
    model = _check_model(model)
    c = model.config
    sample = check_positive_int("sample", sample)
    if sample > c.vocab_size:
        raise ValueError(f"sample must be in 1 .. V = {c.vocab_size}; got {sample}")
    seed = check_int("seed", seed)
    D, group = c.head_dim, c.num_heads // c.num_kv_heads
    chosen = (
        range(c.num_layers)
        if layers is None
        else [_check_index("layer", n, c.num_layers) for n in layers]
    )
    eigenvalue = torch.full((c.num_layers, c.num_heads), float("nan"))
    top1 = torch.full((c.num_layers, c.num_heads), float("nan"))
    with torch.no_grad():
        embed = model.embed.weight.float()  # (V, d)
        unembed = _unembedding(model).float() * model.norm.weight.float()  # (V, d): W_U, scaled
        inv_rms = torch.rsqrt(embed.pow(2).mean(-1, keepdim=True) + c.rms_eps)  # (V, 1)
        gram = unembed.transpose(0, 1) @ (embed * inv_rms)  # (d, d): W_U^T-side times W_E
        rows = torch.randperm(c.vocab_size, generator=torch.Generator().manual_seed(seed))
        rows = rows[:sample]  # (sample,)
        for n in chosen:
            block = _blocks(model)[n]
            attn = _attention(block)
            gamma = block.attn_norm.weight.float()  # (d,)
            w_v = attn.v_proj.weight.float() * gamma  # (Hkv * D, d): the norm's scale folded in
            w_o = attn.o_proj.weight.float()  # (d, H * D)
            for head in range(c.num_heads):
                kv = head // group
                w_v_head = w_v[kv * D : (kv + 1) * D]  # (D, d)
                w_o_head = w_o[:, head * D : (head + 1) * D]  # (d, D)
                # eig(W_E W_V W_O W_U) = eig(W_O W_U W_E W_V) on the D-wide side
                small = w_v_head @ gram.transpose(0, 1) @ w_o_head  # (D, D)
                eig = torch.linalg.eigvals(small.double())
                eigenvalue[n, head] = float(eig.sum().real / eig.abs().sum())
                read = embed[rows] @ w_v_head.transpose(0, 1)  # (sample, D)
                written = w_o_head.transpose(0, 1) @ unembed.transpose(0, 1)  # (D, V)
                logits = read @ written  # (sample, V): rows of W_E W_V W_O W_U
                own = logits.gather(-1, rows[:, None])  # (sample, 1)
                top1[n, head] = float((logits.amax(-1, keepdim=True) <= own).float().mean())
    return {"eigenvalue": eigenvalue, "top1": top1}
