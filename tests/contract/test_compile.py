"""Every public module and function compiles with ``torch.compile(fullgraph=True)``.

``fullgraph=True`` fails on any graph break, so this says that nothing on the path of a
call (the checks included) leaves the graph. The backends are ``eager`` (Dynamo's trace
only) and ``aot_eager`` (AOTAutograd too); the compiled result must equal the eager one.
All compile tests live in this one file: importing ``torch._dynamo`` costs seconds per
process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch._dynamo
from support import seeded_randn

from attnlab import (
    AdditiveAttention,
    CausalAttention,
    CrossAttention,
    GroupedQueryAttention,
    KVCache,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    RotaryEmbedding,
    SelfAttentionV1,
    SelfAttentionV2,
    additive_attention_scores,
    attend,
    attention_scores,
    attention_weights,
    attention_with_weights,
    context_vectors,
    flash_attention,
    scaled_dot_product_attention,
    softmax,
    softmax_naive,
)
from attnlab.llama import DecoderBlock, LlamaConfig, LlamaModel, RMSNorm, SwiGLU

#: A Llama-architecture model of SmolLM2's layout at toy sizes (random weights).
TINY_LLAMA = LlamaConfig(
    vocab_size=50, d_model=16, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=4, ffn_dim=32
)

pytestmark = pytest.mark.long


def _cases() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]]:
    """name -> (callable, args, kwargs): small shapes, lengths no block size divides."""
    torch.manual_seed(0)
    x, context = seeded_randn(2, 5, 8, seed=1), seeded_randn(2, 3, 6, seed=2)
    q, k, v = (
        seeded_randn(2, 2, 5, 4, seed=3),
        seeded_randn(2, 2, 7, 4, seed=4),
        seeded_randn(2, 2, 7, 4, seed=5),
    )
    mask = seeded_randn(5, 7, seed=6) > -1.0
    ids = torch.randint(0, TINY_LLAMA.vocab_size, (2, 5))  # token ids (B, T)
    return {
        "SelfAttentionV1": (SelfAttentionV1(8, 4), (x,), {}),
        "SelfAttentionV2": (SelfAttentionV2(8, 4), (x,), {}),
        "CausalAttention": (CausalAttention(8, 4), (x, x[..., 0] > -1.0), {}),
        "MultiHeadAttentionWrapper": (MultiHeadAttentionWrapper(8, 4, 2, causal=True), (x,), {}),
        "MultiHeadAttention": (MultiHeadAttention(8, 4, 2, causal=True), (x,), {}),
        "MultiHeadAttention-explicit-weights": (
            MultiHeadAttention(8, 4, 2, backend="explicit"),
            (x,),
            {"need_weights": True},
        ),
        "MultiHeadAttention-flash": (MultiHeadAttention(8, 4, 2, backend="flash"), (x,), {}),
        "CrossAttention": (CrossAttention(8, 6, 4, 2), (x, context), {}),
        "GroupedQueryAttention": (GroupedQueryAttention(8, 4, 2), (x,), {}),
        "AdditiveAttention": (AdditiveAttention(8, 6, 4), (x, context), {}),
        "RotaryEmbedding": (RotaryEmbedding(4), (q, torch.arange(5)), {}),
        "scaled_dot_product_attention": (
            scaled_dot_product_attention,
            (q, k, v),
            {"attn_mask": mask},
        ),
        "attention_with_weights": (attention_with_weights, (q, k, v), {"is_causal": True}),
        "attention_weights": (attention_weights, (q, k), {}),
        "attention_scores": (attention_scores, (q, k), {}),
        "context_vectors": (context_vectors, (softmax(seeded_randn(2, 2, 5, 7)), v), {}),
        "softmax": (softmax, (q,), {"dim": -2}),
        "softmax_naive": (softmax_naive, (q,), {}),
        "flash_attention": (flash_attention, (q, k, v), {"is_causal": True, "block_size": 3}),
        "attend-torch": (attend, (q, k, v), {"backend": "torch"}),
        "attend-explicit": (attend, (q, k, v), {"backend": "explicit"}),
        "attend-flash": (attend, (q, k, v), {"backend": "flash", "attn_mask": mask}),
        "attend-gqa": (attend, (seeded_randn(2, 4, 5, 4), k, v), {"enable_gqa": True}),
        "LlamaModel": (LlamaModel(TINY_LLAMA).eval(), (ids,), {}),
        "LlamaModel-attention-and-ablation": (
            LlamaModel(TINY_LLAMA).eval(),
            (ids,),
            {"return_attention": True, "ablate": {1: [0, 3]}},
        ),
        "DecoderBlock": (DecoderBlock(TINY_LLAMA), (x.repeat(1, 1, 2),), {}),
        "RMSNorm": (RMSNorm(8), (x,), {}),
        "SwiGLU": (SwiGLU(8, 12), (x,), {}),
        "additive_attention_scores": (
            additive_attention_scores,
            (x, context, seeded_randn(8, 4), seeded_randn(6, 4), seeded_randn(4)),
            {},
        ),
    }


CASES = list(_cases())


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    """Each case compiles from scratch: no cache or recompile limit carried over."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compiled_equals_eager(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                           backend: str) -> None:  # fmt: skip
    with torch.no_grad():
        expected = fn(*args, **kwargs)
        got = torch.compile(fn, backend=backend, fullgraph=True)(*args, **kwargs)
    for ours, theirs in zip(
        got if isinstance(got, tuple) else (got,),
        expected if isinstance(expected, tuple) else (expected,),
        strict=True,
    ):
        torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize("name", CASES)
def test_compiles_without_a_graph_break(name: str) -> None:
    """fullgraph=True on Dynamo's eager backend, for every public module and function."""
    fn, args, kwargs = _cases()[name]
    _compiled_equals_eager(fn, args, kwargs, "eager")


@pytest.mark.parametrize(
    "name", ["MultiHeadAttention", "GroupedQueryAttention", "scaled_dot_product_attention",
             "flash_attention", "softmax"],
)  # fmt: skip
def test_compiles_through_aot_autograd(name: str) -> None:
    """aot_eager also traces the backward graph's preparation: the main paths pass it."""
    fn, args, kwargs = _cases()[name]
    _compiled_equals_eager(fn, args, kwargs, "aot_eager")


def test_grouped_query_attention_with_a_cache_compiles() -> None:
    """Decoding through a KVCache: a prefill, then one token, both in one compiled graph each."""
    torch.manual_seed(0)
    layer = GroupedQueryAttention(8, 4, 2).eval()
    x = seeded_randn(1, 6, 8)
    compiled = torch.compile(layer, backend="eager", fullgraph=True)
    eager_cache, compiled_cache = KVCache(), KVCache()
    with torch.no_grad():
        for chunk in (x[:, :5], x[:, 5:]):
            torch.testing.assert_close(
                compiled(chunk, cache=compiled_cache).output,
                layer(chunk, cache=eager_cache).output,
            )
    assert len(compiled_cache) == 6


def test_a_compiled_model_still_refuses_ids_outside_the_vocabulary() -> None:
    """Tracing cannot read the ids' values: the embedding's own check raises instead."""
    torch.manual_seed(0)
    model = LlamaModel(TINY_LLAMA).eval()
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    with torch.no_grad(), pytest.raises(IndexError, match="out of range"):
        compiled(torch.tensor([[1, TINY_LLAMA.vocab_size]]))
