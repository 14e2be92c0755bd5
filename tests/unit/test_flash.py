"""flash_attention: equal to the explicit computation and to PyTorch's SDPA, gradients too."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import attnlab
from attnlab import (
    flash_attention,
    flash_visited_blocks,
    scaled_dot_product_attention,
    sliding_window_mask,
)
from attnlab.backends import attend

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}

SHAPES = [
    # (batch dims, L, S, E, Ev)
    ((), 5, 5, 4, 4),
    ((3,), 7, 11, 8, 5),
    ((2, 3), 13, 6, 16, 8),
    ((2, 4), 33, 33, 8, 8),
    ((1, 12), 40, 70, 64, 64),
]
BLOCK_SIZES = [1, 2, 3, (4, 7), (7, 4), 16, 1000]


def _inputs(
    batch: tuple[int, ...], L: int, S: int, E: int, Ev: int, dtype: torch.dtype, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, L, E, generator=gen, dtype=dtype)
    k = torch.randn(*batch, S, E, generator=gen, dtype=dtype)
    v = torch.randn(*batch, S, Ev, generator=gen, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
@pytest.mark.parametrize("shape", SHAPES)
def test_equals_explicit_and_torch_sdpa(
    shape: tuple[tuple[int, ...], int, int, int, int],
    block_size: int | tuple[int, int],
    causal: bool,
    dtype: torch.dtype,
) -> None:
    """Every shape, block size (dividing L and S or not) and causal flag gives SDPA's output."""
    q, k, v = _inputs(*shape, dtype)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    with torch.no_grad():  # the fast path
        fast = flash_attention(q, k, v, is_causal=causal, block_size=block_size).output
    q.requires_grad_(True)  # the rescaling path, the one autograd sees
    rescaling = flash_attention(q, k, v, is_causal=causal, block_size=block_size).output
    explicit = scaled_dot_product_attention(q, k, v, is_causal=causal)
    tol = TOL[dtype]
    torch.testing.assert_close(fast, expected, atol=tol, rtol=tol)
    torch.testing.assert_close(rescaling.detach(), expected, atol=tol, rtol=tol)
    torch.testing.assert_close(rescaling.detach(), explicit.detach(), atol=tol, rtol=tol)


def test_default_block_sizes_on_a_long_sequence() -> None:
    """With the default blocks (512, 1024), several blocks of both kinds are used and agree."""
    q, k, v = _inputs((1, 3), 700, 1100, 16, 16, torch.float32)
    for causal in (False, True):
        with torch.no_grad():
            out = flash_attention(q, k, v, is_causal=causal).output
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("batch_q, batch_kv", [((2, 1), (1, 3)), ((4,), ()), ((), (2, 2))])
def test_broadcast_batch_dims(batch_q: tuple[int, ...], batch_kv: tuple[int, ...]) -> None:
    """Batch dims broadcast between query and key/value, as in SDPA."""
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(*batch_q, 9, 8, generator=gen)
    k = torch.randn(*batch_kv, 10, 8, generator=gen)
    v = torch.randn(*batch_kv, 10, 6, generator=gen)
    expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(flash_attention(q, k, v, block_size=3).output, expected)


@pytest.mark.parametrize("block_size", [1, 3, (2, 5), 64])
@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_masks_match_torch(mask_kind: str, block_size: int | tuple[int, int]) -> None:
    """Bool masks (True = may attend) and float masks (added) give SDPA's output."""
    q, k, v = _inputs((2, 3), 11, 13, 8, 8, torch.float32, seed=2)
    gen = torch.Generator().manual_seed(3)
    if mask_kind == "bool":
        mask = torch.rand(2, 1, 11, 13, generator=gen) > 0.3
        mask[..., 0] = True  # every row may attend somewhere, so torch gives no NaN
    else:
        mask = torch.randn(11, 13, generator=gen)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out = flash_attention(q, k, v, mask, block_size=block_size).output
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        out, scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("block_size", [1, 2, 4, 100])
def test_fully_masked_rows_give_zeros_not_nan(block_size: int) -> None:
    """A row masked everywhere outputs zeros and a log-sum-exp of -inf, like attnlab's SDPA."""
    q, k, v = _inputs((2,), 6, 8, 4, 4, torch.float32, seed=4)
    mask = torch.ones(6, 8, dtype=torch.bool)
    mask[1] = False  # row 2 sees nothing
    mask[4, :5] = False  # row 5 sees only the last keys: masked in the first blocks
    out, lse = flash_attention(q, k, v, mask, block_size=block_size)
    assert not torch.isnan(out).any()
    assert torch.equal(out[:, 1], torch.zeros(2, 4))
    assert torch.isneginf(lse[:, 1]).all()
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, mask))
    float_mask = torch.zeros(6, 8).masked_fill(~mask, float("-inf"))
    torch.testing.assert_close(
        flash_attention(q, k, v, float_mask, block_size=block_size).output, out
    )


