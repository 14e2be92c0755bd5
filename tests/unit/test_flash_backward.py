"""flash_attention's own backward pass: gradients equal to PyTorch's SDPA."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab import flash_attention, sliding_window_mask

TOL = {torch.float32: 1e-5, torch.float64: 1e-9}


def _inputs(
    shape: tuple[int, ...], S: int, dtype: torch.dtype, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    *batch, L, E = shape
    q, k, v = (
        torch.randn(*size, generator=gen, dtype=dtype, requires_grad=True)
        for size in ((*batch, L, E), (*batch, S, E), (*batch, S, E + 1))
    )
    return q, k, v


def _grads(
    output: torch.Tensor, inputs: tuple[torch.Tensor, ...], seed: int = 1
) -> tuple[torch.Tensor, ...]:
    grad_output = torch.randn(
        output.shape, generator=torch.Generator().manual_seed(seed), dtype=output.dtype
    )
    return torch.autograd.grad(output, inputs, grad_output)


def _autograd_nodes(output: torch.Tensor) -> set[str]:
    """The type names of every node of ``output``'s autograd graph."""
    seen: set[int] = set()
    names: set[str] = set()
    pending = [output.grad_fn]
    while pending:
        node = pending.pop()
        if node is not None and id(node) not in seen:
            seen.add(id(node))
            names.add(type(node).__name__)
            pending.extend(next_node for next_node, _ in node.next_functions)
    return names


