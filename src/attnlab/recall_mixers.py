"""Associative recall with many pairs: softmax attention, Gated DeltaNet and a hybrid.

The task of [`RecallTask`][attnlab.recall.RecallTask] (each pair one token, the question
last), read by a small causal stack instead of one cross-attention: the sequence is
``P`` pair tokens then the question token, and the answer is read at the question's
position. A model is a list of layers named as transformers names them
(``layer_types``):

* ``"full_attention"``: causal [`MultiHeadAttention`][attnlab.MultiHeadAttention], which
  keeps every past token (a KV cache that grows with ``P``);
* ``"linear_attention"``: [`GatedDeltaNet`][attnlab.GatedDeltaNet], whose state is
  ``Dk x Dv`` per head whatever ``P`` is.

[`MIXERS`][attnlab.recall_mixers.MIXERS] holds the three stacks the chapter compares:
all softmax, all Gated DeltaNet, and three Gated DeltaNet layers then one full-attention
layer (Qwen3-Next's 3:1 pattern). Each layer is a pre-norm residual block, no feed-forward.
Two choices differ from Qwen's layer: the short convolution has one tap by default (with
one-token pairs, more taps blend each key with its neighbours), and the decay starts as
flash-linear-attention initialises it (``softplus(dt_bias)`` log-uniform in
``[0.001, 0.1]``). Shapes: ``B`` sequences, ``P`` pairs, ``T = P + 1`` tokens, ``V`` values.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ._validation import check_number, check_positive_int, check_seed, check_str
from .gated_deltanet import GatedDeltaNet
from .multihead import MultiHeadAttention
from .recall import RecallBatch, RecallTask, make_batch, train_steps

__all__ = [
    "LAYER_TYPES",
    "MIXERS",
    "MixerConfig",
    "RecallStack",
    "recall_accuracy",
    "recall_sweep",
    "sequence_batch",
    "train_stack",
    "trained_stack",
]

LAYER_TYPES: tuple[str, ...] = ("full_attention", "linear_attention")
"""The layer kinds a stack may hold, named as in transformers' ``config.layer_types``."""

MIXERS: dict[str, tuple[str, ...]] = {
    "softmax": ("full_attention",) * 4,
    "gated_deltanet": ("linear_attention",) * 4,
    "hybrid": ("linear_attention",) * 3 + ("full_attention",),
}
"""The chapter's three stacks of four layers, by name."""


@dataclass(frozen=True)
class MixerConfig:
    """The sizes of a recall stack, and its ``layer_types`` (one entry per layer).

    Every layer has ``num_heads`` heads of ``d_model // num_heads``; a Gated DeltaNet
    layer's state is ``num_heads`` matrices of that size squared. ``conv_kernel_size`` and
    ``chunk_size`` are the Gated DeltaNet layers' convolution taps and delta-rule chunk.
    """

    layer_types: tuple[str, ...] = MIXERS["hybrid"]
    d_model: int = 32
    num_heads: int = 2
    conv_kernel_size: int = 1
    chunk_size: int = 16

    def __post_init__(self) -> None:
        """Check the sizes and that every layer type is one of ``LAYER_TYPES``."""
        for name in ("d_model", "num_heads", "conv_kernel_size", "chunk_size"):
            check_positive_int(name, getattr(self, name))
        if not isinstance(self.layer_types, tuple) or not self.layer_types:
            raise ValueError(f"layer_types must be a non-empty tuple; got {self.layer_types!r}")
        for kind in self.layer_types:
            if kind not in LAYER_TYPES:
                raise ValueError(
                    f"layer_types entries must be one of {', '.join(LAYER_TYPES)}; got {kind!r}"
                )
        if self.d_model % self.num_heads:
            raise ValueError(
                f"num_heads must divide d_model = {self.d_model}; got {self.num_heads}"
            )

    @property
    def head_dim(self) -> int:
        """``D = d_model // num_heads``: a head's width, and ``Dk = Dv`` of the state."""
        return self.d_model // self.num_heads

    def state_floats(self) -> int:
        """The numbers the linear layers keep per sequence, whatever its length."""
        linear = sum(kind == "linear_attention" for kind in self.layer_types)
        return linear * self.num_heads * self.head_dim**2

    def cache_floats(self, tokens: int) -> int:
        """The numbers the full-attention layers keep for ``tokens`` tokens (keys and values)."""
        full = sum(kind == "full_attention" for kind in self.layer_types)
        return full * 2 * check_positive_int("tokens", tokens) * self.d_model


