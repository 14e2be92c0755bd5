"""PyTorch's behaviour at the edges: devices, flags, half precision, empty and meta input.

Each case is checked against PyTorch's own SDPA or module, or against the error that
PyTorch raises, on every attention path (explicit, flash, the dispatcher's backends) and
on the modules.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab import (
    BACKENDS,
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
    attend,
    attention_scores,
    context_vectors,
    examples,
    flash_attention,
    scaled_dot_product_attention,
    softmax,
    softmax_naive,
)

Attention = Callable[..., Tensor]

PATHS: dict[str, Attention] = {
    "explicit": scaled_dot_product_attention,
    "flash": lambda *a, **k: flash_attention(*a, **k).output,
    **{
        f"attend-{name}": (lambda *a, _b=name, **k: attend(*a, backend=_b, **k))
        for name in BACKENDS
    },
}


def _qkv(L: int = 3, S: int = 4, E: int = 8, dtype: torch.dtype = torch.float32) -> list[Tensor]:
    gen = torch.Generator().manual_seed(0)
    shapes = [(2, L, E), (2, S, E), (2, S, E)]
    return [torch.randn(shape, generator=gen).to(dtype) for shape in shapes]


# --- devices -------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("argument", ["key", "value", "attn_mask"])
def test_tensor_on_another_device_is_named(path: str, argument: str) -> None:
    """A key, value or mask on the meta device next to a CPU query: ValueError, both devices."""
    query, key, value = _qkv()
    args = {"key": key, "value": value, "attn_mask": torch.ones(3, 4, dtype=torch.bool)}
    args[argument] = args[argument].to("meta")
    with pytest.raises(
        ValueError, match=rf"{argument} must be on the device of query \(cpu\).*meta"
    ):
        PATHS[path](query, args["key"], args["value"], attn_mask=args["attn_mask"])


@pytest.mark.parametrize("argument", ["key", "attn_mask", "key_padding_mask"])
def test_multihead_names_a_tensor_on_another_device(argument: str) -> None:
    module = MultiHeadAttention(4, 4, num_heads=2)
    x = torch.randn(2, 3, 4)
    args: dict[str, Tensor] = {
        "key": x,
        "attn_mask": torch.ones(3, 3, dtype=torch.bool),
        "key_padding_mask": torch.ones(2, 3, dtype=torch.bool),
    }
    args[argument] = args[argument].to("meta")
    with pytest.raises(ValueError, match=rf"{argument} must be on the device of query.*meta"):
        module(x, **args)


def _modules_and_inputs() -> dict[str, tuple[torch.nn.Module, tuple[Tensor, ...]]]:
    """Every public module with a small valid input (CPU, float32)."""
    x = torch.randn(2, 3, 4)
    return {
        "SelfAttentionV1": (SelfAttentionV1(4, 2), (x,)),
        "SelfAttentionV2": (SelfAttentionV2(4, 2), (x,)),
        "CausalAttention": (CausalAttention(4, 2), (x,)),
        "MultiHeadAttentionWrapper": (MultiHeadAttentionWrapper(4, 4, 2), (x,)),
        "MultiHeadAttention": (MultiHeadAttention(4, 4, 2), (x,)),
        "CrossAttention": (CrossAttention(4, 6, 4, 2), (x, torch.randn(2, 5, 6))),
        "GroupedQueryAttention": (GroupedQueryAttention(4, 2, 1), (x,)),
        "AdditiveAttention": (AdditiveAttention(4, 4, 3), (x, x)),
        "RotaryEmbedding": (RotaryEmbedding(4), (x, torch.arange(3))),
    }


MODULES = list(_modules_and_inputs())


@pytest.mark.parametrize("name", [m for m in MODULES if m != "RotaryEmbedding"])  # no tensors
def test_every_module_names_an_input_on_another_device(name: str) -> None:
    """An input on the meta device, next to CPU parameters: the package's ValueError
    naming both devices, before any arithmetic (not PyTorch's error from inside)."""
    module, inputs = _modules_and_inputs()[name]
    with pytest.raises(ValueError, match=r"meta.*cpu|cpu.*meta"):
        module(inputs[0].to("meta"), *inputs[1:])


@pytest.mark.parametrize("name", [m for m in MODULES if m != "RotaryEmbedding"])
def test_every_module_names_an_input_of_another_dtype(name: str) -> None:
    """A float64 input to float32 parameters: a TypeError naming both dtypes."""
    module, inputs = _modules_and_inputs()[name]
    with pytest.raises(TypeError, match=r"float64.*float32|float32.*float64"):
        module(*(x.double() if x.is_floating_point() else x for x in inputs))


def test_kv_cache_names_a_chunk_on_another_device_or_dtype() -> None:
    cache = KVCache()
    cache.append(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"keys must be on the device of the cached keys"):
        cache.append(torch.randn(1, 2, 1, 4, device="meta"), torch.randn(1, 2, 1, 4, device="meta"))
    with pytest.raises(TypeError, match=r"cached dtype torch.float32; got torch.float64"):
        cache.append(torch.randn(1, 2, 1, 4).double(), torch.randn(1, 2, 1, 4).double())


def test_single_head_modules_name_a_padding_mask_on_another_device() -> None:
    padding = torch.ones(3, dtype=torch.bool, device="meta")
    for module in (SelfAttentionV1(4, 2), SelfAttentionV2(4, 2), CausalAttention(4, 2)):
        with pytest.raises(ValueError, match=r"key_padding_mask must be on the device of x"):
            module(torch.randn(3, 4), padding)


# --- flags ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("flag", ["no", None, 1])
def test_is_causal_must_be_a_bool(path: str, flag: object) -> None:
    """PyTorch raises a TypeError for a non-bool is_causal; so does every path here."""
    with pytest.raises(TypeError, match="is_causal must be a bool"):
        PATHS[path](*_qkv(), is_causal=flag)


def test_module_flags_must_be_bools() -> None:
    x = torch.randn(3, 4)
    module = MultiHeadAttention(4, 4, num_heads=2)
    with pytest.raises(TypeError, match="average_attn_weights must be a bool"):
        module(x, need_weights=True, average_attn_weights="no")
    with pytest.raises(TypeError, match="need_weights must be a bool"):
        module(x, need_weights="yes")
    for build in (
        lambda: MultiHeadAttention(4, 4, 2, causal="no"),
        lambda: CausalAttention(4, 2, causal=None),
    ):
        with pytest.raises(TypeError, match="causal must be a bool"):
            build()
    with pytest.raises(TypeError, match="qkv_bias must be a bool"):
        SelfAttentionV2(4, 2, qkv_bias="no")
    with pytest.raises(TypeError, match="out_bias must be a bool"):
        MultiHeadAttention(4, 4, 2, out_bias=1)


# --- half precision --------------------------------------------------------------------


def _max_error(output: Tensor, reference: Tensor) -> float:
    return float((output.double() - reference).abs().max())


@pytest.mark.parametrize("path", ["explicit", "flash"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_as_accurate_as_pytorch(path: str, dtype: torch.dtype) -> None:
    """randn * 3, causal: error against float64 as small as PyTorch's, output in dtype.

    Scores, softmax and sums run in float32 as in PyTorch's kernels, so the error is
    PyTorch's up to rounding order: held to 1.25x (computing in the half type gives 2-4x).
    """
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 4, 128, 64, generator=gen, dtype=torch.float64) * 3 for _ in range(3))
    reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    half = [t.to(dtype) for t in (q, k, v)]
    torch_error = _max_error(F.scaled_dot_product_attention(*half, is_causal=True), reference)
    output = PATHS[path](*half, is_causal=True)
    assert output.dtype == dtype
    assert _max_error(output, reference) <= 1.25 * torch_error


@pytest.mark.parametrize("path", ["explicit", "flash"])
def test_large_float16_scores_do_not_overflow(path: str) -> None:
    """Scores of 100 * +-200 * E overflow float16; PyTorch's answer is exact, and so is ours."""
    gen = torch.Generator().manual_seed(2)
    query = torch.full((1, 4, 8), 100.0, dtype=torch.float16)
    key = (torch.randint(0, 2, (1, 5, 8), generator=gen) * 400 - 200).to(torch.float16)
    value = torch.randn(1, 5, 8, generator=gen).to(torch.float16)
    expected = F.scaled_dot_product_attention(query, key, value)
    output = PATHS[path](query, key, value)
    assert not output.isnan().any()
    torch.testing.assert_close(output, expected)


def test_float8_gets_a_clear_type_error() -> None:
    query, key, value = (t.to(torch.float8_e4m3fn) for t in _qkv())
    with pytest.raises(TypeError, match=r"floating-point tensor \(float16, bfloat16, float32"):
        scaled_dot_product_attention(query, key, value)


# --- empty sequences -------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("L", "S"), [(0, 4), (3, 0), (0, 0)])
def test_empty_sequences_with_is_causal(path: str, L: int, S: int) -> None:
    query, key, value = _qkv(L, S)
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=True)
    torch.testing.assert_close(PATHS[path](query, key, value, is_causal=True), expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_modules_on_zero_tokens(backend: str) -> None:
    x = torch.randn(2, 0, 4)
    padding = torch.ones(2, 0, dtype=torch.bool)
    assert CausalAttention(4, 2, backend=backend)(x, padding).shape == (2, 0, 2)  # type: ignore[arg-type]
    module = MultiHeadAttention(4, 4, 2, causal=True, backend=backend)  # type: ignore[arg-type]
    assert module(x, key_padding_mask=padding).output.shape == (2, 0, 4)
    output, weights = module(x, need_weights=True)
    assert output.shape == (2, 0, 4) and weights.shape == (2, 0, 0)


# --- meta tensors ----------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("is_causal", [False, True])
def test_meta_tensors_give_shapes(path: str, is_causal: bool) -> None:
    query, key, value = (torch.empty(2, 3, L, 8, device="meta") for L in (5, 7, 7))
    output = PATHS[path](query, key, value, is_causal=is_causal)
    assert output.shape == (2, 3, 5, 8) and output.is_meta


def test_modules_run_on_meta() -> None:
    x = torch.empty(2, 5, 4, device="meta")
    assert CausalAttention(4, 2).to("meta")(x).is_meta
    assert MultiHeadAttention(4, 4, 2, causal=True).to("meta")(x).output.is_meta


# --- module dtypes ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_module_dtype_mismatch_names_both_dtypes(dtype: torch.dtype) -> None:
    x = torch.randn(3, 4, dtype=dtype)
    for module in (
        SelfAttentionV1(4, 2),
        SelfAttentionV2(4, 2),
        CausalAttention(4, 2),
        MultiHeadAttention(4, 4, 2),
    ):
        with pytest.raises(TypeError, match=rf"has dtype {dtype} but the .* torch.float32"):
            module(x)


# --- helpers ---------------------------------------------------------------------------


def test_scores_and_context_vectors_check_batch_dims_and_dtypes() -> None:
    with pytest.raises(ValueError, match=r"keys must have shape .* batch dims that broadcast"):
        attention_scores(torch.randn(2, 3, 4), torch.randn(5, 3, 4))
    with pytest.raises(TypeError, match="queries and keys must share one dtype"):
        attention_scores(torch.randn(3, 4), torch.randn(3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"values must have shape .* batch dims that broadcast"):
        context_vectors(torch.rand(2, 3, 3), torch.randn(5, 3, 4))
    with pytest.raises(TypeError, match="attn_weights and values must share one dtype"):
        context_vectors(torch.rand(3, 3), torch.randn(3, 4, dtype=torch.float64))


@pytest.mark.parametrize("function", [softmax, softmax_naive])
def test_softmax_checks_dim(function: Callable[..., Tensor]) -> None:
    """dim must index x (a 0-d x takes 0 or -1, as in torch.softmax) and be an int."""
    with pytest.raises(ValueError, match=r"dim must be in \[-1, 0\] .* got 1"):
        function(torch.tensor(1.0), dim=1)
    with pytest.raises(ValueError, match=r"dim must be in \[-2, 1\] .* got 5"):
        function(torch.randn(2, 3), dim=5)
    with pytest.raises(TypeError, match="dim must be an int"):
        function(torch.randn(2, 3), dim="a")


def test_examples_check_their_arguments() -> None:
    with pytest.raises(ValueError, match="embed_dim must be a positive int"):
        examples.life_is_short(-1)
    with pytest.raises(TypeError, match="embed_dim must be a positive int"):
        examples.life_is_short(2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_tokens must be a positive int"):
        examples.second_sequence(-2)
    with pytest.raises(TypeError, match="text must be a str"):
        examples.build_vocab(3)  # type: ignore[arg-type]
