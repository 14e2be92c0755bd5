"""MultiHeadAttention vs torch.nn.MultiheadAttention: outputs, gradients, masks, round trips."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support import HYPOTHESIS_SETTINGS
from torch import Tensor, nn

from attnlab import CrossAttention, MultiHeadAttention, mask_from_torch, mask_to_torch

SETTINGS = settings(**HYPOTHESIS_SETTINGS)
TOL = {torch.float32: {"atol": 1e-6, "rtol": 1e-5}, torch.float64: {"atol": 1e-12, "rtol": 1e-10}}


@dataclass(frozen=True)
class Config:
    """A random nn.MultiheadAttention configuration and input sizes."""

    num_heads: int
    head_dim: int
    batch: int
    L: int
    S: int
    bias: bool
    batch_first: bool
    kdim: int | None
    vdim: int | None
    dtype: torch.dtype
    seed: int

    @property
    def embed_dim(self) -> int:
        return self.num_heads * self.head_dim


@st.composite
def configs(draw: st.DrawFn, cross: bool | None = None) -> Config:
    is_cross = draw(st.booleans()) if cross is None else cross
    L = draw(st.integers(1, 7))
    S = draw(st.integers(1, 9).filter(lambda s: s != L)) if is_cross else L
    kdim = draw(st.sampled_from([None, 3, 5])) if is_cross else None
    vdim = draw(st.sampled_from([None, 4, 7])) if is_cross else None
    return Config(
        num_heads=draw(st.integers(2, 4)),
        head_dim=draw(st.integers(1, 5)),
        batch=draw(st.integers(2, 3)),
        L=L,
        S=S,
        bias=draw(st.booleans()),
        batch_first=draw(st.booleans()),
        kdim=kdim,
        vdim=vdim,
        dtype=draw(st.sampled_from([torch.float32, torch.float64])),
        seed=draw(st.integers(0, 2**16)),
    )


def make_torch(cfg: Config, dropout: float = 0.0) -> nn.MultiheadAttention:
    torch.manual_seed(cfg.seed)
    module = nn.MultiheadAttention(
        cfg.embed_dim,
        cfg.num_heads,
        dropout=dropout,
        bias=cfg.bias,
        kdim=cfg.kdim,
        vdim=cfg.vdim,
        batch_first=cfg.batch_first,
        dtype=cfg.dtype,
    )
    if cfg.bias:  # PyTorch initialises biases to zero; make them matter
        with torch.no_grad():
            module.in_proj_bias.uniform_(-1, 1)
            module.out_proj.bias.uniform_(-1, 1)
    return module


def make_inputs(cfg: Config) -> tuple[Tensor, Tensor, Tensor]:
    """Batch-first query, key, value that require grad."""
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    kdim = cfg.kdim or cfg.embed_dim
    vdim = cfg.vdim or cfg.embed_dim
    shapes = [(cfg.batch, cfg.L, cfg.embed_dim), (cfg.batch, cfg.S, kdim), (cfg.batch, cfg.S, vdim)]
    query, key, value = (
        torch.randn(shape, generator=gen, dtype=cfg.dtype).requires_grad_() for shape in shapes
    )
    return query, key, value


def run_torch(
    module: nn.MultiheadAttention, query: Tensor, key: Tensor, value: Tensor, **kwargs: object
) -> tuple[Tensor, Tensor | None]:
    """Call PyTorch's module on batch-first inputs whatever its layout; batch-first output."""
    if not module.batch_first:
        query, key, value = (t.transpose(0, 1) for t in (query, key, value))
    output, weights = module(query, key, value, **kwargs)  # type: ignore[arg-type]
    if not module.batch_first:
        output = output.transpose(0, 1)
    return output, weights


def random_bool_mask(shape: tuple[int, ...], gen: torch.Generator) -> Tensor:
    """A random 'may attend' mask whose first key column is always allowed (no empty row)."""
    allowed = torch.rand(shape, generator=gen) > 0.4
    allowed[..., 0] = True
    return allowed


