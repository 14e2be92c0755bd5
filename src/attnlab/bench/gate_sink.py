"""Does an output gate remove the attention sink (``gate_sink``)? Two tiny models, trained.

Qiu et al. (2025, "Gated Attention for Large Language Models") report that a sigmoid
gate on each head's output lets a head output almost nothing, and that the first token
then stops collecting weight. The test here is small enough for a CPU: the recall task of
*Watch attention learn* with questions of two kinds, and two one-layer models that differ
only by the [`OutputGate`][attnlab.OutputGate].

A sequence is a first token (``BOS``), ``pairs`` pair tokens (key symbol and value
symbol in one token, as in ``attnlab.recall``) and ``questions`` question tokens.
A question is a stored key (answer: its value) or, as often, one of ``fillers`` filler
symbols, whose answer is drawn from a fixed distribution of that symbol: it needs nothing
from the pairs and cannot be answered for sure, so any stray output of the head costs
loss that no sharper logit can win back. Questions see the first token and the pairs,
not each other. The model: embeddings, one
[`GroupedQueryAttention`][attnlab.GroupedQueryAttention] without positions, the
residual, a linear read-out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._validation import check_positive_int
from ..gqa import GroupedQueryAttention
from ..layer_parts import OutputGate
from ..positions import Positions
from ..recall import train_steps
from .measure import machine_info

__all__ = [
    "GateSinkTask",
    "QuestionBatch",
    "SinkProbe",
    "held_out_questions",
    "make_questions",
    "measure_probe",
    "run_gate_sink_experiment",
    "train_probe",
]


@dataclass(frozen=True)
class GateSinkTask:
    """The task's sizes and the training's settings."""

    num_keys: int = 8
    num_values: int = 8
    fillers: int = 4
    pairs: int = 8
    questions: int = 8
    d_model: int = 32
    num_heads: int = 2
    steps: int = 800
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 0.1

    @property
    def length(self) -> int:
        """Tokens per sequence: the first token, the pairs, the questions."""
        return 1 + self.pairs + self.questions

    def filler_answers(self) -> Tensor:
        """Each filler symbol's answer distribution ``(fillers, V)``, fixed (seed 5)."""
        generator = torch.Generator().manual_seed(5)
        return torch.softmax(
            1.5 * torch.randn(self.fillers, self.num_values, generator=generator), -1
        )

    def mask(self) -> Tensor:
        """``(T, T)`` bool: causal, except that questions do not see other questions."""
        allowed = torch.ones(self.length, self.length, dtype=torch.bool).tril()
        allowed[1 + self.pairs :, 1 + self.pairs :] = False
        return allowed


class QuestionBatch(NamedTuple):
    """A batch of sequences.

    ``tokens (B, T)``: 0 the first token, then key ids, then filler ids; ``values (B, T)``:
    each pair's value id (``V``: none); ``answers`` and ``asks_key`` ``(B, questions)``.
    """

    tokens: Tensor
    values: Tensor
    answers: Tensor
    asks_key: Tensor


def make_questions(
    task: GateSinkTask, batch_size: int, generator: torch.Generator
) -> QuestionBatch:
    """Draw ``batch_size`` sequences: distinct keys, random values, half the questions keys."""
    B, P, M = check_positive_int("batch_size", batch_size), task.pairs, task.questions
    keys = torch.rand(B, task.num_keys, generator=generator).argsort(-1)[:, :P] + 1  # (B, P)
    values = torch.randint(task.num_values, (B, P), generator=generator)
    asks_key = torch.rand(B, M, generator=generator) < 0.5
    slot = torch.randint(P, (B, M), generator=generator)
    filler = torch.randint(task.fillers, (B, M), generator=generator)
    drawn = torch.multinomial(task.filler_answers()[filler.flatten()], 1, generator=generator)
    question = torch.where(asks_key, keys.gather(1, slot), 1 + task.num_keys + filler)
    answers = torch.where(asks_key, values.gather(1, slot), drawn.view(B, M))
    none = torch.full((B, 1 + P + M), task.num_values)
    tokens = torch.cat([torch.zeros(B, 1, dtype=torch.long), keys, question], dim=1)
    none[:, 1 : 1 + P] = values
    return QuestionBatch(tokens, none, answers, asks_key)


