"""Modules, helpers and plots refuse bad arguments with errors that name them.

Gathered from the unit tests of each module: constructors, forward passes, conversions,
the examples and the plots, each given what it cannot use.
"""

from __future__ import annotations

import pytest
import torch
from support import seeded_randn
from torch import nn

from attnlab import (
    AdditiveAttention,
    CausalAttention,
    CrossAttention,
    GroupedQueryAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttentionV2,
    additive_attention_scores,
    attend,
    examples,
    flash_attention,
    mask_from_torch,
    scaled_dot_product_attention,
)
from attnlab.plot import (
    plot_attention,
    plot_heads,
    plot_mask,
    plot_softmax_scaling,
    plot_variance_vs_dim,
)

# --- additive -----------------------------------------------------------------


def test_bad_shapes_and_types_raise() -> None:
    q, k = torch.ones(2, 3), torch.ones(4, 5)
    W_q, W_k, w = torch.ones(3, 6), torch.ones(5, 6), torch.ones(6)
    with pytest.raises(
        ValueError, match=r"W_key must have shape \(E_k, A\) = \(5, 6\); got shape \(3, 6\)"
    ):
        additive_attention_scores(q, k, W_q, torch.ones(3, 6), w)
    with pytest.raises(ValueError, match="W_query"):
        additive_attention_scores(q, k, torch.ones(2, 6), W_k, w)
    with pytest.raises(ValueError, match="w_score must have shape"):
        additive_attention_scores(q, k, W_q, W_k, torch.ones(6, 1))
    with pytest.raises(ValueError, match="queries must have shape"):
        additive_attention_scores(
            torch.ones(3), k, torch.ones(3, 6), torch.ones(5, 6), torch.ones(6)
        )
    with pytest.raises(TypeError, match="keys must be a floating-point tensor"):
        additive_attention_scores(
            q, torch.ones(4, 5, dtype=torch.long), torch.ones(3, 6), torch.ones(5, 6), torch.ones(6)
        )
    with pytest.raises(ValueError, match="hidden_dim must be a positive int; got 0"):
        AdditiveAttention(3, 5, 0)


# --- causal -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"d_in": 0, "d_out": 2}, ValueError, "d_in must be a positive int; got 0"),
        ({"d_in": 3, "d_out": -1}, ValueError, "d_out must be a positive int; got -1"),
        ({"d_in": 3.0, "d_out": 2}, TypeError, "d_in must be a positive int; got float"),
        (
            {"d_in": 3, "d_out": 2, "dropout": 1.5},
            ValueError,
            r"dropout must be in \[0, 1\]; got 1.5",
        ),
        ({"d_in": 3, "d_out": 2, "dropout": -0.1}, ValueError, r"dropout must be in \[0, 1\]"),
        ({"d_in": 3, "d_out": 2, "backend": "magic"}, ValueError, "backend must be one of"),
    ],
)
def test_causal_constructor_errors(kwargs: dict, error: type[Exception], message: str) -> None:
    """Bad sizes, dropout or backend are rejected with a message naming the argument."""
    with pytest.raises(error, match=message):
        CausalAttention(**kwargs)


def test_causal_forward_errors() -> None:
    """Wrong input rank or width and bad padding masks are rejected before computing."""
    module = CausalAttention(3, 2)
    with pytest.raises(ValueError, match=r"x must have shape \(T, d_in\) or \(B, T, d_in\) "
                       r"with d_in = 3; got shape \(2, 4, 5\)"):  # fmt: skip
        module(torch.randn(2, 4, 5))
    with pytest.raises(ValueError, match=r"with d_in = 3; got shape \(3,\)"):
        module(torch.randn(3))
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        module(torch.ones(2, 3, dtype=torch.long))
    x = torch.randn(2, 4, 3)
    with pytest.raises(ValueError, match=r"key_padding_mask must broadcast to \(B, S\) = "
                       r"\(2, 4\); got shape \(2, 5\)"):  # fmt: skip
        module(x, torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"broadcast to \(S,\) = \(4,\); got shape \(2, 4\)"):
        module(x[0], torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="key_padding_mask must be a bool tensor"):
        module(x, torch.ones(2, 4, dtype=torch.long))


# --- examples -----------------------------------------------------------------