def assert_grads_match(ours: MultiHeadAttention, theirs: nn.MultiheadAttention, tol: dict) -> None:
    """Gradients of every weight agree, PyTorch's fused tensors split as from_torch splits them."""
    if theirs._qkv_same_embed_dim:
        their_w = theirs.in_proj_weight.grad.chunk(3)
    else:
        their_w = tuple(
            p.grad for p in (theirs.q_proj_weight, theirs.k_proj_weight, theirs.v_proj_weight)
        )
    for proj, grad in zip((ours.W_query, ours.W_key, ours.W_value), their_w, strict=True):
        torch.testing.assert_close(proj.weight.grad, grad, **tol)
    if theirs.in_proj_bias is not None:
        for proj, grad in zip(
            (ours.W_query, ours.W_key, ours.W_value), theirs.in_proj_bias.grad.chunk(3), strict=True
        ):
            torch.testing.assert_close(proj.bias.grad, grad, **tol)
        torch.testing.assert_close(ours.out_proj.bias.grad, theirs.out_proj.bias.grad, **tol)
    torch.testing.assert_close(ours.out_proj.weight.grad, theirs.out_proj.weight.grad, **tol)


MASK_KINDS = ["none", "bool", "float", "per_head_bool", "padding_bool", "padding_float", "causal"]


@SETTINGS
@given(cfg=configs(), mask_kind=st.sampled_from(MASK_KINDS))
def test_outputs_and_gradients_equal_pytorch(cfg: Config, mask_kind: str) -> None:
    """from_torch gives a module whose outputs and all gradients equal PyTorch's, any mask."""
    theirs = make_torch(cfg)
    ours = MultiHeadAttention.from_torch(theirs)
    query, key, value = make_inputs(cfg)
    gen = torch.Generator().manual_seed(cfg.seed + 2)
    B, H, L, S = cfg.batch, cfg.num_heads, cfg.L, cfg.S
    our_kwargs: dict[str, Tensor] = {}
    their_kwargs: dict[str, Tensor | bool] = {}
    if mask_kind == "bool":
        allowed = random_bool_mask((L, S), gen)
        our_kwargs["attn_mask"] = allowed
        their_kwargs["attn_mask"] = mask_to_torch(allowed)  # PyTorch: True = blocked
    elif mask_kind == "float":
        added = torch.randn(L, S, generator=gen, dtype=cfg.dtype)
        our_kwargs["attn_mask"] = their_kwargs["attn_mask"] = added
    elif mask_kind == "per_head_bool":
        allowed = random_bool_mask((B, H, L, S), gen)
        our_kwargs["attn_mask"] = allowed
        their_kwargs["attn_mask"] = mask_to_torch(allowed).reshape(B * H, L, S)
    elif mask_kind == "padding_bool":
        real = random_bool_mask((B, S), gen)
        our_kwargs["key_padding_mask"] = real
        their_kwargs["key_padding_mask"] = mask_to_torch(real)
    elif mask_kind == "padding_float":
        added = torch.randn(B, S, generator=gen, dtype=cfg.dtype)
        our_kwargs["key_padding_mask"] = their_kwargs["key_padding_mask"] = added
    elif mask_kind == "causal":
        ours.causal = True
        blocked = torch.ones(L, S, dtype=torch.bool).triu(diagonal=1)  # top-left aligned
        real = random_bool_mask((B, S), gen)
        our_kwargs["key_padding_mask"] = real
        their_kwargs.update(attn_mask=blocked, key_padding_mask=mask_to_torch(real))
    if mask_kind == "causal" and L == S:
        torch.testing.assert_close(
            blocked.float().masked_fill(blocked, float("-inf")),
            nn.Transformer.generate_square_subsequent_mask(L),
        )

    out_ours = ours(query, key, value, **our_kwargs).output
    assert isinstance(out_ours, Tensor)
    out_theirs, _ = run_torch(theirs, query, key, value, need_weights=False, **their_kwargs)
    tol = TOL[cfg.dtype]
    torch.testing.assert_close(out_ours, out_theirs, **tol)

    grad_out = torch.randn(out_ours.shape, generator=gen, dtype=cfg.dtype)
    grads_ours = torch.autograd.grad(out_ours, (query, key, value), grad_out, retain_graph=True)
    grads_theirs = torch.autograd.grad(out_theirs, (query, key, value), grad_out, retain_graph=True)
    for g_ours, g_theirs in zip(grads_ours, grads_theirs, strict=True):
        torch.testing.assert_close(g_ours, g_theirs, **tol)
    out_ours.backward(grad_out)
    out_theirs.backward(grad_out)
    assert_grads_match(ours, theirs, tol)


