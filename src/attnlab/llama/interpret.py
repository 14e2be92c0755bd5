"""What a trained model's heads do: attention sinks, previous-token and induction heads.

The functions read the attention weights a [`LlamaModel`][attnlab.llama.LlamaModel]
returns (``model(ids, return_attention=True)``) stacked into one tensor by
[`attention_maps`][attnlab.llama.interpret.attention_maps], and score every head:

* [`sink_scores`][attnlab.llama.interpret.sink_scores]: the mean weight a query puts on
  the first token (an *attention sink*, Xiao et al. 2023);
* [`previous_token_scores`][attnlab.llama.interpret.previous_token_scores]: the mean
  weight on the token just before the query;
* [`induction_scores`][attnlab.llama.interpret.induction_scores]: on a random sequence
  repeated ([`repeated_random_tokens`][attnlab.llama.interpret.repeated_random_tokens]),
  the mean weight from a token of the second copy to the token *after* its earlier
  occurrence (Olsson et al. 2022);

and measure what heads are for: [`copy_losses`][attnlab.llama.interpret.copy_losses]
(the model's loss on each copy), with heads switched off through
``model(ids, ablate=...)`` ([`as_ablation`][attnlab.llama.interpret.as_ablation]).

Experiments that run the model another way live in ``attnlab.llama.experiments``:
StreamingLLM's window ([`streaming_mask`][attnlab.llama.experiments.streaming_mask]) and
one head's direct effect on the logits
([`head_direct_logits`][attnlab.llama.experiments.head_direct_logits]).

Shape legend: ``B`` sequences, ``N`` layers, ``H`` query heads, ``T`` tokens. Layers,
heads and positions count from zero, as in the code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from .._validation import (
    check_length,
    check_logits_and_ids,
    check_seed,
    check_tensor,
    check_token_range,
    format_shape,
)

__all__ = [
    "CopyLosses",
    "as_ablation",
    "attention_maps",
    "copy_losses",
    "induction_scores",
    "previous_token_scores",
    "random_heads",
    "repeated_random_tokens",
    "sink_scores",
    "top_heads",
]


class _AttentionModel(Protocol):
    def __call__(self, input_ids: Tensor, *, return_attention: bool) -> object: ...


def attention_maps(model: _AttentionModel, input_ids: Tensor) -> Tensor:
    """Every layer's and head's attention weights on ``input_ids``, as one tensor.

    Runs ``model(input_ids, return_attention=True)`` without gradients and stacks the
    per-layer weights.

    Args:
        model: A [`LlamaModel`][attnlab.llama.LlamaModel] (or anything called the same
            way that returns ``(logits, [weights per layer])``).
        input_ids: Token ids.

    Returns:
        ``maps[b, layer, head, query, key]``; each row sums to one, zero above the diagonal.

    Shape:
        input_ids: ``(T,)`` or ``(B, T)``; output: ``(B, N, H, T, T)``.
    """
    input_ids = check_tensor("input_ids", input_ids)
    with torch.no_grad():
        result = model(input_ids, return_attention=True)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError("model(input_ids, return_attention=True) must return (logits, attention)")
    return torch.stack(list(result[1]), dim=1)  # N x (B, H, T, T) -> (B, N, H, T, T)


def _check_maps(maps: object, min_tokens: int = 2) -> Tensor:
    maps = check_tensor("maps", maps)
    if maps.dim() != 5 or maps.shape[-1] != maps.shape[-2] or maps.shape[-1] < min_tokens:
        raise ValueError(
            f"maps must have shape (B, N, H, T, T) with T >= {min_tokens}; "
            f"got shape {format_shape(maps.shape)}"
        )
    return maps


def sink_scores(maps: Tensor) -> Tensor:
    """Each head's mean weight on the first token (position 0).

    Averaged over the sequences and over the queries at positions ``1 .. T-1``: the
    query at position 0 can only attend to itself, so it is left out.

    Args:
        maps: Attention weights from [`attention_maps`][attnlab.llama.interpret.attention_maps].

    Returns:
        ``scores[layer, head]``, in ``[0, 1]``.

    Raises:
        ValueError: ``maps`` is not ``(B, N, H, T, T)`` with ``T >= 2``.

    Shape:
        maps: ``(B, N, H, T, T)``; output: ``(N, H)``.
    """
    maps = _check_maps(maps)
    return maps[..., 1:, 0].mean(dim=(0, -1))  # (B, N, H, T-1) -> (N, H)


def previous_token_scores(maps: Tensor) -> Tensor:
    """Each head's mean weight on the token just before the query.

    The weight from position ``i`` to ``i - 1``, averaged over ``i = 1 .. T-1`` and the
    sequences.

    Args:
        maps: Attention weights from [`attention_maps`][attnlab.llama.interpret.attention_maps].

    Returns:
        ``scores[layer, head]``, in ``[0, 1]``.

    Raises:
        ValueError: ``maps`` is not ``(B, N, H, T, T)`` with ``T >= 2``.

    Shape:
        maps: ``(B, N, H, T, T)``; output: ``(N, H)``.
    """
    maps = _check_maps(maps)
    below = maps.diagonal(offset=-1, dim1=-2, dim2=-1)  # (B, N, H, T-1): weight i -> i-1
    return below.mean(dim=(0, -1))


def repeated_random_tokens(
    length: int,
    *,
    batch: int = 1,
    seed: int = 0,
    low: int = 1000,
    high: int = 49152,
    first_token: int | None = 0,
) -> Tensor:
    """Random token ids, each sequence written twice in a row: the induction test.

    The tokens are drawn uniformly from ``low .. high - 1`` by a ``torch.Generator``
    seeded with ``seed`` (the global random state is untouched). With ``first_token``
    (default 0, SmolLM2's ``<|endoftext|>``, which separates documents in training) each
    sequence starts with that token, then the two copies.

    Args:
        length: Tokens in one copy (at least 2).
        batch: How many sequences.
        seed: Seed of the generator.
        low: Smallest id drawn (the default skips the special tokens and single bytes).
        high: One past the largest id drawn (SmolLM2's vocabulary size).
        first_token: The id before the copies, or ``None`` for none.

    Returns:
        Token ids; the last ``2 * length`` positions are the two copies.

    Raises:
        TypeError: An argument is not an int (``first_token``: an int or ``None``).
        ValueError: ``length < 2``, ``batch < 1``, ``low >= high``, a negative
            ``first_token`` or a seed outside ``0 .. 2**64 - 1``.

    Shape:
        output: ``(batch, 2 * length + 1)``, or ``(batch, 2 * length)`` without
        ``first_token``; int64.
    """
    for name, value in (("length", length), ("batch", batch), ("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int; got {type(value).__name__}")
    if length < 2:
        raise ValueError(f"length must be >= 2; got {length}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1; got {batch}")
    if not 0 <= low < high:
        raise ValueError(f"low and high must satisfy 0 <= low < high; got low={low}, high={high}")
    check_seed("seed", seed)
    if first_token is not None:
        check_length("first_token", first_token)  # an id: an int >= 0
    generator = torch.Generator().manual_seed(seed)
    copy = torch.randint(low, high, (batch, length), generator=generator)  # (B, length)
    parts = [copy, copy]
    if first_token is not None:
        parts.insert(0, torch.full((batch, 1), first_token, dtype=torch.int64))
    return torch.cat(parts, dim=-1)  # (B, [1 +] 2 * length)


def _check_length(length: object, T: int) -> int:
    if isinstance(length, bool) or not isinstance(length, int):
        raise TypeError(f"length must be an int; got {type(length).__name__}")
    if not 2 <= length <= T // 2:
        raise ValueError(f"length must be in 2 .. T // 2 = {T // 2} for T = {T}; got {length}")
    return length


def induction_scores(maps: Tensor, length: int) -> Tensor:
    """Each head's mean weight from a token of the second copy to the token after its first.

    The last ``2 * length`` positions must hold a sequence written twice (as from
    [`repeated_random_tokens`][attnlab.llama.interpret.repeated_random_tokens]). The
    token at position ``p`` of the second copy appeared ``length`` positions earlier;
    an induction head looks at what came *next* then, position ``p - length + 1``, the
    token it should predict. Averaged over the ``length`` queries of the second copy
    and the sequences.

    Args:
        maps: Attention weights from [`attention_maps`][attnlab.llama.interpret.attention_maps].
        length: Tokens in one copy.

    Returns:
        ``scores[layer, head]``, in ``[0, 1]``.

    Raises:
        ValueError: ``maps`` is not ``(B, N, H, T, T)``, or ``length`` is not in
            ``2 .. T // 2``.

    Shape:
        maps: ``(B, N, H, T, T)``; output: ``(N, H)``.
    """
    maps = _check_maps(maps, min_tokens=4)
    T = maps.shape[-1]
    length = _check_length(length, T)
    queries = torch.arange(T - length, T)  # the second copy
    keys = queries - length + 1  # the token after each one's earlier occurrence
    return maps[..., queries, keys].mean(dim=(0, -1))  # (B, N, H, length) -> (N, H)


class CopyLosses(NamedTuple):
    """The model's mean loss (cross-entropy, in nats) on each copy of a repeated sequence.

    Attributes:
        first: On tokens ``2 .. length`` of the first copy (never seen before).
        second: On tokens ``2 .. length`` of the second copy (each one seen once).
    """

    first: float
    second: float


def copy_losses(logits: Tensor, input_ids: Tensor, length: int) -> CopyLosses:
    """The next-token loss on each copy of a sequence written twice.

    The loss on the token at position ``p`` is the cross-entropy of ``logits`` at
    ``p - 1`` against it. Each copy's first token is left out: the first copy's
    follows the prefix, and the second copy's follows the first copy's last token,
    which nothing earlier predicts. Both means are then over ``length - 1`` tokens
    (and the sequences).

    Args:
        logits: ``model(input_ids)`` (or with ``ablate=...``).
        input_ids: Token ids whose last ``2 * length`` positions are the two copies.
        length: Tokens in one copy.

    Returns:
        The two mean losses, as Python floats.

    Raises:
        TypeError: ``logits`` is not a floating tensor, or ``input_ids`` not an integer one.
        ValueError: The shapes do not match, an id is outside the vocabulary
            ``0 .. V-1``, or ``length`` does not fit.

    Shape:
        logits: ``(B, T, V)``; input_ids: ``(B, T)`` or ``(T,)``.
    """
    logits, ids = check_logits_and_ids(logits, input_ids)  # (B, T, V), (B, T)
    T = ids.shape[1]
    length = _check_length(length, T)
    ids = check_token_range("input_ids", ids, logits.shape[-1])  # int64
    with torch.no_grad():
        losses = F.cross_entropy(
            logits[:, :-1].transpose(1, 2).float(), ids[:, 1:], reduction="none"
        )  # (B, T-1): losses[:, p - 1] is the loss on the token at p
    start1, start2 = T - 2 * length, T - length
    first = losses[:, start1 : start2 - 1].mean()  # tokens start1+1 .. start2-1
    second = losses[:, start2:].mean()  # tokens start2+1 .. T-1
    return CopyLosses(float(first), float(second))


def _check_scores(scores: object) -> Tensor:
    scores = check_tensor("scores", scores)
    if scores.dim() != 2:
        raise ValueError(f"scores must have shape (N, H); got shape {format_shape(scores.shape)}")
    return scores


def top_heads(scores: Tensor, k: int, *, largest: bool = True) -> list[tuple[int, int]]:
    """The ``k`` heads with the highest (or lowest) scores, best first.

    Args:
        scores: One score per head, from the functions above.
        k: How many heads, ``1 .. N * H``.
        largest: ``False`` for the lowest scores.

    Returns:
        ``(layer, head)`` pairs.

    Raises:
        ValueError: ``scores`` is not 2-D or ``k`` is out of range.

    Shape:
        scores: ``(N, H)``.
    """
    scores = _check_scores(scores)
    N, H = scores.shape
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= N * H:
        raise ValueError(f"k must be an int in 1 .. {N * H}; got {k!r}")
    order = torch.topk(scores.flatten(), k, largest=largest).indices  # (k,)
    return [(int(i) // H, int(i) % H) for i in order]


def random_heads(
    k: int, *, num_layers: int, num_heads: int, seed: int, exclude: Iterable[tuple[int, int]] = ()
) -> list[tuple[int, int]]:
    """``k`` different heads drawn at random (seeded), none of them in ``exclude``.

    Args:
        k: How many heads.
        num_layers: Layers ``N`` of the model.
        num_heads: Query heads ``H`` per layer.
        seed: Seed of the ``torch.Generator`` that draws them.
        exclude: Heads never drawn.

    Returns:
        ``(layer, head)`` pairs, in the order drawn.

    Raises:
        ValueError: Fewer than ``k`` heads are left to draw from, or ``k < 1``.
    """
    excluded = set(exclude)
    pool = [(n, h) for n in range(num_layers) for h in range(num_heads) if (n, h) not in excluded]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(pool):
        raise ValueError(f"k must be an int in 1 .. {len(pool)}; got {k!r}")
    order = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))
    return [pool[int(i)] for i in order[:k]]


def as_ablation(heads: Sequence[tuple[int, int]]) -> dict[int, list[int]]:
    """``(layer, head)`` pairs as the ``ablate`` argument of ``model(...)``.

    Args:
        heads: The heads to switch off.

    Returns:
        ``{layer: [head, ...]}``, layers and heads in increasing order.
    """
    ablate: dict[int, list[int]] = {}
    for layer, head in sorted(set(heads)):
        ablate.setdefault(layer, []).append(head)
    return ablate