def _masks(L: int, S: int) -> list[torch.Tensor | None]:
    gen = torch.Generator().manual_seed(2)
    bool_mask = torch.rand(L, S, generator=gen) > 0.4
    bool_mask[:, 0] = True  # every row attends somewhere (fully masked rows: below)
    return [None, bool_mask, torch.randn(L, S, generator=gen, dtype=torch.float64)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("block_size", [1, (4, 7), (7, 4), 1000])
@pytest.mark.parametrize(("shape", "S"), [((2, 3, 13, 8), 13), ((3, 11, 4), 6)])
def test_gradients_equal_sdpa(
    dtype: torch.dtype, block_size: int | tuple[int, int], shape: tuple[int, ...], S: int
) -> None:
    inputs = _inputs(shape, S, dtype)
    L = shape[-2]
    cases = [(m, False) for m in _masks(L, S)] + [(None, True)]
    for mask, causal in cases:
        if mask is not None and mask.is_floating_point():
            mask = mask.to(dtype)
        got = flash_attention(
            *inputs, attn_mask=mask, is_causal=causal, block_size=block_size
        ).output
        assert _autograd_nodes(got) & {"_FlashAttentionFunctionBackward"}
        want = F.scaled_dot_product_attention(*inputs, attn_mask=mask, is_causal=causal)
        for g, w in zip(_grads(got, inputs), _grads(want, inputs), strict=True):
            torch.testing.assert_close(g, w, atol=TOL[dtype], rtol=TOL[dtype])


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_output_and_lse(causal: bool) -> None:
    inputs = _inputs((2, 5, 3), 5, torch.float64)

    def both(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return flash_attention(q, k, v, is_causal=causal, block_size=2)

    assert torch.autograd.gradcheck(both, inputs)


def test_fully_masked_rows_have_finite_zero_gradients() -> None:
    q, k, v = _inputs((1, 6, 4), 5, torch.float64)
    mask = torch.ones(6, 5, dtype=torch.bool)
    mask[2] = False  # row 2 attends to nothing: output zeros, gradient zeros
    output = flash_attention(q, k, v, attn_mask=mask, block_size=(4, 2)).output
    grad_q, grad_k, grad_v = _grads(output, (q, k, v))
    assert all(torch.isfinite(g).all() for g in (grad_q, grad_k, grad_v))
    assert grad_q[:, 2].abs().max() == 0
    keep = torch.arange(6) != 2  # the other rows: as SDPA on them alone
    want = F.scaled_dot_product_attention(q[:, keep], k, v)
    grad_output = torch.randn(
        output.shape, generator=torch.Generator().manual_seed(1), dtype=output.dtype
    )
    want_grads = torch.autograd.grad(want, (q, k, v), grad_output[:, keep])
    torch.testing.assert_close(grad_q[:, keep], want_grads[0][:, keep])
    torch.testing.assert_close(grad_k, want_grads[1])
    torch.testing.assert_close(grad_v, want_grads[2])


@pytest.mark.parametrize(
    ("L", "S", "window", "block_size"),
    [(17, 17, 4, 4), (17, 17, 1, (3, 5)), (6, 20, 7, 4), (20, 6, 3, (5, 2)), (9, 9, 50, 2)],
)
def test_window_gradients_equal_sdpa(
    L: int, S: int, window: int, block_size: int | tuple[int, int]
) -> None:
    """Window blocks: some partly hidden, some entirely inside every row's window."""
    inputs = _inputs((2, 3, L, 8), S, torch.float64)
    got = flash_attention(*inputs, window=window, block_size=block_size).output
    assert _autograd_nodes(got) & {"_FlashAttentionFunctionBackward"}
    mask = sliding_window_mask(L, S, window)
    keep = mask.any(dim=-1)  # SDPA gives NaN on rows with no key at all; flash gives 0
    want = F.scaled_dot_product_attention(*inputs, attn_mask=mask)
    gen = torch.Generator().manual_seed(1)
    grad_output = torch.randn(got.shape, generator=gen, dtype=got.dtype)
    got_grads = torch.autograd.grad(got, inputs, grad_output)
    want_grads = torch.autograd.grad(want[..., keep, :], inputs, grad_output[..., keep, :])
    torch.testing.assert_close(
        got_grads[0][..., keep, :], want_grads[0][..., keep, :], atol=1e-9, rtol=1e-9
    )
    assert (got_grads[0][..., ~keep, :] == 0).all()  # rows that see nothing
    for g, w in zip(got_grads[1:], want_grads[1:], strict=True):
        torch.testing.assert_close(g, w, atol=1e-9, rtol=1e-9)
    assert all(torch.isfinite(g).all() for g in got_grads)


@pytest.mark.parametrize("window", [None, 3])
@pytest.mark.parametrize("group", [1, 3])
def test_flash_gqa_backward_equals_sdpa_without_repeating_keys(
    group: int, window: int | None
) -> None:
    """enable_gqa's gradients equal SDPA's in float64 (causal, or a window), and the
    forward saves nothing as large as the repeated keys for the backward."""
    gen = torch.Generator().manual_seed(group)
    B, Hkv, L, S, E = 2, 2, 5, 11, 4  # L < S: the queries are the last positions
    q = torch.randn(B, Hkv * group, L, E, generator=gen, dtype=torch.float64)
    k = torch.randn(B, Hkv, S, E, generator=gen, dtype=torch.float64)
    v = torch.randn(B, Hkv, S, E + 1, generator=gen, dtype=torch.float64)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    grad_out = torch.randn(B, Hkv * group, L, E + 1, generator=gen, dtype=torch.float64)
    saved: list[torch.Size] = []
    with torch.autograd.graph.saved_tensors_hooks(
        lambda t: saved.append(t.shape) or t, lambda t: t
    ):
        ours = flash_attention(
            q, k, v, is_causal=window is None, block_size=(2, 3), window=window, enable_gqa=True
        ).output
    mask = None if window is None else sliding_window_mask(L, S, window)  # end-aligned
    theirs = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=window is None, enable_gqa=True
    )
    torch.testing.assert_close(ours, theirs, atol=1e-9, rtol=0)
    grads = torch.autograd.grad(ours, (q, k, v), grad_out)
    expected = torch.autograd.grad(theirs, (q, k, v), grad_out)
    for name, got, want in zip("qkv", grads, expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-9, rtol=0, msg=name)
    repeated_keys = B * Hkv * group * S * E  # what repeat_kv_heads(k, group) would hold
    assert saved
    if group > 1:
        assert all(shape.numel() < repeated_keys for shape in saved), saved


@pytest.mark.parametrize(
    ("kwargs", "mask_kind", "block_size", "group"),
    [
        ({}, None, (4, 7), 1),
        ({"is_causal": True}, None, (7, 4), 1),
        ({"is_causal": True}, None, (3, 5), 2),
        ({"window": 4}, None, (4, 3), 1),
        ({"window": 3}, None, (2, 3), 3),
        ({}, "bool", (5, 4), 1),
        ({}, "float", 1, 1),
    ],
)
def test_key_outer_order_equals_sdpa_and_query_order(
    monkeypatch: pytest.MonkeyPatch,
    kwargs: dict[str, object],
    mask_kind: str | None,
    block_size: int | tuple[int, int],
    group: int,
) -> None:
    """FlashAttention-2's loop order (key/value blocks outside) gives SDPA's gradients,
    and the same as the default query-outer order, over the same tiles."""
    import functools

    import attnlab.flash as flash_module

    gen = torch.Generator().manual_seed(3)
    L, S, E, heads = 11, 13, 4, 3 * group
    q = torch.randn(2, heads, L, E, generator=gen, dtype=torch.float64, requires_grad=True)
    k, v = (
        torch.randn(2, heads // group, S, E, generator=gen, dtype=torch.float64, requires_grad=True)
        for _ in range(2)
    )
    mask: torch.Tensor | None = None
    if mask_kind == "bool":
        mask = torch.rand(L, S, generator=gen) > 0.4
        mask[:, 0] = True
    elif mask_kind == "float":
        mask = torch.randn(L, S, generator=gen, dtype=torch.float64)
    window = kwargs.get("window")
    reference_mask = mask if window is None else sliding_window_mask(L, S, window)  # type: ignore[arg-type]
    grad_output = torch.randn(2, heads, L, E, generator=gen, dtype=torch.float64)
    gqa = group > 1
    expected = torch.autograd.grad(
        F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=reference_mask,
            is_causal=bool(kwargs.get("is_causal")),
            enable_gqa=gqa,
        ),
        (q, k, v),
        grad_output,
    )
    got = {}
    original = flash_module.flash_backward
    for order in ("query", "key"):
        monkeypatch.setattr(
            flash_module, "flash_backward", functools.partial(original, order=order)
        )
        out = flash_attention(
            q,
            k,
            v,
            attn_mask=mask,
            block_size=block_size,
            enable_gqa=gqa,
            **kwargs,  # type: ignore[arg-type]
        ).output
        got[order] = torch.autograd.grad(out, (q, k, v), grad_output)
    for a, b, c in zip(got["key"], got["query"], expected, strict=True):
        assert torch.allclose(a, c, atol=1e-10)
        assert torch.allclose(a, b, atol=1e-12)


def test_flash_backward_refuses_an_unknown_order() -> None:
    from attnlab.flash import flash_backward

    with pytest.raises(ValueError, match="order must be"):
        flash_backward(None, None, None, None, order="row")  # type: ignore[arg-type]
