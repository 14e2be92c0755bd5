"""Generation for [`LlamaModel`][attnlab.llama.LlamaModel]: padded prompts and sampling.

* **Padding.** Prompts of different lengths are one ``(B, T)`` tensor padded to the
  longest, with Hugging Face's ``attention_mask`` (``1`` = real token, ``0`` = padding).
  [`padding_mask`][attnlab.llama.generate.padding_mask] makes it the mask each layer
  combines with its causal rule.
* **Choosing the next token.** ``temperature=0`` is greedy; a positive temperature
  samples from ``softmax(logits / temperature)`` after the optional top-k and top-p
  filters, in Hugging Face's order and with its semantics.

Shapes: ``B`` prompts, ``T`` tokens of the (padded) prompt, ``S`` keys (cached ones
included), ``N`` new tokens, ``V`` vocabulary size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .._validation import (
    check_integer_tensor,
    check_number,
    check_positive_int,
    check_probability,
    check_same_device,
    check_seed,
    check_tensor,
    format_shape,
)

__all__ = [
    "Sampling",
    "check_attention_mask",
    "generate_tokens",
    "left_align",
    "next_token_probs",
    "padding_mask",
    "pick_next_tokens",
    "warp_logits",
]


@dataclass(frozen=True)
class Sampling:
    """How [`LlamaModel.generate`][attnlab.llama.LlamaModel.generate] picks each next token.

    Every field is checked when built. ``temperature`` is ``0`` (greedy) or finite and
    positive; ``top_k`` keeps the tokens scoring at least the k-th best (ties kept);
    ``top_p`` in ``[0, 1]`` keeps the smallest set of most likely tokens whose
    probabilities add up to more than it (always at least one); ``seed`` (``0 .. 2**64 - 1``)
    seeds the sampling generator, ``None`` a fresh random one.
    """

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        temperature = check_number("temperature", self.temperature, at_least=0.0)
        object.__setattr__(self, "temperature", temperature)
        if self.top_k is not None:
            check_positive_int("top_k", self.top_k)
        if self.top_p is not None:
            object.__setattr__(self, "top_p", check_probability("top_p", self.top_p))
        if self.seed is not None:
            check_seed("seed", self.seed)
        if temperature == 0 and (self.top_k is not None or self.top_p is not None):
            name, value = ("top_k", self.top_k) if self.top_k is not None else ("top_p", self.top_p)
            raise ValueError(
                f"{name} filters sampling, which needs temperature > 0; got {name}={value} "
                "with temperature=0 (greedy decoding, which would ignore it)"
            )

    @property
    def greedy(self) -> bool:
        """Whether the most likely token is taken (``temperature == 0``)."""
        return self.temperature == 0

    def generator(self, device: torch.device) -> torch.Generator | None:
        """A generator seeded with ``seed`` (a random seed if ``None``); ``None`` if greedy."""
        if self.greedy:
            return None
        generator = torch.Generator(device=device)
        if self.seed is None:
            generator.seed()
        else:
            generator.manual_seed(self.seed)
        return generator


def _check_logits(logits: object) -> Tensor:
    tensor = check_tensor("logits", logits)
    if not tensor.dtype.is_floating_point or tensor.dim() != 2 or tensor.shape[-1] == 0:
        raise ValueError(
            f"logits must be a floating-point tensor of shape (B, V) with V >= 1; "
            f"got dtype {tensor.dtype}, shape {format_shape(tensor.shape)}"
        )
    return tensor


def warp_logits(logits: Tensor, sampling: Sampling) -> Tensor:
    """The scores sampling draws from ``(B, V)``: temperature, then top-k, then top-p (float32).

    Hugging Face's ``TemperatureLogitsWarper``, ``TopKLogitsWarper`` and
    ``TopPLogitsWarper`` in that order, up to a constant per row: the row's largest logit
    is subtracted first, so a tiny temperature gives ``0`` and ``-inf`` instead of
    ``inf - inf``. Filtered tokens get ``-inf``.
    """
    logits = _check_logits(logits)
    if sampling.greedy:
        raise ValueError("sampling.temperature must be > 0 to warp logits; got 0 (greedy)")
    scores = logits.float()
    below_max = scores - scores.max(dim=-1, keepdim=True).values  # (B, V), <= 0
    # divided in float64: a temperature under float32's smallest number (1e-45) is not 0
    scores = (below_max.double() / sampling.temperature).float()  # (B, V): 0 at the max
    if sampling.top_k is not None:
        k = min(sampling.top_k, scores.shape[-1])
        kth_best = torch.topk(scores, k, dim=-1).values[..., -1:]  # (B, 1)
        scores = scores.masked_fill(scores < kth_best, float("-inf"))
    if sampling.top_p is not None:
        ascending, order = torch.sort(scores, dim=-1)  # (B, V) each, least likely first
        mass_below = ascending.softmax(dim=-1).cumsum(dim=-1)  # (B, V)
        drop_sorted = mass_below <= 1 - sampling.top_p
        drop_sorted[..., -1] = False  # the most likely token always stays
        drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
        scores = scores.masked_fill(drop, float("-inf"))
    return scores


def next_token_probs(logits: Tensor, sampling: Sampling) -> Tensor:
    """Each token's probability of being sampled next, ``softmax(warp_logits(...))``."""
    return torch.softmax(warp_logits(logits, sampling), dim=-1)