def test_seeded_weights_reject_bad_widths() -> None:
    for kwargs, name in (({"d_in": 0, "d_out": 2}, "d_in"), ({"d_in": 3, "d_out": -1}, "d_out")):
        with pytest.raises(ValueError, match=name):
            examples.seeded_weights(**kwargs)
    with pytest.raises(ValueError, match="d_v must be a positive int; got 0"):
        examples.seeded_weights(3, 2, d_v=0)


def test_random_query_key_pairs_reject_bad_sizes() -> None:
    with pytest.raises(ValueError, match="d_k"):
        examples.random_query_key_pairs(0)
    with pytest.raises(ValueError, match="num_pairs must be a positive int; got 0"):
        examples.random_query_key_pairs(4, num_pairs=0)


# --- flash --------------------------------------------------------------------


@pytest.mark.parametrize(
    "block_size, error, message",
    [
        (0, ValueError, r"block_size must be a positive int; got 0"),
        (-3, ValueError, r"block_size must be a positive int; got -3"),
        ((4, 0), ValueError, r"block_size\[1\] must be a positive int; got 0"),
        (
            (1, 2, 3),
            ValueError,
            r"block_size must be an int or a pair \(Bq, Bk\); got a tuple of 3",
        ),
        (2.5, TypeError, r"block_size must be a positive int; got float 2.5"),
        (True, TypeError, r"block_size must be a positive int; got bool True"),
    ],
)
def test_bad_block_size_is_rejected(block_size: object, error: type, message: str) -> None:
    """A block size that is not a positive int (or a pair of them) is rejected by name."""
    q, k, v = seeded_randn(4, 2), seeded_randn(4, 2, seed=1), seeded_randn(4, 2, seed=2)
    with pytest.raises(error, match=message):
        flash_attention(q, k, v, block_size=block_size)  # type: ignore[arg-type]


def test_bad_inputs_are_rejected_before_computing() -> None:
    """The shared checks name the argument and the shape it got."""
    q, k, v = seeded_randn(2, 4, 8), seeded_randn(2, 5, 8, seed=1), seeded_randn(2, 5, 8, seed=2)
    with pytest.raises(ValueError, match=r"key must have shape \(N, \.\.\., S, E\) with E = 8"):
        flash_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match=r"value must have shape \(N, \.\.\., S, Ev\) with S = 5"):
        flash_attention(q, k, v[:, :3])
    with pytest.raises(ValueError, match="attn_mask and is_causal=True were both given"):
        flash_attention(q, k, v, torch.ones(4, 5, dtype=torch.bool), is_causal=True)
    with pytest.raises(
        ValueError, match=r"attn_mask must broadcast to \(N, \.\.\., L, S\) = \(2, 4, 5\)"
    ):
        flash_attention(q, k, v, torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"query must be a torch\.Tensor; got list"):
        flash_attention([1.0], k, v)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\]; got 1.5"):
        flash_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(
        ValueError, match="backend must be one of 'explicit', 'torch', 'flash'; got 'fast'"
    ):
        attend(q, k, v, backend="fast")  # type: ignore[arg-type]


# --- interop ------------------------------------------------------------------


def test_from_torch_rejects_unsupported_modules() -> None:
    """add_bias_kv, add_zero_attn and non-MultiheadAttention modules raise clear errors."""
    with pytest.raises(ValueError, match="add_bias_kv=True, which MultiHeadAttention"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(4, 2, add_bias_kv=True))
    with pytest.raises(ValueError, match="add_zero_attn=True, which MultiHeadAttention"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(4, 2, add_zero_attn=True))
    with pytest.raises(TypeError, match=r"module must be a nn\.MultiheadAttention; got Linear"):
        MultiHeadAttention.from_torch(nn.Linear(4, 4))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"mask must be a torch\.Tensor; got list"):
        mask_from_torch([True])  # type: ignore[arg-type]


def test_to_torch_rejects_what_pytorch_cannot_express() -> None:
    """to_torch refuses d_in != d_out and causal=True, saying why."""
    with pytest.raises(ValueError, match=r"d_in == d_out .*got d_in=4, d_out=6"):
        MultiHeadAttention(4, 6, 2).to_torch()
    with pytest.raises(ValueError, match="to_torch needs causal=False"):
        MultiHeadAttention(4, 4, 2, causal=True).to_torch()