class SinkProbe(nn.Module):
    """Embeddings, one attention layer (gated or not), the residual and a read-out."""

    def __init__(self, task: GateSinkTask, gated: bool) -> None:
        super().__init__()
        d, H = task.d_model, task.num_heads
        self.task = task
        self.token_embedding = nn.Embedding(1 + task.num_keys + task.fillers, d)
        self.value_embedding = nn.Embedding(task.num_values + 1, d, padding_idx=task.num_values)
        gate = OutputGate(d, H, d // H) if gated else None
        self.attention = GroupedQueryAttention(d, H, positions=Positions(), output_gate=gate)
        self.readout = nn.Linear(d, task.num_values)

    def embed(self, batch: QuestionBatch) -> Tensor:
        """Each token's input ``(B, T, d)``."""
        embedded: Tensor = self.token_embedding(batch.tokens) + self.value_embedding(batch.values)
        return embedded

    def forward(
        self, batch: QuestionBatch, mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """The questions' logits ``(B, questions, V)`` and the weights ``(B, H, T, T)``."""
        x = self.embed(batch)
        output, weights = self.attention(x, attn_mask=mask, need_weights=need_weights)
        logits: Tensor = self.readout(x + output)[:, 1 + self.task.pairs :]
        return logits, weights


def train_probe(task: GateSinkTask, gated: bool, seed: int) -> SinkProbe:
    """A probe trained with AdamW on fresh batches; the same seed, the same start and data.

    On one thread (a model this small only loses time to more), restored afterwards.
    """
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = SinkProbe(task, gated)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=task.lr, weight_decay=task.weight_decay)
    mask, loss_fn = task.mask(), nn.CrossEntropyLoss()

    def step_loss() -> Tensor:
        batch = make_questions(task, task.batch_size, generator)
        logits, _ = model(batch, mask)
        loss: Tensor = loss_fn(logits.flatten(0, 1), batch.answers.flatten())
        return loss

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_steps(model, optimizer, step_loss, task.steps)
    finally:
        torch.set_num_threads(threads)
    return model


@torch.no_grad()
def measure_probe(model: SinkProbe, batch: QuestionBatch) -> dict[str, float]:
    """What the probe does with each kind of question, on ``batch``.

    ``key_accuracy``; ``filler_loss`` (nats) against ``filler_floor``, the entropy of
    the answers' distributions (the best any model can do); ``first_weight_*``: the mean
    weight a question puts on the first token; ``gate_*``: the mean gate; and
    ``filler_loss_without_first``: the filler loss with the first token hidden.
    """
    task = model.task
    mask = task.mask()
    logits, weights = model(batch, mask, need_weights=True)
    assert weights is not None
    filler, key = ~batch.asks_key, batch.asks_key
    first = weights[:, :, 1 + task.pairs :, 0].mean(dim=1)  # (B, questions), heads averaged
    hidden = mask.clone()
    hidden[1 + task.pairs :, 0] = False  # the questions no longer see the first token
    without_first, _ = model(batch, hidden)
    probs = task.filler_answers()
    result = {
        "key_accuracy": (logits.argmax(-1) == batch.answers)[key].float().mean().item(),
        "filler_loss": F.cross_entropy(logits[filler], batch.answers[filler]).item(),
        "filler_floor": -(probs * probs.log()).sum(-1).mean().item(),
        "filler_loss_without_first": F.cross_entropy(
            without_first[filler], batch.answers[filler]
        ).item(),
        "first_weight_filler": first[filler].mean().item(),
        "first_weight_key": first[key].mean().item(),
    }
    gate = model.attention.output_gate
    if isinstance(gate, OutputGate):
        gates = gate.gate(model.embed(batch))[:, :, 1 + task.pairs :].mean(dim=(1, 3))
        result["gate_filler"], result["gate_key"] = (
            gates[filler].mean().item(),
            gates[key].mean().item(),
        )
    return result


def held_out_questions(task: GateSinkTask, size: int = 1000) -> QuestionBatch:
    """The sequences every probe is measured on (a seed training never uses)."""
    return make_questions(task, size, torch.Generator().manual_seed(12345))


def run_gate_sink_experiment(quick: bool = False) -> dict[str, Any]:
    """Both models at five seeds, 800 steps each, measured on 1,000 held-out sequences.

    ``quick``: one seed, 20 steps, 200 sequences.
    """
    task = GateSinkTask(steps=20) if quick else GateSinkTask()
    seeds = [0] if quick else [0, 1, 2, 3, 4]
    batch = held_out_questions(task, 200 if quick else 1000)
    rows = [
        {"seed": seed, "gated": gated, **measure_probe(train_probe(task, gated, seed), batch)}
        for seed in seeds
        for gated in (False, True)
    ]
    return {"machine": machine_info(), "quick": quick, "config": asdict(task), "rows": rows}
