"""Associative recall: a task that a model can only solve by learning to attend.

A sequence stores ``P`` key–value pairs, then asks for one key; the answer is the
value stored under it::

    pairs: (c, 7) (a, 2) (f, 5) (b, 0)      query: f      answer: 5

The model is the package's [`MultiHeadAttention`][attnlab.MultiHeadAttention] between
two small embeddings and a linear read-out. Each pair is **one token**,
``key_embedding[k] + value_embedding[v]`` (so no position information is needed); the
query token ``key_embedding[q]`` attends to the pair tokens, a key padding mask hiding
the unused slots; ``readout`` gives one logit per value. Everything is seeded. Shapes:
``B`` sequences, ``P`` pair slots, ``V`` values.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor, nn

from ._validation import check_positive_int
from .functional import attention_scores
from .multihead import MultiHeadAttention

__all__ = [
    "RecallBatch",
    "RecallModel",
    "RecallTask",
    "TrainingHistory",
    "describe",
    "evaluate",
    "example_batch",
    "held_out_batch",
    "key_query_scores",
    "make_batch",
    "matching_key_attention",
    "train",
    "train_steps",
    "trained_recall_model",
]


@dataclass(frozen=True)
class RecallTask:
    """The sizes of an associative-recall task.

    ``num_keys`` key symbols (``a``, ``b``, ...), ``num_values`` value symbols (``0``,
    ``1``, ...), and between ``min_pairs`` and ``max_pairs`` pairs per sequence
    (``max_pairs`` is the number of slots ``P``).
    """

    num_keys: int = 16
    num_values: int = 16
    min_pairs: int = 2
    max_pairs: int = 8

    def __post_init__(self) -> None:
        """Check the sizes: positive, ``min_pairs <= max_pairs <= num_keys``."""
        for name in ("num_keys", "num_values", "min_pairs", "max_pairs"):
            check_positive_int(name, getattr(self, name))
        if not self.min_pairs <= self.max_pairs <= self.num_keys:
            raise ValueError(
                "need min_pairs <= max_pairs <= num_keys (keys in a sequence are distinct); "
                f"got min_pairs={self.min_pairs}, max_pairs={self.max_pairs}, "
                f"num_keys={self.num_keys}"
            )

    def key_name(self, key: int) -> str:
        """The symbol of key ``key``: ``a``, ``b``, ... (then ``k26``, ``k27``, ...)."""
        return chr(ord("a") + key) if key < 26 else f"k{key}"


class RecallBatch(NamedTuple):
    """A batch of recall sequences.

    ``keys``, ``values`` and ``present`` are ``(B, P)``; ``query``, ``target`` and
    ``position`` ``(B,)``. ``present`` is the key padding mask (``True``: the slot
    holds a real pair; the others hold stale random pairs); ``position`` is the slot of
    the matching pair.
    """

    keys: Tensor
    values: Tensor
    present: Tensor
    query: Tensor
    target: Tensor
    position: Tensor


def make_batch(task: RecallTask, batch_size: int, generator: torch.Generator) -> RecallBatch:
    """Draw ``batch_size`` recall sequences from ``generator``.

    Every sequence stores between ``min_pairs`` and ``max_pairs`` pairs with distinct keys
    and random values, then asks for one of its keys. Slots past a sequence's length are
    *not* blank: they hold leftover random pairs (as a reused buffer would), which only the
    key padding mask keeps the model from reading.
    """
    B, P = check_positive_int("batch_size", batch_size), task.max_pairs
    # Distinct keys per sequence: the first P entries of a random permutation.
    keys = torch.rand(B, task.num_keys, generator=generator).argsort(dim=-1)[:, :P]  # (B, P)
    values = torch.randint(task.num_values, (B, P), generator=generator)  # (B, P)
    lengths = torch.randint(task.min_pairs, task.max_pairs + 1, (B,), generator=generator)
    present = torch.arange(P) < lengths[:, None]  # (B, P)
    position = (torch.rand(B, generator=generator) * lengths).long()  # a real slot
    stale_keys = torch.randint(task.num_keys, (B, P), generator=generator)
    stale_values = torch.randint(task.num_values, (B, P), generator=generator)
    keys = torch.where(present, keys, stale_keys)
    values = torch.where(present, values, stale_values)
    rows = torch.arange(B)
    return RecallBatch(
        keys, values, present, keys[rows, position], values[rows, position], position
    )


class RecallModel(nn.Module):
    """One attention layer that can learn associative recall.

    ``scaled=False`` multiplies the query token by ``sqrt(D)`` first, which (with no query
    bias) cancels the layer's ``1 / sqrt(D)``: the scores become raw dot products.
    """

    def __init__(
        self, task: RecallTask, d_model: int = 32, num_heads: int = 1, scaled: bool = True
    ) -> None:
        super().__init__()
        self.task = task
        self.key_embedding = nn.Embedding(task.num_keys, d_model)
        self.value_embedding = nn.Embedding(task.num_values, d_model)
        self.attention = MultiHeadAttention(d_model, d_model, num_heads)
        self.readout = nn.Linear(d_model, task.num_values)
        self.query_gain = 1.0 if scaled else math.sqrt(self.attention.head_dim)

    def forward(self, batch: RecallBatch, *, use_mask: bool = True) -> tuple[Tensor, Tensor]:
        """``(logits (B, V), attn_weights (B, P))``: the answers and the query's weights.

        ``use_mask=False`` lets the query see the stale pairs too.
        """
        pairs = self.key_embedding(batch.keys) + self.value_embedding(batch.values)  # (B, P, d)
        query = self.key_embedding(batch.query)[:, None, :] * self.query_gain  # (B, 1, d)
        mask = batch.present if use_mask else None
        context, attn_weights = self.attention(
            query, pairs, pairs, key_padding_mask=mask, need_weights=True
        )  # (B, 1, d), (B, 1, P)
        logits: Tensor = self.readout(context[:, 0])  # (B, V)
        return logits, attn_weights[:, 0]


class TrainingHistory(NamedTuple):
    """The training loss after each step, and the loop's wall-clock seconds."""

    loss: list[float]
    seconds: float


