"""Associative recall: a task that a model can only solve by learning to attend.

A sequence stores ``P`` key–value pairs, then asks for one key; the answer is the
value stored under it::

    pairs: (c, 7) (a, 2) (f, 5) (b, 0)      query: f      answer: 5

Attention is retrieval by similarity, so the task fits it exactly: the query token
must put its weight on the one pair whose key matches, and copy that pair's value.
Random weights cannot do that (every pair looks about equally relevant); a trained
model must learn a sharp pattern.

The model is the package's own [`MultiHeadAttention`][attnlab.MultiHeadAttention]
between two small embeddings and a linear read-out:

* each pair is **one token**, ``key_embedding[k] + value_embedding[v]``, so no position
  information is needed: which value belongs to which key is in the token itself;
* the query token is ``key_embedding[q]``;
* the query token attends to the pair tokens (cross-attention, one query row), with a
  key padding mask hiding the unused slots of shorter sequences;
* ``readout`` turns the attention output into one logit per value.

Everything is seeded: the same seed gives the same data, the same initial weights and
the same trained model. Shapes: ``B`` sequences, ``P`` pair slots (the longest
sequence), ``d_model`` the embedding width, ``V`` values.
"""

from __future__ import annotations

import functools
import math
import sys
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
    "trained_recall_model",
]


@dataclass(frozen=True)
class RecallTask:
    """The sizes of an associative-recall task.

    Attributes:
        num_keys: How many distinct key symbols exist (written ``a``, ``b``, ...).
        num_values: How many distinct value symbols exist (written ``0``, ``1``, ...).
        min_pairs: Fewest pairs stored in one sequence.
        max_pairs: Most pairs stored in one sequence (also the number of slots ``P``).
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

    Attributes:
        keys: The key of every pair slot, ``(B, P)``; unused slots hold stale random keys.
        values: The value of every pair slot, ``(B, P)``; unused slots hold stale values.
        present: ``(B, P)`` bool, ``True`` for the slots that hold a real pair (the key
            padding mask, in SDPA's polarity).
        query: The key asked for, ``(B,)``.
        target: The value stored under it, ``(B,)``.
        position: The slot of the matching pair, ``(B,)``.
    """

    keys: Tensor
    values: Tensor
    present: Tensor
    query: Tensor
    target: Tensor
    position: Tensor


def make_batch(task: RecallTask, batch_size: int, generator: torch.Generator) -> RecallBatch:
    """Draw ``batch_size`` recall sequences from ``generator``.

    Every sequence stores between ``min_pairs`` and ``max_pairs`` pairs with distinct
    keys and random values, then asks for one of its keys. Slots past a sequence's
    length are *not* blank: they hold leftover random pairs (as a reused buffer would),
    which only the key padding mask keeps the model from reading.

    Args:
        task: The task's sizes.
        batch_size: How many sequences ``B``.
        generator: The random source; the same state gives the same batch.

    Returns:
        The batch.

    Shape:
        keys, values, present: ``(B, P)`` with ``P = task.max_pairs``; query, target,
        position: ``(B,)``.
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

    Args:
        task: The task it is for (its numbers of keys and values).
        d_model: Width of the embeddings and of the attention.
        num_heads: Heads of the attention layer.
        scaled: Divide the scores by ``sqrt(head width)`` as every attention layer does.
            ``False`` multiplies the query token by ``sqrt(D)`` first, which (with no
            query bias) cancels that division: the scores become raw dot products.

    Shape:
        forward's batch: ``B`` sequences of ``P`` slots; output logits ``(B, V)`` and,
        with ``need_weights``, the query's attention weights ``(B, P)``.
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
        """Answer every sequence of ``batch``.

        Args:
            batch: The sequences.
            use_mask: Hide the unused slots with the key padding mask (the right thing);
                ``False`` lets the query see the stale pairs too.

        Returns:
            ``(logits, attn_weights)``: one logit per value, and the query's weights
            over the slots (averaged over heads).

        Shape:
            logits: ``(B, V)``; attn_weights: ``(B, P)``.
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
    """What happened during training.

    Attributes:
        loss: The training loss (cross-entropy) after each step.
        seconds: Wall-clock time the training loop took.
    """

    loss: list[float]
    seconds: float


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
    """Train ``model`` with Adam on fresh random batches (in place).

    Each step is the loop that "Watch attention learn" writes out: a fresh batch, the
    forward pass, the cross-entropy of the answer, ``backward()``, the optimiser's
    ``step()``. Same seeds, same losses.

    Args:
        model: The model to train.
        steps: Optimisation steps; each sees a new batch.
        batch_size: Sequences per step.
        lr: Adam's learning rate.
        seed: Seed of the training data's generator.
        use_mask: Train with the key padding mask.
        progress: Show a tqdm progress bar; default: only when stderr is a terminal.

    Returns:
        The loss after each step and the time taken.
    """
    import time

    check_positive_int("steps", steps)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    show = sys.stderr.isatty() if progress is None else progress
    bar = _progress_bar(steps) if show else None
    losses: list[float] = []
    model.train()
    start = time.perf_counter()
    for _ in range(steps):
        batch = make_batch(model.task, batch_size, generator)
        logits, _ = model(batch, use_mask=use_mask)
        loss = loss_fn(logits, batch.target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    if bar is not None:
        bar.close()
    model.eval()
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
    """Accuracy and mean attention on the matching key, on ``batch``.

    Returns:
        ``(accuracy, attention on the matching key)``: the fraction of sequences answered
        correctly, and the mean weight the query puts on the slot of its matching pair.
    """
    logits, attn_weights = model(batch, use_mask=use_mask)
    accuracy = (logits.argmax(dim=-1) == batch.target).float().mean().item()
    return accuracy, matching_key_attention(attn_weights, batch).mean().item()


def matching_key_attention(attn_weights: Tensor, batch: RecallBatch) -> Tensor:
    """The weight each query puts on the slot of its matching pair.

    Shape:
        attn_weights: ``(B, P)``; output: ``(B,)``.
    """
    return attn_weights[torch.arange(attn_weights.shape[0]), batch.position]


def describe(task: RecallTask, batch: RecallBatch, index: int = 0) -> str:
    """One sequence of ``batch`` as text: its real pairs, the query and the answer.

    Example: ``"c:7 a:2 f:5 b:0 | f? -> 5"``.
    """
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
    """The scaled score of every key symbol as a query against every key symbol in a pair.

    Row ``q``, column ``k``: the score the query token for key ``q`` gives a pair
    holding key ``k``, from the key part of the pair alone
    (``W_query(e_q) . W_key(e_k) / sqrt(D)``, averaged over heads). Recall works when
    each row's largest entry is on the diagonal.

    Shape:
        output: ``(num_keys, num_keys)``.
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
    """The chapter's model, untrained and trained (cached: trained once per process).

    Args:
        seed: Seeds the initial weights (``torch.manual_seed``) and the training data.
        num_heads: Heads of the attention layer.
        d_model: Width of the embeddings and of the attention.
        scaled: Keep the ``1 / sqrt(D)`` scaling (see [`RecallModel`][attnlab.recall.RecallModel]).

    Returns:
        ``(untrained, trained, history)``: a copy of the model as initialised, the
        trained model, and its training history. Treat them as read-only: they are shared.
    """
    task = RecallTask()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        untrained = RecallModel(task, d_model, num_heads, scaled).eval()
    trained = RecallModel(task, d_model, num_heads, scaled)
    trained.load_state_dict(untrained.state_dict())
    history = train(trained, seed=seed, progress=False)
    return untrained, trained, history
