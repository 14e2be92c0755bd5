"""GroupedQueryAttention: equal to Hugging Face's ``LlamaAttention`` (MHA, GQA and MQA,
built from a small random config, nothing downloaded), with a sliding window too (given
the band mask ``i - W < j <= i``, checked against transformers' own window rule)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from support import HF_GROUP, hf_llama_attention

from attnlab import GroupedQueryAttention, KVCache, LinearScaling, RotaryEmbedding


def _hf_forward(attn: torch.nn.Module, x: torch.Tensor, pass_mask: bool) -> torch.Tensor:
    T = x.shape[1]
    cos, sin = attn.rotary(x, torch.arange(T)[None])
    mask = None
    if pass_mask:
        allowed = torch.ones(T, T, dtype=torch.bool).tril()
        mask = torch.zeros(T, T).masked_fill(~allowed, torch.finfo(x.dtype).min)[None, None]
    output, _ = attn(x, position_embeddings=(cos, sin), attention_mask=mask)
    return output


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (4, 1)])  # MHA, GQA, MQA
def test_from_hf_equals_llama_attention(implementation: str, heads: int, kv_heads: int) -> None:
    attn = hf_llama_attention(heads, kv_heads, implementation)
    ours = GroupedQueryAttention.from_hf(attn)
    assert (ours.num_heads, ours.num_kv_heads, ours.head_dim) == (heads, kv_heads, 6)
    assert ours.positions.theta == 1000.0
    x = torch.randn(2, 7, 24)
    with torch.no_grad():
        expected = _hf_forward(attn, x, pass_mask=implementation == "eager")
        for backend in ("torch", "explicit", "flash"):
            ours.backend = backend  # type: ignore[assignment]
            torch.testing.assert_close(ours(x).output, expected, atol=1e-5, rtol=1e-5)
            cache = KVCache()
            chunks = [ours(part, cache=cache).output for part in x.split([3, 1, 3], dim=1)]
            torch.testing.assert_close(torch.cat(chunks, dim=1), expected, atol=1e-5, rtol=1e-5)


def test_window_module_flash_equals_explicit_and_the_window_matters() -> None:
    """Backend consistency only (the independent reference is the band-mask test below)."""
    torch.manual_seed(1)
    module = GroupedQueryAttention(16, num_heads=2, window=3, backend="flash")
    x = torch.randn(9, 16)
    with torch.no_grad():
        explicit = GroupedQueryAttention(16, num_heads=2, window=3, backend="explicit")
        explicit.load_state_dict(module.state_dict())
        torch.testing.assert_close(module(x).output, explicit(x).output)
        unwindowed = GroupedQueryAttention(16, num_heads=2)
        unwindowed.load_state_dict(module.state_dict())
        assert not torch.allclose(module(x).output[5:], unwindowed(x).output[5:])


@pytest.mark.parametrize(("window", "S", "masked"), [(None, 6, False), (6, 6, False), (3, 6, True)])
def test_one_new_token_needs_a_mask_only_when_a_window_hides_keys(
    window: int | None, S: int, masked: bool
) -> None:
    """A decoding step (one query, the last position) sees every key unless a window cuts."""
    torch.manual_seed(0)
    layer = GroupedQueryAttention(16, 4, 2, window=window).eval()
    attn_mask, is_causal = layer.mask(1, S, S - 1, torch.device("cpu"))
    assert (attn_mask is not None) == masked and not is_causal
    x = torch.randn(1, S, 16)
    cache = KVCache()
    with torch.no_grad():
        layer(x[:, :-1], cache=cache)
        last = layer(x[:, -1:], cache=cache).output  # (1, 1, 16): one step through the cache
        torch.testing.assert_close(last, layer(x).output[:, -1:])  # the full forward's last row


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("backend", ["torch", "explicit", "flash"])
def test_attn_mask_hides_padding_keys_as_transformers_does(backend: str) -> None:
    """attn_mask (True = may attend) combined with the causal rule equals Hugging Face's
    LlamaAttention given the same causal-and-padding mask, at every real query."""
    attn = hf_llama_attention(4, 2, "eager")
    ours = GroupedQueryAttention.from_hf(attn, backend=backend)  # type: ignore[arg-type]
    x = torch.randn(2, 7, 24)
    real = torch.ones(2, 7, dtype=torch.bool)
    real[0, :3] = False  # row 0 left-padded by three tokens
    real[1, 5:] = False  # row 1 right-padded by two
    allowed = torch.ones(7, 7, dtype=torch.bool).tril() & real[:, None, None, :]  # (B, 1, T, T)
    cos, sin = attn.rotary(x, torch.arange(7)[None])
    hf_mask = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(x.dtype).min)
    with torch.no_grad():
        expected, _ = attn(x, position_embeddings=(cos, sin), attention_mask=hf_mask)
        output = ours(x, attn_mask=real[:, None, None, :]).output  # (B, 1, 1, S): padding keys
    torch.testing.assert_close(output[real], expected[real], atol=1e-5, rtol=1e-5)


def test_attn_mask_is_checked_and_combines_with_the_cache() -> None:
    """A mask of the wrong shape is refused by name; with a cache it spans every key."""
    torch.manual_seed(0)
    layer = GroupedQueryAttention(16, 4, 2).eval()
    x = torch.randn(2, 6, 16)
    with pytest.raises(ValueError, match=r"attn_mask must broadcast to \(N, \.\.\., L, S\)"):
        layer(x, attn_mask=torch.ones(2, 1, 1, 5, dtype=torch.bool))
    hide = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    hide[:, ..., 1] = False  # key 1 hidden from every query
    with torch.no_grad():
        full = layer(x, attn_mask=hide).output
        cache = KVCache()
        layer(x[:, :4], cache=cache, attn_mask=hide[..., :4])
        step = layer(x[:, 4:], cache=cache, attn_mask=hide).output  # 2 new queries over 6 keys
    torch.testing.assert_close(step, full[:, 4:])
    assert not torch.allclose(full[:, 2:], layer(x).output[:, 2:])  # the mask changed something


def band_mask(T: int, window: int) -> torch.Tensor:
    """(T, T) bool, True where query i may see key j: ``i - window < j <= i``, built here."""
    i = torch.arange(T)[:, None]  # (T, 1)
    j = torch.arange(T)[None, :]  # (1, T)
    return (j <= i) & (j > i - window)


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("backend", ["torch", "explicit", "flash"])
@pytest.mark.parametrize("window", [1, 3, 4])
def test_window_equals_llama_attention_under_a_band_mask(backend: str, window: int) -> None:
    """A windowed module equals Hugging Face's LlamaAttention given the band ``i - W < j <= i``
    (checked against transformers' own sliding-window rule), for a whole sequence and for
    decoding steps one token at a time far past the window through the cache."""
    masking_utils = pytest.importorskip("transformers.masking_utils")
    attn = hf_llama_attention(4, 2, "eager")
    ours = GroupedQueryAttention.from_hf(attn, backend=backend)  # type: ignore[arg-type]
    ours.window = window
    T = 10
    allowed = band_mask(T, window)  # (T, T)
    hf_rule = masking_utils.sliding_window_causal_mask_function(window)
    zero = torch.tensor(0)
    hf_allowed = hf_rule(zero, zero, torch.arange(T)[:, None], torch.arange(T)[None, :])  # (T, T)
    assert torch.equal(allowed, hf_allowed)  # the band above is transformers' window
    x = torch.randn(2, T, 24, generator=torch.Generator().manual_seed(window))
    cos, sin = attn.rotary(x, torch.arange(T)[None])
    hf_mask = torch.zeros(T, T).masked_fill(~allowed, torch.finfo(x.dtype).min)[None, None]
    with torch.no_grad():
        expected, _ = attn(x, position_embeddings=(cos, sin), attention_mask=hf_mask)
        torch.testing.assert_close(ours(x).output, expected, atol=1e-5, rtol=1e-5)
        cache = KVCache()
        steps = [ours(x[:, :2], cache=cache).output]  # the first two tokens, then 8 steps past W
        steps += [ours(x[:, t : t + 1], cache=cache).output for t in range(2, T)]
    torch.testing.assert_close(torch.cat(steps, dim=1), expected, atol=1e-5, rtol=1e-5)


def test_sizes_and_the_parts_given() -> None:
    """Defaults: head_dim = d_model // num_heads, Llama's rotary base 10 000, o_proj's bias
    that of the others; out_bias, backend and a positions part given are the ones used."""
    module = GroupedQueryAttention(16, 4, 2)
    assert (module.d_model, module.head_dim, module.backend) == (16, 4, "torch")
    assert module.positions.theta == 10000.0
    assert "d_model=16, num_heads=4, num_kv_heads=2, head_dim=4" in repr(module)
    assert GroupedQueryAttention(16, 4, bias=True).o_proj.bias is not None
    assert GroupedQueryAttention(16, 4, bias=True, out_bias=False).o_proj.bias is None
    assert GroupedQueryAttention(16, 4, out_bias=True).q_proj.bias is None
    assert GroupedQueryAttention(16, 4, out_bias=True).o_proj.bias is not None
    rope = RotaryEmbedding(4, 500.0)
    assert GroupedQueryAttention(16, 4, positions=rope).positions is rope
    assert GroupedQueryAttention(16, 4, backend="explicit").backend == "explicit"


def test_head_dim_is_needed_when_num_heads_does_not_divide_d_model() -> None:
    with pytest.raises(
        ValueError, match="num_heads must divide d_model = 10 unless head_dim is given; got 4"
    ):
        GroupedQueryAttention(10, 4)
    module = GroupedQueryAttention(10, 4, head_dim=6)
    assert (module.q_proj.out_features, module.o_proj.in_features) == (24, 24)


@pytest.mark.parametrize("norm", ["q_norm", "k_norm"])
def test_query_and_key_norms_are_applied(norm: str) -> None:
    """A q_norm (or k_norm) that zeroes its heads makes every score 0: each query then
    averages the values it may see (a causal running mean), whatever the rotation does."""
    torch.manual_seed(6)
    zero = torch.nn.RMSNorm(4)
    torch.nn.init.zeros_(zero.weight)
    module = GroupedQueryAttention(8, 2, **{norm: zero})  # type: ignore[arg-type]
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        values = module.v_proj(x)  # (B, T, H * D): one key/value head per query head
        running_mean = values.cumsum(dim=1) / torch.arange(1, 6)[:, None]
        torch.testing.assert_close(module(x).output, module.o_proj(running_mean))
        assert not torch.allclose(GroupedQueryAttention(8, 2)(x).output, module(x).output)


class _LlamaLike(torch.nn.Module):
    """A module of LlamaAttention's layout with a plain config (older or other families)."""

    def __init__(self, config: SimpleNamespace, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.config = config
        torch.manual_seed(7)
        for name, (d_in, d_out) in {
            "q_proj": (8, 8),
            "k_proj": (8, 4),
            "v_proj": (8, 4),
            "o_proj": (8, 8),
        }.items():
            setattr(self, name, torch.nn.Linear(d_in, d_out, bias=False, dtype=dtype))


def _config(**extra: object) -> SimpleNamespace:
    return SimpleNamespace(hidden_size=8, num_attention_heads=2, num_key_value_heads=1, **extra)


@pytest.mark.parametrize(
    ("extra", "theta"),
    [
        ({}, 10000.0),  # neither rope_parameters nor rope_theta: Llama's 10 000
        ({"rope_theta": 500.0}, 500.0),  # transformers 4: rope_theta on the config
        ({"rope_parameters": {"rope_theta": 300.0}}, 300.0),  # no rope_type: default
        ({"rope_parameters": {"rope_type": "default", "rope_theta": 200.0}}, 200.0),
    ],
)
def test_from_hf_reads_the_rotary_base_wherever_the_config_keeps_it(
    extra: dict[str, object], theta: float
) -> None:
    """No attention_bias on the config means no bias; head_dim falls back to d_model / H."""
    source = _LlamaLike(_config(**extra))
    ours = GroupedQueryAttention.from_hf(source, backend="explicit")
    assert (ours.positions.theta, ours.head_dim, ours.backend) == (theta, 4, "explicit")
    assert ours.q_proj.bias is None and ours.o_proj.bias is None
    assert torch.equal(ours.k_proj.weight, source.k_proj.weight)


def test_from_hf_keeps_the_source_dtype() -> None:
    source = _LlamaLike(_config(), dtype=torch.float64)
    ours = GroupedQueryAttention.from_hf(source)
    assert {p.dtype for p in ours.parameters()} == {torch.float64}
    assert torch.equal(ours.o_proj.weight, source.o_proj.weight)


def test_from_hf_reads_linear_scaling_and_refuses_an_unknown_rotary_or_module() -> None:
    """Linear scaling (Gemma 3's global layers) is read; a rope_type the package does not
    compute is refused by name, never ignored."""
    linear = {"rope_type": "linear", "factor": 2.0}
    scaled = _LlamaLike(_config(rope_parameters=linear, max_position_embeddings=64))
    assert GroupedQueryAttention.from_hf(scaled).positions.scaling == LinearScaling(2.0)
    unknown = {"rope_type": "longrope", "factor": 2.0}
    longrope = _LlamaLike(_config(rope_parameters=unknown, max_position_embeddings=64))
    with pytest.raises(ValueError, match=r"rope_type must be default, linear, .* got 'longrope'"):
        GroupedQueryAttention.from_hf(longrope)
    headless = _LlamaLike(_config())
    del headless.o_proj
    for attn in (headless, torch.nn.Linear(8, 8)):
        with pytest.raises(TypeError, match=r"attn must be a transformers LlamaAttention \(config"):
            GroupedQueryAttention.from_hf(attn)
