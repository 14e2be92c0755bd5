"""The gated delta rule: linear attention whose state corrects what it recalls.

Each head keeps a matrix state ``S`` of shape ``(Dk, Dv)``, a map from keys to values.
Token ``t`` decays it by ``exp(g_t)``, then writes the value's *error*, what ``S``
recalls for ``k_t`` subtracted from ``v_t``, scaled by ``beta_t``; the query reads the
new state (``q_t`` scaled by ``Dk ** -0.5``, as transformers does)::

    S = exp(g_t) * S
    S = S + beta_t * outer(k_t, v_t - S^T k_t)
    o_t = S^T (q_t / sqrt(Dk))

[`gated_delta_rule`][attnlab.gated_delta_rule] runs it token by token
(``chunk_size=None``) or a chunk at a time: inside a chunk every step becomes a few
matrix products and one triangular solve; only the chunks run in sequence.
[`gated_delta_attention_matrix`][attnlab.gated_delta_attention_matrix] gives the
lower-triangular ``A`` with ``o = A @ v`` from a zero state: with ``G`` the cumulative
sum of ``g`` and ``Gamma[i, j] = exp(G_i - G_j)``,

    A = tril(Q K^T * Gamma) @ inv(I + diag(beta) strict_tril(K K^T * Gamma)) @ diag(beta)

Shapes are heads-first: query and key ``(B, H, T, Dk)``, value ``(B, H, T, Dv)``,
``g`` and ``beta`` ``(B, H, T)``, the state ``(B, H, Dk, Dv)``. Queries and keys are used
as given (a layer normalises them first). Half-precision input is computed in float32,
float64 in float64.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ._validation import (
    check_bool,
    check_floating,
    check_positive_int,
    check_same_device,
    format_shape,
)
from .functional import compute_dtype

__all__ = ["gated_delta_attention_matrix", "gated_delta_attention_rows", "gated_delta_rule"]


def _check_heads_first(name: str, tensor: Tensor, wanted: str, shape: tuple[int, ...]) -> None:
    """Raise unless ``tensor`` has ``shape`` (``-1`` entries free), written ``wanted``."""
    if tensor.dim() != len(shape) or any(
        size not in (-1, got) for size, got in zip(shape, tensor.shape, strict=True)
    ):
        raise ValueError(f"{name} must have shape {wanted}; got shape {format_shape(tensor.shape)}")


def _check_inputs(
    query: object, key: object, value: object | None, g: object, beta: object
) -> tuple[Tensor, Tensor, Tensor | None, Tensor, Tensor]:
    """Check the rule's tensors before any arithmetic; return them typed."""
    q = check_floating("query", query)
    k = check_floating("key", key)
    _check_heads_first("query", q, "(B, H, T, Dk)", (-1, -1, -1, -1))
    B, H, T, _ = q.shape
    _check_heads_first("key", k, f"(B, H, T, Dk) = {format_shape(q.shape)} like query", q.shape)
    tensors = {"key": k}
    v = None
    if value is not None:
        v = check_floating("value", value)
        _check_heads_first("value", v, f"(B, H, T, Dv) with (B, H, T) = {(B, H, T)}", (B, H, T, -1))
        tensors["value"] = v
    for name, tensor in tensors.items():
        if tensor.dtype != q.dtype:
            raise TypeError(f"{name} must have query's dtype {q.dtype}; got {tensor.dtype}")
        check_same_device(name, tensor, q, "query")
    log_decay, rate = check_floating("g", g), check_floating("beta", beta)
    for name, tensor in (("g", log_decay), ("beta", rate)):
        _check_heads_first(name, tensor, f"(B, H, T) = {(B, H, T)}", (B, H, T))
        check_same_device(name, tensor, q, "query")
    if q.device.type == "meta":  # shapes only: no values to check
        return q, k, v, log_decay, rate
    for name, tensor in (("g", log_decay), ("beta", rate)):
        if not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{name} must be finite; got a NaN or an infinity")
    if bool((log_decay > 0).any()):
        biggest = float(log_decay.max())
        raise ValueError(
            f"g must be <= 0 (the log of a decay in (0, 1]); got a maximum of {biggest}"
        )
    return q, k, v, log_decay, rate