@pytest.mark.parametrize("magnitude", [50.0, 1e3, 1e4])
@pytest.mark.parametrize("causal", [False, True])
def test_large_magnitude_scores_do_not_overflow(magnitude: float, causal: bool) -> None:
    """Scores far beyond exp's float32 range (rows whose max comes late) stay exact."""
    q, k, v = _inputs((2, 2), 24, 24, 8, 8, torch.float32, seed=5)
    q, k = q * magnitude**0.5, k * magnitude**0.5
    k[..., -3:, :] *= 4  # the largest scores sit in the last key block
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    with torch.no_grad():
        fast = flash_attention(q, k, v, is_causal=causal, block_size=5).output
    rescaling = flash_attention(q, k, v, attn_mask=None, is_causal=causal, block_size=5).output
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rescaling, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [1, (3, 5), 100])
def test_log_sum_exp_matches_torch(causal: bool, block_size: int | tuple[int, int]) -> None:
    """The lse is torch.logsumexp of each row's scaled, masked scores."""
    q, k, v = _inputs((2, 3), 9, 12, 8, 8, torch.float64, seed=6)
    scores = q @ k.transpose(-2, -1) / 8**0.5
    if causal:
        scores = scores.masked_fill(~torch.ones(9, 12, dtype=torch.bool).tril(), float("-inf"))
    expected = torch.logsumexp(scores, dim=-1)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            out, lse = flash_attention(
                q.requires_grad_(grad),
                k,
                v,
                is_causal=causal,
                block_size=block_size,
            )
        assert lse.shape == (2, 3, 9)
        torch.testing.assert_close(lse.detach(), expected)
        torch.testing.assert_close(
            out.detach(), F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        )


def test_custom_scale_and_dropout_zero() -> None:
    """A custom scale is used as given; dropout_p=0 changes nothing."""
    q, k, v = _inputs((2,), 7, 9, 4, 4, torch.float32, seed=7)
    expected = F.scaled_dot_product_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(flash_attention(q, k, v, scale=0.3, block_size=2).output, expected)
    torch.testing.assert_close(flash_attention(q, k, v, None, 0.0, scale=0.3).output, expected)


def test_dropout_drops_weights_not_the_normaliser() -> None:
    """With dropout, the output is the dropped, rescaled weights times the values."""
    q, k, v = _inputs((3,), 5, 5, 4, 4, torch.float64, seed=8)
    torch.manual_seed(0)
    out = flash_attention(q, k, v, dropout_p=0.5, block_size=100).output  # one block: one draw
    torch.manual_seed(0)
    weights = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)
    expected = F.dropout(weights, p=0.5, training=True) @ v
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [1, (3, 4), 64])
def test_gradients_match_torch(causal: bool, block_size: int | tuple[int, int]) -> None:
    """Autograd through the blocks gives SDPA's gradients for query, key and value."""
    q, k, v = _inputs((2, 3), 10, 7, 8, 5, torch.float64, seed=9)
    grad_out = torch.randn(
        2, 3, 10, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(10)
    )
    grads = []
    for fn in (flash_attention, F.scaled_dot_product_attention):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        if fn is flash_attention:
            out = flash_attention(*leaves, is_causal=causal, block_size=block_size).output
        else:
            out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
        out.backward(grad_out)
        grads.append([leaf.grad for leaf in leaves])
    for mine, theirs in zip(*grads, strict=True):
        torch.testing.assert_close(mine, theirs)


def test_gradients_with_a_mask_and_a_fully_masked_row() -> None:
    """Gradients stay finite and match the explicit path when a row is fully masked."""
    q, k, v = _inputs((2,), 6, 6, 4, 4, torch.float64, seed=11)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    mask[2] = False
    grads = []
    for fn in (lambda *a: flash_attention(*a).output, scaled_dot_product_attention):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        fn(*leaves, mask).sum().backward()  # type: ignore[operator]
        grads.append([leaf.grad for leaf in leaves])
    for mine, theirs in zip(*grads, strict=True):
        assert torch.isfinite(mine).all()
        torch.testing.assert_close(mine, theirs)


def test_causal_skips_future_blocks() -> None:
    """With is_causal, keys after the query block are never read: NaN there does not leak."""
    q, k, v = _inputs((2,), 8, 8, 4, 4, torch.float32, seed=12)
    k_poisoned, v_poisoned = k.clone(), v.clone()
    k_poisoned[:, 4:] = float("nan")  # only queries 5..8 may see keys 5..8
    v_poisoned[:, 4:] = float("nan")
    out = flash_attention(q, k_poisoned, v_poisoned, is_causal=True, block_size=4).output
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out[:, :4], expected[:, :4])
    assert torch.isnan(out[:, 4:]).all()


def test_empty_sequences_give_empty_or_zero_outputs() -> None:
    """L = 0 gives an empty output; S = 0 (nothing to attend to) gives zeros."""
    q, k, v = _inputs((2,), 0, 5, 4, 3, torch.float32)
    assert flash_attention(q, k, v).output.shape == (2, 0, 3)
    q, k, v = _inputs((2,), 4, 0, 4, 3, torch.float32)
    assert torch.equal(flash_attention(q, k, v).output, torch.zeros(2, 4, 3))