def pick_next_tokens(
    logits: Tensor, sampling: Sampling, generator: torch.Generator | None
) -> Tensor:
    """The next token of each row: the most likely (greedy) or one drawn by ``generator``."""
    if sampling.greedy:
        return _check_logits(logits).argmax(dim=-1)  # (B,)
    probs = next_token_probs(logits, sampling)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)


def check_attention_mask(mask: object, ids: Tensor, *, ids_rank: int, past: int) -> Tensor | None:
    """Check an ``attention_mask`` (1 = real token, 0 = padding) and return it as bool ``(B, S)``.

    It covers the ``past`` cached positions and then ``ids``'; a 1-D prompt
    (``ids_rank`` 1) may take a 1-D mask ``(S,)``.
    """
    if mask is None:
        return None
    tensor = check_tensor("attention_mask", mask)
    if tensor.dtype != torch.bool:
        check_integer_tensor("attention_mask", tensor, "1 (real token) or 0 (padding)")
    check_same_device("attention_mask", tensor, ids, "input_ids")
    B, S = ids.shape[0], past + ids.shape[1]
    if tuple(tensor.shape) not in ((B, S), (S,) if ids_rank == 1 else (B, S)):
        raise ValueError(
            f"attention_mask must have shape (B, S) = {format_shape((B, S))}, one entry per "
            f"cached and new position{' (or (S,))' if ids_rank == 1 else ''}; "
            f"got shape {format_shape(tensor.shape)}"
        )
    keep = tensor.reshape(B, S)  # (B, S)
    if keep.dtype == torch.bool:
        return keep
    values = keep.long()  # uint16/32/64 have no comparison kernels
    if not torch.compiler.is_compiling():
        wrong = values[(values != 0) & (values != 1)]
        if wrong.numel():
            raise ValueError(
                f"attention_mask must hold 1 (real token) or 0 (padding); got {int(wrong[0])}"
            )
    return values == 1


def padding_mask(keep: Tensor, T: int) -> Tensor:
    """The extra mask ``(B, 1, T, S)`` of ``T`` new queries: real keys, and each query itself.

    AND-ed with the layer's causal rule, a real query sees the real tokens up to its own;
    a padding query sees only itself, so that no row is empty (an empty row would be NaN,
    and NaN spreads to every later layer even where its weight is 0).
    """
    S = keep.shape[-1]
    queries_at = torch.arange(S - T, S, device=keep.device)  # (T,) positions of the queries
    is_self = queries_at[:, None] == torch.arange(S, device=keep.device)  # (T, S)
    return keep[:, None, None, :] | is_self  # (B, 1, T, S)


def left_align(ids: Tensor, keep: Tensor) -> tuple[Tensor, Tensor]:
    """Move each row's padding to its start, the real tokens keeping their order.

    Generation appends to the end of every row, so the real tokens must end there; with
    rotary positions only the distance between two tokens matters, so a row's real tokens
    then compute what they would unpadded (to rounding).
    """
    order = torch.sort(keep.to(torch.uint8), dim=-1, stable=True).indices  # pads first
    return ids.gather(-1, order), keep.gather(-1, order)


Forward = Callable[..., Tensor]
"""``model(ids, cache=..., attention_mask=...)`` returning the logits ``(B, T, V)``."""


def generate_tokens(
    forward: Forward,
    ids: Tensor,
    keep: Tensor | None,
    *,
    max_new_tokens: int,
    sampling: Sampling,
    stop_at_eos: bool,
    eos_token_id: int,
    cache: Sequence[object],
) -> Tensor:
    """Continue checked prompts by up to ``max_new_tokens`` tokens: ``(B, T) -> (B, T + N)``.

    The worker behind [`LlamaModel.generate`][attnlab.llama.LlamaModel.generate], which
    checks the arguments. The left-aligned prompt is read in one pass that fills
    ``cache`` (one per layer); each step then feeds the token just chosen. With
    ``stop_at_eos``, a finished row continues with ``eos_token_id`` until every row is.
    """
    generator = sampling.generator(ids.device)
    step = ids  # (B, T): the prompt is the first step
    if keep is not None:
        step, keep = left_align(ids, keep)
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)  # (B,)
    new_tokens: list[Tensor] = []  # N x (B, 1)
    for _ in range(max_new_tokens):
        logits = forward(step, cache=cache, attention_mask=keep)  # (B, t, V)
        next_ids = pick_next_tokens(logits[:, -1, :], sampling, generator)  # (B,)
        if stop_at_eos:
            next_ids = torch.where(done, torch.full_like(next_ids, eos_token_id), next_ids)
            done = done | (next_ids == eos_token_id)
        step = next_ids.unsqueeze(-1)  # (B, 1)
        new_tokens.append(step)
        if keep is not None:
            keep = torch.cat([keep, torch.ones_like(step, dtype=torch.bool)], dim=-1)  # (B, S + 1)
        if stop_at_eos and bool(done.all()):
            break
    return torch.cat([ids, *new_tokens], dim=-1)  # (B, T + N)