def train_steps(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    step_loss: Callable[[], Tensor],
    steps: int,
    on_step: Callable[[float], None] | None = None,
) -> list[float]:
    """``steps`` optimiser steps on ``step_loss()`` (a fresh batch's loss), in train mode.

    The one training loop of the recall models ([`train`][attnlab.recall.train], the
    hybrid stacks', the gate probes'): ``model`` is left in eval mode. Returns each step's
    loss; ``on_step`` is called with it.
    """
    losses: list[float] = []
    model.train()
    for _ in range(steps):
        loss = step_loss()
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        losses.append(loss.item())
        if on_step is not None:
            on_step(losses[-1])
    model.eval()
    return losses


def train(
    model: RecallModel,
    steps: int = 300,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    *,
    use_mask: bool = True,
    progress: bool | None = None,
) -> TrainingHistory:
    """Train ``model`` in place with Adam on a fresh batch per step; same seeds, same losses.

    Each step is the loop that "Watch attention learn" writes out. ``progress`` shows a
    tqdm bar (default: only when stderr is a terminal).
    """
    import time

    check_positive_int("steps", steps)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    show = sys.stderr.isatty() if progress is None else progress
    bar = _progress_bar(steps) if show else None

    def step_loss() -> Tensor:
        batch = make_batch(model.task, batch_size, generator)
        logits, _ = model(batch, use_mask=use_mask)
        loss: Tensor = loss_fn(logits, batch.target)
        return loss

    def on_step(loss: float) -> None:
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}")

    start = time.perf_counter()
    losses = train_steps(model, optimizer, step_loss, steps, on_step)
    if bar is not None:
        bar.close()
    return TrainingHistory(losses, time.perf_counter() - start)


def _progress_bar(total: int):  # type: ignore[no-untyped-def]
    """A tqdm bar, or ``None`` when tqdm is not installed."""
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the bench extra
        return None
    return tqdm(total=total, desc="training", unit="step")


@torch.no_grad()
def evaluate(
    model: RecallModel, batch: RecallBatch, *, use_mask: bool = True
) -> tuple[float, float]:
    """``(accuracy, mean attention on the matching key)`` of ``model`` on ``batch``."""
    logits, attn_weights = model(batch, use_mask=use_mask)
    accuracy = (logits.argmax(dim=-1) == batch.target).float().mean().item()
    return accuracy, matching_key_attention(attn_weights, batch).mean().item()


def matching_key_attention(attn_weights: Tensor, batch: RecallBatch) -> Tensor:
    """The weight each query puts on the slot of its matching pair: ``(B, P) -> (B,)``."""
    return attn_weights[torch.arange(attn_weights.shape[0]), batch.position]


def describe(task: RecallTask, batch: RecallBatch, index: int = 0) -> str:
    """One sequence of ``batch`` as text, e.g. ``"c:7 a:2 f:5 b:0 | f? -> 5"``."""
    present = batch.present[index]
    pairs = [
        f"{task.key_name(int(k))}:{int(v)}"
        for k, v, real in zip(batch.keys[index], batch.values[index], present, strict=True)
        if real
    ]
    query, target = task.key_name(int(batch.query[index])), int(batch.target[index])
    return f"{' '.join(pairs)} | {query}? -> {target}"


@torch.no_grad()
def key_query_scores(model: RecallModel) -> Tensor:
    """The scaled score of every key symbol as a query against every key in a pair ``(K, K)``.

    From the key part of the pair alone (``W_query(e_q) . W_key(e_k) / sqrt(D)``, averaged
    over heads). Recall works when each row's largest entry is on the diagonal.
    """
    attention = model.attention
    embeddings = model.key_embedding.weight  # (K, d)
    # The module's own head split: (K, H * D) -> (H, K, D).
    queries = attention.split_heads(attention.W_query(embeddings * model.query_gain))
    keys = attention.split_heads(attention.W_key(embeddings))  # (H, K, D)
    scores = attention_scores(queries, keys) / math.sqrt(attention.head_dim)  # (H, K, K)
    return scores.mean(dim=0)


def example_batch(seed: int = 7, size: int = 3) -> RecallBatch:
    """The chapter's example sequences: ``make_batch(RecallTask(), size, seed 7)``."""
    return make_batch(RecallTask(), size, torch.Generator().manual_seed(seed))


def held_out_batch(size: int = 2000) -> RecallBatch:
    """The held-out sequences the chapter measures on (a seed training never uses)."""
    return make_batch(RecallTask(), size, torch.Generator().manual_seed(12345))


@functools.lru_cache(maxsize=4)
def trained_recall_model(
    seed: int = 0, num_heads: int = 1, scaled: bool = True, d_model: int = 32
) -> tuple[RecallModel, RecallModel, TrainingHistory]:
    """The chapter's model, ``(untrained, trained, history)``, trained once per process.

    ``seed`` seeds the initial weights and the training data. The models are shared by
    the cache: treat them as read-only.
    """
    task = RecallTask()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        untrained = RecallModel(task, d_model, num_heads, scaled).eval()
    trained = RecallModel(task, d_model, num_heads, scaled)
    trained.load_state_dict(untrained.state_dict())
    history = train(trained, seed=seed, progress=False)
    return untrained, trained, history
