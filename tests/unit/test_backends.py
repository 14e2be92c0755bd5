"""The backend registry: every module reaches its kernel through KERNELS with one frozen
AttentionCall, and a registered kernel serves every module."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab import (
    AttentionCall,
    GroupedQueryAttention,
    MultiHeadAttention,
    attend,
    register_kernel,
)
from attnlab.backends import KERNELS


@pytest.fixture
def recorded() -> Iterator[list[AttentionCall]]:
    """A kernel named "recorded" (PyTorch's SDPA, written out here) that keeps its calls."""
    calls: list[AttentionCall] = []

    def kernel(query: Tensor, key: Tensor, value: Tensor, call: AttentionCall) -> Tensor:
        calls.append(call)
        return F.scaled_dot_product_attention(
            query,
            key,
            value,
            attn_mask=call.attn_mask,
            dropout_p=call.dropout_p,
            is_causal=call.is_causal,
            scale=call.scale,
            enable_gqa=call.group > 1,
        )

    register_kernel("recorded", kernel)
    yield calls
    del KERNELS["recorded"]


def test_a_registered_kernel_serves_every_module(recorded: list[AttentionCall]) -> None:
    """Modules and attend() built with the new name call it, with the call's settings."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    mha = MultiHeadAttention(8, 8, 2, causal=True, backend="recorded")  # type: ignore[arg-type]
    gqa = GroupedQueryAttention(8, 4, 2, backend="recorded")  # type: ignore[arg-type]
    with torch.no_grad():
        mha_out, gqa_out = mha(x).output, gqa(x).output
        mha.backend, gqa.backend = "torch", "torch"
        torch.testing.assert_close(mha_out, mha(x).output)
        torch.testing.assert_close(gqa_out, gqa(x).output)
    q = torch.randn(2, 4, 5, 3)
    kv = torch.randn(2, 2, 6, 3)
    out = attend(q, kv, kv, scale=0.5, enable_gqa=True, backend="recorded")  # type: ignore[arg-type]
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, kv, kv, scale=0.5, enable_gqa=True)
    )
    assert [(c.is_causal, c.group, c.scale) for c in recorded] == [
        (True, 1, None),  # multi-head, causal, one kv head per query head
        (True, 2, None),  # grouped-query: 4 query heads over 2 key/value heads
        (False, 2, 0.5),
    ]


def test_the_call_object_is_frozen_and_names_are_checked() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        AttentionCall().dropout_p = 0.5  # type: ignore[misc]
    with pytest.raises(
        ValueError, match=r"backend must be one of 'explicit', 'torch', 'flash'.*'nope'"
    ):
        MultiHeadAttention(4, 4, 2, backend="nope")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="kernel must be callable; got int"):
        register_kernel("bad", 3)  # type: ignore[arg-type]
    assert "bad" not in KERNELS


@pytest.mark.parametrize("backend", ["explicit", "torch", "flash"])
def test_each_built_in_kernel_equals_pytorchs_sdpa(backend: str) -> None:
    """The registry's kernels, run on checked arguments, equal F.scaled_dot_product_attention."""
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 4, 7, 5), torch.randn(2, 2, 9, 5), torch.randn(2, 2, 9, 3)
    mask = torch.rand(7, 9) > 0.3
    call = AttentionCall(attn_mask=mask, scale=0.4, group=2)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.4, enable_gqa=True)
    torch.testing.assert_close(KERNELS[backend](q, k, v, call), expected, atol=1e-5, rtol=1e-5)


def test_the_call_object_is_built_by_keyword() -> None:
    """No row of positional flags: AttentionCall takes keywords only."""
    with pytest.raises(TypeError, match="takes 1 positional argument but 4 were given"):
        AttentionCall(None, 0.0, True)  # type: ignore[misc]
    assert AttentionCall(is_causal=True).is_causal


def test_kernel_means_one_signature() -> None:
    """Every public function of the package named for a kernel takes (query, key, value,
    call), the registry's signature (register_kernel aside; the benchmarks' "kernel" is
    PyTorch's, the op SDPA dispatched to)."""
    import importlib
    import inspect
    import pkgutil

    import attnlab

    odd = []
    for info in pkgutil.walk_packages(attnlab.__path__, "attnlab."):
        if info.name.startswith("attnlab.bench"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                "kernel" in name
                and not name.startswith("_")
                and inspect.isfunction(obj)
                and obj.__module__ == module.__name__
                and name != "register_kernel"
                and list(inspect.signature(obj).parameters) != ["query", "key", "value", "call"]
            ):
                odd.append(f"{info.name}.{name}")
    assert odd == []