@SETTINGS
@given(cfg=configs(), per_head=st.booleans())
def test_returned_weights_equal_pytorch(cfg: Config, per_head: bool) -> None:
    """need_weights returns PyTorch's weights, averaged over heads or one map per head."""
    theirs = make_torch(cfg)
    ours = MultiHeadAttention.from_torch(theirs, backend="explicit")
    query, key, value = make_inputs(cfg)
    out_ours, w_ours = ours(query, key, value, need_weights=True, average_attn_weights=not per_head)
    out_theirs, w_theirs = run_torch(
        theirs, query, key, value, need_weights=True, average_attn_weights=not per_head
    )
    wanted = (cfg.batch, cfg.num_heads, cfg.L, cfg.S) if per_head else (cfg.batch, cfg.L, cfg.S)
    assert w_ours.shape == wanted
    torch.testing.assert_close(out_ours, out_theirs, **TOL[cfg.dtype])
    torch.testing.assert_close(w_ours, w_theirs, **TOL[cfg.dtype])


@SETTINGS
@given(cfg=configs())
def test_from_torch_to_torch_round_trip(cfg: Config) -> None:
    """torch -> attnlab -> torch gives back the same parameters, layout and outputs."""
    original = make_torch(cfg)
    ours = MultiHeadAttention.from_torch(original)
    back = ours.to_torch()
    assert back.batch_first == cfg.batch_first
    assert (back.kdim, back.vdim) == (original.kdim, original.vdim)
    assert back.state_dict().keys() == original.state_dict().keys()
    for name, tensor in original.state_dict().items():
        assert torch.equal(back.state_dict()[name], tensor), name
    query, key, value = make_inputs(cfg)
    out_back, _ = run_torch(back, query, key, value)
    out_orig, _ = run_torch(original, query, key, value)
    assert torch.equal(out_back, out_orig)
    torch.testing.assert_close(ours(query, key, value).output, out_orig, **TOL[cfg.dtype])


@SETTINGS
@given(cfg=configs(), qkv_bias=st.booleans(), out_bias=st.booleans())
def test_to_torch_from_torch_round_trip(cfg: Config, qkv_bias: bool, out_bias: bool) -> None:
    """attnlab -> torch -> attnlab keeps the outputs; missing biases become zeros in PyTorch."""
    torch.manual_seed(cfg.seed)
    ours = MultiHeadAttention(
        cfg.embed_dim,
        cfg.embed_dim,
        cfg.num_heads,
        qkv_bias=qkv_bias,
        kdim=cfg.kdim,
        vdim=cfg.vdim or (cfg.kdim and cfg.embed_dim),  # make_inputs: PyTorch's default
        out_bias=out_bias,
    ).to(cfg.dtype)
    theirs = ours.to_torch(batch_first=cfg.batch_first)
    assert theirs.batch_first == cfg.batch_first
    assert (theirs.in_proj_bias is not None) == (qkv_bias or out_bias)
    again = MultiHeadAttention.from_torch(theirs)
    assert again.torch_batch_first == cfg.batch_first
    assert again.to_torch().batch_first == cfg.batch_first
    query, key, value = make_inputs(cfg)
    expected = ours(query, key, value).output
    torch.testing.assert_close(run_torch(theirs, query, key, value)[0], expected, **TOL[cfg.dtype])
    torch.testing.assert_close(again(query, key, value).output, expected, **TOL[cfg.dtype])