def _mixer(config: MixerConfig, kind: str) -> nn.Module:
    """One layer's token mixer, of ``kind`` (an entry of ``LAYER_TYPES``)."""
    if kind == "full_attention":
        return MultiHeadAttention(config.d_model, config.d_model, config.num_heads, causal=True)
    D = config.head_dim
    layer = GatedDeltaNet(
        config.d_model,
        config.num_heads,
        config.num_heads,
        D,
        D,
        config.conv_kernel_size,
        chunk_size=config.chunk_size,
    )
    with torch.no_grad():  # FLA's start: softplus(dt_bias) log-uniform in [0.001, 0.1]
        step = torch.empty(config.num_heads).uniform_(math.log(1e-3), math.log(0.1)).exp()
        layer.dt_bias.copy_(step + torch.log(-torch.expm1(-step)))  # softplus's inverse
    return layer


class RecallStack(nn.Module):
    """Pair tokens then the question, through ``config.layer_types``; answered at the end.

    A pair token is ``key_embedding[k] + value_embedding[v]`` (as in
    [`RecallModel`][attnlab.recall.RecallModel]); the question is
    ``key_embedding[q] + query_marker``, the marker telling it from a pair with no value.
    Each layer adds ``mixer(norm(x))`` to ``x``; the last token, normed, gives the logits.

    Args:
        task: The recall task's sizes (``num_keys`` and ``num_values`` set the tables).
        config: The layers and their sizes.

    Shape:
        ``model(batch)``: ``(B, V)`` logits for a batch of ``B`` sequences of ``P`` pairs.
    """

    def __init__(self, task: RecallTask, config: MixerConfig) -> None:
        super().__init__()
        if not isinstance(task, RecallTask):
            raise TypeError(f"task must be a RecallTask; got {type(task).__name__}")
        if not isinstance(config, MixerConfig):
            raise TypeError(f"config must be a MixerConfig; got {type(config).__name__}")
        self.task, self.config, d = task, config, config.d_model
        self.key_embedding = nn.Embedding(task.num_keys, d)
        self.value_embedding = nn.Embedding(task.num_values, d)
        self.query_marker = nn.Parameter(torch.randn(d))
        self.norms = nn.ModuleList(nn.RMSNorm(d) for _ in config.layer_types)
        self.mixers = nn.ModuleList(_mixer(config, kind) for kind in config.layer_types)
        self.final_norm = nn.RMSNorm(d)
        self.readout = nn.Linear(d, task.num_values)

    def forward(self, batch: RecallBatch) -> Tensor:
        """The answer's logits ``(B, V)`` for every sequence of ``batch``."""
        x = sequence_batch(self, batch)  # (B, P + 1, d)
        for norm, mixer in zip(self.norms, self.mixers, strict=True):
            x = x + mixer(norm(x))[0]  # (B, T, d)
        logits: Tensor = self.readout(self.final_norm(x[:, -1]))  # (B, V)
        return logits


def sequence_batch(model: RecallStack, batch: RecallBatch) -> Tensor:
    """The model's input: the pair tokens, then the question token, ``(B, P + 1, d)``.

    Every slot must hold a real pair (``batch.present`` all true): a causal stack has no
    key padding mask, so a stale pair would be read.
    """
    if not bool(batch.present.all()):
        raise ValueError(
            "batch must hold real pairs only (RecallTask with min_pairs == max_pairs); "
            f"got {int((~batch.present).sum())} padded slots"
        )
    pairs = model.key_embedding(batch.keys) + model.value_embedding(batch.values)  # (B, P, d)
    question = model.key_embedding(batch.query) + model.query_marker  # (B, d)
    return torch.cat([pairs, question[:, None, :]], dim=1)


def _task_with(task: RecallTask, pairs: int) -> RecallTask:
    """``task`` with exactly ``pairs`` pairs in every sequence."""
    if not 1 <= pairs <= task.num_keys:
        raise ValueError(f"pairs must be in 1 .. num_keys = {task.num_keys}; got {pairs}")
    return RecallTask(task.num_keys, task.num_values, pairs, pairs)


