"""AttentionHeads, the one layer composed of parts: every layer is a configuration of it,
and variants (ALiBi's score bias; latent attention's split query/key and value widths)
are parts alone, checked against references written out by hand."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab import (
    AttentionHeads,
    CrossAttention,
    GroupedQueryAttention,
    HeadProjections,
    KVCache,
    MaskRule,
    MultiHeadAttention,
)

class_methods_of_the_layer = set(vars(AttentionHeads))
ALLOWED = {"__init__", "__doc__", "__module__", "__annotations__", "extra_repr"}  # no forward


def latent_width_attention() -> AttentionHeads:
    """Query/key heads of width 6, value heads of width 4 (latent attention's split
    widths), 4 query heads sharing 2 key/value heads, causal: parts only."""
    projections = HeadProjections(
        nn.Linear(10, 4 * 6, bias=False),
        nn.Linear(10, 2 * 6, bias=False),
        nn.Linear(10, 2 * 4, bias=False),
        nn.Linear(4 * 4, 7, bias=False),
        names=("W_query", "W_key", "W_value", "out_proj"),
        head_dim=6,
        value_head_dim=4,
        d_in=10,
        kdim=10,
    )
    return AttentionHeads(
        projections=projections,
        mask=MaskRule(causal=True),
        num_heads=4,
        num_kv_heads=2,
        head_dim=6,
        value_head_dim=4,
    )


def reference_attention(
    q: Tensor, k: Tensor, v: Tensor, bias: Tensor, group: int
) -> tuple[Tensor, Tensor]:
    """softmax(q k^T / sqrt(D) + bias) v, written out; key/value heads repeated per group."""
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias, dim=-1)
    return weights @ v, weights


def heads(x: Tensor, n: int) -> Tensor:
    """(B, T, n * w) -> (B, n, T, w), by reshape and permute (not the skeleton's seam)."""
    B, T, width = x.shape
    return x.reshape(B, T, n, width // n).permute(0, 2, 1, 3)


def test_every_layer_is_a_configuration_of_the_one_class() -> None:
    """No layer defines a forward or any other method of AttentionHeads: each only
    chooses parts in its constructor (plus its own converters and printout)."""
    for layer in (MultiHeadAttention, CrossAttention, GroupedQueryAttention):
        assert issubclass(layer, AttentionHeads)
        own = set(vars(layer)) & class_methods_of_the_layer
        assert own <= {"__init__", "__doc__", "__module__", "__annotations__", "extra_repr"}, (
            layer,
            own,
        )


def test_latent_split_widths_from_parts_equal_a_written_out_reference() -> None:
    """Query/key heads of 6 and value heads of 4 (two query heads per key/value head):
    the layer splits each with its own width and scales by 1 / sqrt(6)."""
    torch.manual_seed(1)
    layer = latent_width_attention().eval()
    x = torch.randn(3, 5, 10)
    with torch.no_grad():
        q, k, v = heads(layer.W_query(x), 4), heads(layer.W_key(x), 2), heads(layer.W_value(x), 2)
        causal = torch.zeros(5, 5).masked_fill(torch.ones(5, 5).triu(1).bool(), -math.inf)
        context, weights = reference_attention(q, k, v, causal, group=2)  # (3, 4, 5, 4)
        expected = layer.out_proj(context.permute(0, 2, 1, 3).reshape(3, 5, 16))
        output, attn_weights = layer(x, need_weights=True)
        torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(attn_weights, weights, atol=1e-5, rtol=1e-5)
        sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        torch.testing.assert_close(context, sdpa, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(layer(x).output, expected, atol=1e-5, rtol=1e-5)


def test_ablate_heads_is_an_ordinary_keyword_on_every_layer() -> None:
    """ablate_heads zeroes those heads' context vectors before the output projection, in
    multi-head and grouped-query attention alike; the output keeps its type."""
    torch.manual_seed(2)
    x = torch.randn(2, 5, 8)
    layers: list[tuple[AttentionHeads, nn.Module]] = []
    mha, gqa = MultiHeadAttention(8, 8, 4, causal=True), GroupedQueryAttention(8, 4, 2)
    layers = [(mha, mha.out_proj), (gqa, gqa.o_proj)]
    for layer, output_projection in layers:
        seen: list[Tensor] = []  # what the output projection receives: (B, T, H * D)
        output_projection.register_forward_pre_hook(lambda _, args, seen=seen: seen.append(args[0]))
        with torch.no_grad():
            full = layer(x, need_weights=True, average_attn_weights=False)
            ablated = layer(x, ablate_heads=[1, 3]).output
        assert isinstance(ablated, Tensor)
        merged = seen[1].view(2, 5, 4, 2)  # (B, T, H, D), the ablated call
        assert merged[:, :, [1, 3]].abs().max() == 0 and merged[:, :, [0, 2]].abs().min() > 0
        assert not torch.allclose(ablated, full.output)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"ablate_heads": [4]}, ValueError, r"ablate_heads must hold ints in 0 \.\. 3; got 4"),
        ({"ablate_heads": [None]}, ValueError, r"ablate_heads must hold ints .* got None"),
        ({"ablate_heads": 2}, TypeError, "ablate_heads must be an iterable of head indices"),
        ({"cache": [KVCache()]}, TypeError, r"cache must be a Cache \(e.g. KVCache\) or None"),
        (
            {"position_embeddings": (torch.ones(5, 3), torch.ones(5, 3))},
            ValueError,
            r"position_embeddings must be \(cos, sin\), each \(L, D\) .* got shape \(5, 3\)",
        ),
        ({"position_embeddings": torch.ones(5, 2)}, TypeError, "position_embeddings must be"),
    ],
)
def test_the_forward_refuses_bad_keywords_by_name(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    layer = GroupedQueryAttention(8, 4, 2)
    with pytest.raises(error, match=match):
        layer(torch.randn(2, 5, 8), **kwargs)  # type: ignore[arg-type]


def test_grouped_query_attention_is_self_attention_only() -> None:
    """A second sequence (a cache passed by position too) is refused by name."""
    layer = GroupedQueryAttention(8, 4, 2).eval()
    x = torch.randn(2, 5, 8)
    with pytest.raises(TypeError, match=r"call it as layer\(x, cache=...\).*Tensor"):
        layer(x, torch.randn(2, 5, 8))
    with pytest.raises(TypeError, match=r"call it as layer\(x, cache=...\).*KVCache"):
        layer(x, KVCache())  # type: ignore[arg-type]


def test_a_models_rotary_table_equals_the_layers_own() -> None:
    """position_embeddings computed once (cos, sin) gives what the layer computes alone,
    also per sequence (B, T, D)."""
    torch.manual_seed(3)
    layer = GroupedQueryAttention(8, 4, 2).eval()
    x = torch.randn(2, 5, 8)
    cos, sin = layer.positions.cos_sin(torch.arange(5))  # (T, D)
    with torch.no_grad():
        torch.testing.assert_close(layer(x, position_embeddings=(cos, sin)).output, layer(x).output)
        per_row = (cos.expand(2, 5, 2), sin.expand(2, 5, 2))  # (B, T, D)
        torch.testing.assert_close(layer(x, position_embeddings=per_row).output, layer(x).output)
        spread = layer.positions.cos_sin(torch.arange(0, 10, 2))  # distances doubled: it is used
        assert not torch.allclose(
            layer(x, position_embeddings=spread).output, layer(x).output, atol=1e-4
        )


@pytest.mark.parametrize("backend", ["torch", "explicit"])
def test_causal_multi_head_attention_decodes_through_a_cache(backend: str) -> None:
    """The skeleton gives MultiHeadAttention a KVCache too: with cached keys the causal
    rule is aligned to the end, so chunks give the whole sequence's output (PyTorch's
    module with a causal mask as the reference)."""
    torch.manual_seed(4)
    layer = MultiHeadAttention(8, 8, 2, causal=True, backend=backend).eval()  # type: ignore[arg-type]
    x = torch.randn(2, 7, 8)
    with torch.no_grad():
        future = torch.ones(7, 7, dtype=torch.bool).triu(1)  # PyTorch's polarity: True = hidden
        plain = MultiHeadAttention(8, 8, 2)  # the same weights without the flag, for to_torch
        plain.load_state_dict(layer.state_dict())
        expected, _ = plain.to_torch()(x, x, x, attn_mask=future, need_weights=False)
        cache = KVCache()
        chunks = [layer(part, cache=cache).output for part in x.split([3, 1, 3], dim=1)]
    torch.testing.assert_close(torch.cat(chunks, dim=1), expected, atol=1e-5, rtol=1e-5)
    assert len(cache) == 7


def test_the_parts_modules_are_the_layers_through_copies_and_reassignment() -> None:
    """The projections part's modules are registered on the layer: a deep copy keeps
    them one object, and a module assigned to the layer is the one the part uses."""
    torch.manual_seed(6)
    layer = GroupedQueryAttention(8, 4, 2).eval()
    x = torch.randn(1, 5, 8)
    twin = copy.deepcopy(layer)
    assert twin.q_proj is twin.projections.get_submodule("q_proj")
    assert twin.q_proj is not layer.q_proj
    with torch.no_grad():
        torch.testing.assert_close(twin(x).output, layer(x).output)
        layer.o_proj = nn.Linear(8, 8, bias=False)
        nn.init.zeros_(layer.o_proj.weight)
        assert layer.projections.get_submodule("o_proj") is layer.o_proj
        assert not layer(x).output.any()  # the new, zero output projection is the one used
    assert sorted(layer.state_dict()) == [f"{n}_proj.weight" for n in "koqv"]