def test_flash_backend_in_attend_and_modules() -> None:
    """attend(..., backend="flash") and the modules' backend="flash" equal the torch backend."""
    q, k, v = _inputs((2, 4), 9, 9, 8, 8, torch.float32, seed=13)
    torch.testing.assert_close(
        attend(q, k, v, is_causal=True, backend="flash"),
        attend(q, k, v, is_causal=True, backend="torch"),
    )
    assert "flash" in attnlab.BACKENDS
    torch.manual_seed(789)
    v2 = attnlab.SelfAttentionV2(6, 4)
    x = torch.rand(2, 7, 6)
    with torch.no_grad():
        reference = v2(x)
        v2.backend = "flash"
        torch.testing.assert_close(v2(x), reference)
    torch.manual_seed(0)
    mha = attnlab.MultiHeadAttention(16, 16, 4, causal=True, backend="flash").eval()
    with torch.no_grad():
        flash_out = mha(torch.rand(2, 10, 16, generator=torch.Generator().manual_seed(1))).output
        mha.backend = "torch"
        torch_out = mha(torch.rand(2, 10, 16, generator=torch.Generator().manual_seed(1))).output
    torch.testing.assert_close(flash_out, torch_out)


@pytest.mark.parametrize(
    ("L", "S", "window", "block"),
    [
        (17, 17, 4, 4),
        (17, 17, 1, (3, 5)),
        (6, 20, 7, 4),
        (20, 6, 3, (5, 2)),
        (9, 9, 50, 2),
    ],
)
def test_flash_window_equals_masked_and_torch(
    L: int, S: int, window: int, block: int | tuple[int, int]
) -> None:
    gen = torch.Generator().manual_seed(L * S + window)
    q, k, v = (torch.randn(2, 3, n, 8, generator=gen) for n in (L, S, S))
    mask = sliding_window_mask(L, S, window)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0)
    ours = flash_attention(q, k, v, window=window, block_size=block).output
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours, scaled_dot_product_attention(q, k, v, mask))


class _CountTileOps(TorchFunctionMode):
    """Counts the batched matmuls (bmm, baddbmm_) and exponentials called inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.matmuls = 0
        self.exponentials = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = getattr(func, "__name__", "")
        self.matmuls += name in ("bmm", "baddbmm_")
        self.exponentials += name in ("exp", "exp_", "exp2", "exp2_")
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("group", [1, 3])
def test_fast_path_scores_a_whole_group_per_tile(causal: bool, group: int) -> None:
    """Without gradients, each visited tile is two batched matmuls and one exponential
    for every head at once (one more matmul fixes the reference maximum), whatever the
    grouped-query group: the group's query heads share one read of each key/value
    block, and the output is SDPA's."""
    gen = torch.Generator().manual_seed(group)
    B, Hkv, L, S, E = 2, 2, 37, 45, 8
    q = torch.randn(B, Hkv * group, L, E, generator=gen)
    k, v = (torch.randn(B, Hkv, S, E, generator=gen) for _ in range(2))
    block = (8, 16)
    counter = _CountTileOps()
    with torch.no_grad(), counter:
        out = flash_attention(
            q, k, v, is_causal=causal, block_size=block, enable_gqa=group > 1
        ).output
    tiles = len(flash_visited_blocks(L, S, block, is_causal=causal))
    assert counter.matmuls == 2 * tiles + 1
    assert counter.exponentials == tiles
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=group > 1)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_masks_and_gradients_equal_sdpa(causal: bool) -> None:
    """enable_gqa with a mask, with dropout-free gradients and in float64: SDPA's output,
    on block sizes that divide neither L nor S."""
    gen = torch.Generator().manual_seed(5)
    B, Hkv, group, L, S, E = 2, 3, 2, 11, 11, 4
    q = torch.randn(B, Hkv * group, L, E, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(B, Hkv, S, E, generator=gen, dtype=torch.float64) for _ in range(2))
    mask = None if causal else torch.randn(Hkv * group, L, S, generator=gen, dtype=torch.float64)
    expected = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True
    )
    for grad in (False, True):
        leaves = [t.clone().requires_grad_(grad) for t in (q, k, v)]
        out = flash_attention(
            *leaves, attn_mask=mask, is_causal=causal, block_size=(3, 4), enable_gqa=True
        ).output
        torch.testing.assert_close(out, expected, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kv_heads", [6, 2])
def test_the_taught_loop_equals_sdpa_where_flash_takes_its_fast_path(
    causal: bool, kv_heads: int
) -> None:
    """flash_attention_taught: the rescaling loop, always; the benchmark times it."""
    from attnlab.flash import flash_attention_taught

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 6, 37, 8, generator=gen)
    k, v = (torch.randn(2, kv_heads, 37, 8, generator=gen) for _ in range(2))
    gqa = kv_heads != 6
    got = flash_attention_taught(q, k, v, causal, block_size=(5, 7), enable_gqa=gqa)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    assert torch.allclose(got, want, atol=1e-6)