def train_stack(
    model: RecallStack,
    pairs: tuple[int, int],
    steps: int = 1000,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """Train ``model`` in place with Adam; each step's batch has one number of pairs.

    Args:
        model: The stack, trained in place and left in eval mode.
        pairs: ``(low, high)``: each batch's number of pairs is drawn uniformly from it,
            so one model learns every length it is measured on.
        steps: Optimiser steps, one fresh batch each.
        batch_size: Sequences per batch.
        lr: Adam's learning rate.
        seed: Seeds the data (same seed, same batches).

    Returns:
        The loss after each step.
    """
    if not isinstance(pairs, tuple) or len(pairs) != 2:
        raise ValueError(f"pairs must be a tuple (low, high); got {pairs!r}")
    low, high = (check_positive_int(f"pairs[{i}]", p) for i, p in enumerate(pairs))
    if low > high:
        raise ValueError(f"pairs must be (low, high) with low <= high; got {pairs}")
    _task_with(model.task, high)
    check_positive_int("steps", steps)
    check_positive_int("batch_size", batch_size)
    check_number("lr", lr, above=0.0)
    generator = torch.Generator().manual_seed(check_seed("seed", seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()

    def step_loss() -> Tensor:
        count = int(torch.randint(low, high + 1, (1,), generator=generator))
        batch = make_batch(_task_with(model.task, count), batch_size, generator)
        loss: Tensor = loss_fn(model(batch), batch.target)
        return loss

    return train_steps(model, optimizer, step_loss, steps)


@torch.no_grad()
def recall_accuracy(model: RecallStack, pairs: int, size: int = 1000, seed: int = 12345) -> float:
    """The fraction of ``size`` held-out sequences of ``pairs`` pairs answered right."""
    task = _task_with(model.task, check_positive_int("pairs", pairs))
    generator = torch.Generator().manual_seed(check_seed("seed", seed))
    batch = make_batch(task, check_positive_int("size", size), generator)
    return float((model(batch).argmax(dim=-1) == batch.target).float().mean())


def trained_stack(
    name: str,
    task: RecallTask,
    pairs: tuple[int, int],
    steps: int,
    seed: int = 0,
    config: MixerConfig | None = None,
    lr: float = 3e-3,
) -> tuple[RecallStack, list[float]]:
    """``MIXERS[name]``'s stack (``config``'s sizes), seeded by ``seed`` and trained.

    ``seed`` seeds the initial weights and the training data alike; the other arguments
    are [`train_stack`][attnlab.recall_mixers.train_stack]'s. Returns the model and its
    losses.
    """
    if check_str("name", name) not in MIXERS:
        raise ValueError(f"name must be one of {', '.join(MIXERS)}; got {name!r}")
    base = MixerConfig() if config is None else config
    sizes = dataclasses.replace(base, layer_types=MIXERS[name])
    with torch.random.fork_rng():
        torch.manual_seed(check_seed("seed", seed))
        model = RecallStack(task, sizes)
    return model, train_stack(model, pairs, steps, lr=lr, seed=seed)


def recall_sweep(
    task: RecallTask,
    measured: tuple[int, ...],
    steps: int,
    seed: int = 0,
    config: MixerConfig | None = None,
    size: int = 1000,
    lr: float = 3e-3,
) -> dict[str, Any]:
    """Train each of ``MIXERS`` once on 2 to ``max(measured)`` pairs; accuracy per count.

    Returns ``{"rows": [{"model", "parameters", "state_floats", "seconds", "final_loss",
    "accuracy": [one per measured count]}], "pairs": list(measured)}``.
    """
    if not measured:
        raise ValueError("measured must name at least one number of pairs; got ()")
    for count in measured:  # every count checked before any training
        _task_with(task, check_positive_int("measured entries", count))
    rows = []
    for name in MIXERS:
        start = time.perf_counter()
        model, losses = trained_stack(name, task, (2, max(measured)), steps, seed, config, lr)
        rows.append(
            {
                "model": name,
                "parameters": sum(p.numel() for p in model.parameters()),
                "state_floats": model.config.state_floats(),
                "seconds": time.perf_counter() - start,
                "final_loss": sum(losses[-50:]) / len(losses[-50:]),
                "accuracy": [recall_accuracy(model, p, size) for p in measured],
            }
        )
    return {"pairs": list(measured), "rows": rows}