def test_batch_first_false_layout() -> None:
    """A (L, B, E) PyTorch module equals ours on the transposed (B, L, E) input."""
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(12, 3, batch_first=False)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(5, 2, 12)  # (L, B, E), PyTorch's default layout
    expected, _ = theirs(x, x, x)
    torch.testing.assert_close(
        ours(x.transpose(0, 1)).output.transpose(0, 1), expected, atol=1e-6, rtol=0
    )


def test_unbatched_input_equals_pytorch() -> None:
    """An unbatched (L, E) query, with an (S, kdim) key, matches PyTorch's unbatched call."""
    torch.manual_seed(1)
    theirs = nn.MultiheadAttention(8, 2, kdim=3, vdim=3)
    ours = MultiHeadAttention.from_torch(theirs)
    query, context = torch.randn(6, 8), torch.randn(4, 3)
    expected, _ = theirs(query, context, context)
    torch.testing.assert_close(ours(query, context).output, expected, atol=1e-6, rtol=0)


def test_cross_attention_module_equals_pytorch_with_kdim_vdim() -> None:
    """CrossAttention(d_in, d_context, ...) loaded with PyTorch's weights gives PyTorch's output."""
    torch.manual_seed(2)
    theirs = nn.MultiheadAttention(16, 4, kdim=16, vdim=16, batch_first=True)
    theirs_cross = nn.MultiheadAttention(16, 4, kdim=10, vdim=10, batch_first=True)
    ours = MultiHeadAttention.from_torch(theirs_cross)
    cross = CrossAttention(16, 10, 16, num_heads=4, qkv_bias=True)
    cross.load_state_dict(ours.state_dict())
    x, context = torch.randn(2, 6, 16), torch.randn(2, 8, 10)
    expected, _ = theirs_cross(x, context, context)
    torch.testing.assert_close(cross(x, context).output, expected, atol=1e-6, rtol=0)
    assert theirs._qkv_same_embed_dim and not theirs_cross._qkv_same_embed_dim


def test_fully_masked_row_gives_zeros_where_pytorch_gives_nan() -> None:
    """A query with no key to attend to: ours outputs out_proj's bias, PyTorch's module NaN."""
    torch.manual_seed(3)
    theirs = nn.MultiheadAttention(6, 2, batch_first=True)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(1, 3, 6)
    allowed = torch.tensor([[True, True, True], [False, False, False], [True, False, True]])
    out_theirs, _ = theirs(x, x, x, attn_mask=mask_to_torch(allowed))
    out_ours = ours(x, attn_mask=allowed).output
    assert torch.isnan(out_theirs[0, 1]).all()
    torch.testing.assert_close(out_ours[0, 1], ours.out_proj.bias, atol=1e-7, rtol=0)
    torch.testing.assert_close(out_ours[0, [0, 2]], out_theirs[0, [0, 2]], atol=1e-6, rtol=0)


def test_dropout_and_training_mode_carry_over() -> None:
    """from_torch copies dropout and train/eval mode; to_torch copies them back."""
    theirs = nn.MultiheadAttention(8, 2, dropout=0.25).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    assert ours.dropout == 0.25 and not ours.training
    back = ours.train().to_torch()
    assert back.dropout == 0.25 and back.training


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_from_torch_keeps_dtype(dtype: torch.dtype) -> None:
    """The copy lives in the source's dtype, and so does to_torch's module."""
    theirs = nn.MultiheadAttention(4, 2, dtype=dtype)
    ours = MultiHeadAttention.from_torch(theirs)
    assert ours.W_query.weight.dtype == dtype
    assert ours.to_torch().out_proj.weight.dtype == dtype


def test_mask_translation_flips_bools_and_keeps_floats() -> None:
    """mask_from_torch/mask_to_torch invert boolean masks and leave float masks alone."""
    blocked = torch.tensor([[False, True], [False, False]])
    assert torch.equal(mask_from_torch(blocked), ~blocked)
    assert torch.equal(mask_to_torch(mask_from_torch(blocked)), blocked)
    added = torch.tensor([[0.0, float("-inf")], [0.5, 0.0]])
    assert mask_from_torch(added) is added and mask_to_torch(added) is added