# --- multihead ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((4, 8, 0), {}, ValueError, "num_heads must be a positive int; got 0"),
        ((0, 8, 2), {}, ValueError, "d_in must be a positive int; got 0"),
        ((4, 0, 2), {}, ValueError, "d_out must be a positive int; got 0"),
        ((4, 8, 2), {"kdim": 0}, ValueError, "kdim must be a positive int; got 0"),
        ((4, 8, 2), {"vdim": -2}, ValueError, "vdim must be a positive int; got -2"),
        ((4, 8, 2), {"dropout": 1.5}, ValueError, r"dropout must be in \[0, 1\]; got 1.5"),
        ((4, 8, 2), {"backend": "fast"}, ValueError, "backend must be one of"),
    ],
)
def test_multihead_constructor_errors(
    args: tuple, kwargs: dict, error: type[Exception], message: str
) -> None:
    """Invalid sizes, dropout and backend are rejected by name."""
    with pytest.raises(error, match=message):
        MultiHeadAttention(*args, **kwargs)


def test_cross_attention_constructor_error() -> None:
    """CrossAttention names its context width when it is invalid."""
    with pytest.raises(ValueError, match="d_context must be a positive int; got 0"):
        CrossAttention(4, 0, 8)


def test_multihead_forward_errors() -> None:
    """Shapes, masks and flags are checked before computing, naming argument and shapes."""
    module = MultiHeadAttention(4, 6, 2, kdim=3, vdim=5)
    x, ctx, val = torch.randn(2, 6, 4), torch.randn(2, 8, 3), torch.randn(2, 8, 5)
    cases: list[tuple[dict, type[Exception], str]] = [
        (
            {"query": torch.randn(2, 6, 5), "key": ctx, "value": val},
            ValueError,
            r"query must have shape \(L, d_in\) or \(B, L, d_in\) with d_in = 4; "
            r"got shape \(2, 6, 5\)",
        ),
        (
            {"query": torch.randn(1, 2, 6, 4), "key": ctx, "value": val},
            ValueError,
            r"query must have shape .* got shape \(1, 2, 6, 4\)",
        ),
        (
            {"query": x, "key": torch.randn(2, 8, 4), "value": val},
            ValueError,
            r"key must have shape \(S, kdim\) or \(B, S, kdim\) with kdim = 3; "
            r"got shape \(2, 8, 4\)",
        ),
        (
            {"query": x, "key": torch.randn(3, 8, 3), "value": val},
            ValueError,
            r"key must have shape \(B, S, kdim\) with the batch of query \(2, 6, 4\); "
            r"got shape \(3, 8, 3\)",
        ),
        (
            {"query": x, "key": torch.randn(8, 3), "value": val},
            ValueError,
            r"key must have shape \(B, S, kdim\) with the batch of query",
        ),
        (
            {"query": x, "key": ctx, "value": torch.randn(2, 7, 5)},
            ValueError,
            r"value must have shape \(B, S, vdim\) with the batch and length of key "
            r"\(2, 8, 3\); got shape \(2, 7, 5\)",
        ),
        (
            {"query": x, "key": ctx, "value": val.double()},
            TypeError,
            "query, key and value must share one dtype",
        ),
        (
            {"query": x, "key": ctx, "value": val, "attn_mask": torch.ones(6, 7, dtype=torch.bool)},
            ValueError,
            r"attn_mask must broadcast to \(N, ..., L, S\) = \(2, 2, 6, 8\); got shape \(6, 7\)",
        ),
        (
            {"query": x, "key": ctx, "value": val, "attn_mask": torch.ones(6, 8, dtype=torch.int)},
            TypeError,
            "attn_mask must be a bool tensor",
        ),
        (
            {"query": x, "key": ctx, "value": val, "key_padding_mask": torch.ones(2, 6) > 0},
            ValueError,
            r"key_padding_mask must broadcast to \(B, S\) = \(2, 8\); got shape \(2, 6\)",
        ),
        (
            {"query": x, "key": ctx, "value": val, "need_weights": 1},
            TypeError,
            "need_weights must be a bool; got int",
        ),
        ({"query": [1.0], "key": ctx, "value": val}, TypeError, "query must be a torch.Tensor"),
    ]
    for kwargs, error, message in cases:
        query = kwargs.pop("query")
        with pytest.raises(error, match=message):
            module(query, **kwargs)