def _within_chunks(
    query: Tensor, key: Tensor, g: Tensor, beta: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """The products that replace a chunk's steps: ``(W, X, G)``, ``A = W @ X``.

    ``G`` is the cumulative log decay from the chunk's start, ``W = tril(Q K^T * Gamma)``
    reads, ``X = inv(I + diag(beta) strict_tril(K K^T * Gamma)) diag(beta)`` turns
    values into what each step writes (the unit lower-triangular system, solved).

    Shape:
        query, key: ``(..., C, D)``; g, beta: ``(..., C)``; W, X: ``(..., C, C)``; G:
        ``(..., C)``.
    """
    C = query.shape[-2]
    G = g.cumsum(dim=-1)  # (..., C)
    causal = torch.ones(C, C, dtype=torch.bool, device=query.device).tril()
    gamma = (G.unsqueeze(-1) - G.unsqueeze(-2)).masked_fill(~causal, float("-inf")).exp()
    reads = (query @ key.transpose(-2, -1)) * gamma  # (..., C, C): lower triangular
    system = (key @ key.transpose(-2, -1)) * gamma * beta.unsqueeze(-1)  # row i times beta_i
    writes = torch.linalg.solve_triangular(
        system, torch.diag_embed(beta), upper=False, unitriangular=True
    )  # (..., C, C); the diagonal of system is read as ones
    return reads, writes, G


def _recurrent(
    query: Tensor, key: Tensor, value: Tensor, g: Tensor, beta: Tensor, state: Tensor
) -> tuple[Tensor, Tensor]:
    """The rule token by token: ``T`` sequential updates of ``state (B, H, Dk, Dv)``."""
    outputs = []
    for t in range(query.shape[-2]):
        state = state * g[..., t, None, None].exp()  # forget a little
        k_t = key[..., t, :].unsqueeze(-2)  # (B, H, 1, Dk)
        recalled = k_t @ state  # (B, H, 1, Dv): what the state holds for k_t
        error = (value[..., t, :].unsqueeze(-2) - recalled) * beta[..., t, None, None]
        state = state + k_t.transpose(-2, -1) @ error  # write the error, not the value
        outputs.append(query[..., t, :].unsqueeze(-2) @ state)  # (B, H, 1, Dv)
    if not outputs:
        return value.new_zeros(value.shape), state
    return torch.cat(outputs, dim=-2), state


def _chunked(
    query: Tensor, key: Tensor, value: Tensor, g: Tensor, beta: Tensor, state: Tensor, C: int
) -> tuple[Tensor, Tensor]:
    """The rule ``C`` tokens at a time; ``T`` padded to chunks with steps that change nothing."""
    B, H, T, Dk = query.shape
    Dv = value.shape[-1]
    pad = -T % C  # padded steps: k = v = 0, beta = 0, no decay
    query, key, value = (F.pad(x, (0, 0, 0, pad)) for x in (query, key, value))
    g, beta = F.pad(g, (0, pad)), F.pad(beta, (0, pad))
    N = (T + pad) // C
    query, key = query.reshape(B, H, N, C, Dk), key.reshape(B, H, N, C, Dk)
    value = value.reshape(B, H, N, C, Dv)
    reads, writes, G = _within_chunks(query, key, g.reshape(B, H, N, C), beta.reshape(B, H, N, C))
    from_start = G.exp().unsqueeze(-1)  # (B, H, N, C, 1): decay since the chunk began
    to_end = (G[..., -1:] - G).exp().unsqueeze(-1)  # (B, H, N, C, 1): decay until it ends
    chunk_decay = G[..., -1].exp()[..., None, None]  # (B, H, N, 1, 1)
    outputs = []
    for n in range(N):  # the only sequential loop: one step per chunk
        written = writes[:, :, n] @ (value[:, :, n] - (key[:, :, n] * from_start[:, :, n]) @ state)
        old = (query[:, :, n] * from_start[:, :, n]) @ state  # (B, H, C, Dv)
        outputs.append(old + reads[:, :, n] @ written)
        to_state = (key[:, :, n] * to_end[:, :, n]).transpose(-2, -1)  # (B, H, Dk, C)
        state = state * chunk_decay[:, :, n] + to_state @ written
    if not outputs:
        return value.new_zeros(B, H, 0, Dv), state
    return torch.cat(outputs, dim=-2)[:, :, :T], state


def gated_delta_rule(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    g: Tensor,
    beta: Tensor,
    *,
    chunk_size: int | None = 64,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Gated DeltaNet's linear attention: a decaying matrix state written by the delta rule.

    Equals transformers' ``torch_recurrent_gated_delta_rule`` (``chunk_size=None``) and
    ``torch_chunk_gated_delta_rule`` with ``use_qk_l2norm_in_kernel=False``, heads-first
    and without their cast of float64 to float32. Both forms give the same output.

    Args:
        query: Queries, used as given but for the ``Dk ** -0.5`` scale.
        key: Keys (the state stays bounded while ``beta * |k|**2 <= 2``: Gated DeltaNet
            L2-normalises them).
        value: Values.
        g: Log decay per token, ``<= 0``: the state is multiplied by ``exp(g_t)``.
        beta: Write strength per token (a sigmoid's output in Gated DeltaNet).
        chunk_size: Tokens per chunk; ``None`` runs the recurrent form, one token a step.
        initial_state: The state to start from (default zeros), e.g. a cache's.
        output_final_state: Also return the state after the last token.

    Returns:
        ``(output, final_state)``: ``output`` in query's dtype, ``final_state`` (or
        ``None``) in the compute dtype (float32 for half input).

    Shape:
        query, key: ``(B, H, T, Dk)``; value: ``(B, H, T, Dv)``; g, beta: ``(B, H, T)``;
        initial_state, final_state: ``(B, H, Dk, Dv)``; output: ``(B, H, T, Dv)``.
    """
    q, k, v, log_decay, rate = _check_inputs(query, key, value, g, beta)
    assert v is not None  # value was given
    if chunk_size is not None:
        check_positive_int("chunk_size", chunk_size)
    check_bool("output_final_state", output_final_state)
    B, H, _, Dk = q.shape
    Dv = v.shape[-1]
    compute = compute_dtype(q.dtype)
    if initial_state is None:
        state = torch.zeros(B, H, Dk, Dv, dtype=compute, device=q.device)
    else:
        state = check_floating("initial_state", initial_state)
        wanted = (B, H, Dk, Dv)
        _check_heads_first("initial_state", state, f"(B, H, Dk, Dv) = {wanted}", wanted)
        check_same_device("initial_state", state, q, "query")
        state = state.to(compute)
    q = q.to(compute) * Dk**-0.5
    k, v = k.to(compute), v.to(compute)
    log_decay, rate = log_decay.to(compute), rate.to(compute)
    if chunk_size is None:
        output, state = _recurrent(q, k, v, log_decay, rate, state)
    else:
        output, state = _chunked(q, k, v, log_decay, rate, state, chunk_size)
    return output.to(query.dtype), (state if output_final_state else None)


def gated_delta_attention_matrix(query: Tensor, key: Tensor, g: Tensor, beta: Tensor) -> Tensor:
    """The implicit attention of the gated delta rule: ``A`` with ``output = A @ value``.

    ``A = tril(Q K^T * Gamma) @ inv(I + diag(beta) strict_tril(K K^T * Gamma)) @ diag(beta)``
    with ``Q`` scaled by ``Dk ** -0.5``, ``Gamma[i, j] = exp(G_i - G_j)`` and ``G`` the
    cumulative sum of ``g``. ``A @ value`` is [`gated_delta_rule`][attnlab.gated_delta_rule]'s
    output from a zero state. ``A`` is lower triangular (causal); its rows are not
    probabilities: they need not sum to one and may be negative.

    Args:
        query: Queries, as the rule takes them.
        key: Keys.
        g: Log decay per token, ``<= 0``.
        beta: Write strength per token.

    Returns:
        ``A`` in query's dtype.

    Shape:
        query, key: ``(B, H, T, Dk)``; g, beta: ``(B, H, T)``; output: ``(B, H, T, T)``.
    """
    q, k, _, log_decay, rate = _check_inputs(query, key, None, g, beta)
    compute = compute_dtype(q.dtype)
    q = q.to(compute) * q.shape[-1] ** -0.5
    reads, writes, _ = _within_chunks(q, k.to(compute), log_decay.to(compute), rate.to(compute))
    return (reads @ writes).to(query.dtype)


def gated_delta_attention_rows(
    query: Tensor, key: Tensor, g: Tensor, beta: Tensor, past_writes: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The implicit attention's rows for new tokens after cached ones: ``(rows, writes)``.

    After token ``t`` the state is ``S_t = sum_s u_s v_s^T``: what each token wrote, as
    decayed and corrected since. Token ``t`` decays and corrects every earlier write,
    ``u_s <- (I - beta_t k_t k_t^T) exp(g_t) u_s``, adds its own, ``u_t = beta_t k_t``,
    and reads ``A[t, s] = q_t . u_s / sqrt(Dk)``. ``past_writes`` are the cached tokens'
    ``u``'s; without them the rows are
    [`gated_delta_attention_matrix`][attnlab.gated_delta_attention_matrix]'s. One token at
    a time: for decoding, where the closed form would start again from the first token.

    Args:
        query: Queries of the new tokens, as the rule takes them.
        key: Their keys.
        g: Their log decays, ``<= 0``.
        beta: Their write strengths.
        past_writes: The ``u``'s after the cached tokens (``None``: no cached tokens).

    Returns:
        ``rows`` in query's dtype and every token's ``writes`` (pass them back next time).

    Shape:
        query, key: ``(B, H, T, Dk)``; g, beta: ``(B, H, T)``; past_writes: ``(B, H, S, Dk)``;
        rows: ``(B, H, T, S + T)``; writes: ``(B, H, S + T, Dk)``.
    """
    q, k, _, log_decay, rate = _check_inputs(query, key, None, g, beta)
    compute = compute_dtype(q.dtype)
    B, H, T, Dk = q.shape
    if past_writes is None:
        past_writes = q.new_zeros(B, H, 0, Dk, dtype=compute)
    _check_heads_first(
        "past_writes", past_writes, f"(B, H, S, Dk) = ({B}, {H}, S, {Dk})", (B, H, -1, Dk)
    )
    q = q.to(compute) * Dk**-0.5
    k, decay, rate = k.to(compute), log_decay.to(compute).exp(), rate.to(compute)
    writes, rows = past_writes.to(compute), []
    for t in range(T):
        k_t = k[:, :, t, None, :]  # (B, H, 1, Dk)
        decayed = writes * decay[:, :, t, None, None]  # (B, H, S + t, Dk)
        corrected = (
            decayed - rate[:, :, t, None, None] * (decayed * k_t).sum(-1, keepdim=True) * k_t
        )
        writes = torch.cat(
            [corrected, rate[:, :, t, None, None] * k_t], dim=2
        )  # (B, H, S + t + 1, Dk)
        row = (writes @ q[:, :, t, :, None]).squeeze(-1)  # (B, H, S + t + 1)
        rows.append(F.pad(row, (0, T - t - 1)))
    return torch.stack(rows, dim=2).to(query.dtype), writes