def test_from_wrapper_rejects_other_modules() -> None:
    """from_wrapper needs a MultiHeadAttentionWrapper."""
    with pytest.raises(TypeError, match="wrapper must be a MultiHeadAttentionWrapper; got"):
        MultiHeadAttention.from_wrapper(CausalAttention(3, 2))  # type: ignore[arg-type]


def test_wrapper_forward_error() -> None:
    """The wrapper checks its input once, naming x."""
    with pytest.raises(ValueError, match=r"x must have shape .* with d_in = 3; got shape \(2, 4\)"):
        MultiHeadAttentionWrapper(3, 4, 2)(torch.randn(2, 4))


# --- plot ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: plot_attention(torch.rand(2, 2, 2)), r"weights must have shape \(L, S\)"),
        (lambda: plot_attention(torch.rand(2, 3), ["a"]), "row_labels must have 2 entries"),
        (lambda: plot_attention(torch.rand(2, 3), None, ["a"]), "col_labels must have 3"),
        (lambda: plot_mask(torch.ones(3, dtype=torch.bool)), r"mask must have shape \(L, S\)"),
        (lambda: plot_heads(torch.rand(2, 2)), r"weights must have shape \(H, L, S\)"),
        (lambda: plot_heads(torch.rand(2, 3, 3), titles=["x"]), "titles must have 2 entries"),
        (lambda: plot_softmax_scaling(torch.rand(2, 2), [1]), r"scores must have shape \(n,\)"),
        (lambda: plot_softmax_scaling(torch.rand(3), [0]), "factors must be"),
        (lambda: plot_softmax_scaling(torch.rand(3), []), "factors must be"),
        (lambda: plot_variance_vs_dim([2, 4], [1.0], [1.0, 1.0]), "variances_unscaled must"),
        (lambda: plot_variance_vs_dim([2, 4], [1.0, 2.0], [1.0]), "variances_scaled must"),
        (lambda: plot_variance_vs_dim([0], [1.0], [1.0]), "dims must be"),
    ],
)
def test_bad_shapes_raise_value_error_naming_the_argument(call, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        call()


def test_wrong_types_raise_type_error() -> None:
    with pytest.raises(TypeError, match=r"weights must be a torch\.Tensor"):
        plot_attention([[0.5, 0.5]])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="mask must be a boolean tensor"):
        plot_mask(torch.ones(2, 2))
    with pytest.raises(TypeError, match="scores must be a floating-point tensor"):
        plot_softmax_scaling(torch.tensor([1, 2]), [1])


# --- self_attention -----------------------------------------------------------


def test_padding_mask_of_the_wrong_length_is_rejected() -> None:
    layer = SelfAttentionV2(3, 2)
    with pytest.raises(
        ValueError,
        match=r"key_padding_mask must broadcast to \(B, S\) = \(2, 6\); got shape \(2, 5\)",
    ):
        layer(torch.randn(2, 6, 3), key_padding_mask=torch.ones(2, 5, dtype=torch.bool))


# --- llm ----------------------------------------------------------------------


def test_gqa_bad_heads_raise() -> None:
    q, k = torch.randn(4, 3, 8), torch.randn(3, 3, 8)
    for fn in (scaled_dot_product_attention, flash_attention):
        with pytest.raises(ValueError, match="Hkv dividing"):
            fn(q, k, k, enable_gqa=True)
    with pytest.raises(ValueError, match="Hkv dividing"):
        attend(q, k, k, enable_gqa=True)


def test_flash_window_bad_arguments() -> None:
    q = torch.randn(4, 8)
    conflict = r"window is a causal .* do not pass attn_mask or is_causal=True"
    with pytest.raises(ValueError, match=conflict):
        flash_attention(q, q, q, is_causal=True, window=2)
    with pytest.raises(ValueError, match="window must be a positive int; got 0"):
        flash_attention(q, q, q, window=0)


def test_module_bad_arguments() -> None:
    with pytest.raises(ValueError, match="num_kv_heads must divide"):
        GroupedQueryAttention(16, num_heads=4, num_kv_heads=3)
    module = GroupedQueryAttention(16, num_heads=4)
    with pytest.raises(ValueError, match="d_model = 16"):
        module(torch.randn(3, 8))
    with pytest.raises(TypeError, match="KVCache"):
        module(torch.randn(3, 16), cache={})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="LlamaAttention"):
        GroupedQueryAttention.from_hf(torch.nn.Linear(2, 2))
