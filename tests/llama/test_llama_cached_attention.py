"""Every layer's attention during cached decoding equals one pass's rows, in every family kind.

The Gated DeltaNet layers' implicit attention included: the page's live model gives new
rows while it generates, and so does the package (the cache keeps each token's write when
the first pass asks for the attention).
"""

from __future__ import annotations

import pytest
import torch

from attnlab.llama import LlamaConfig, LlamaModel

QWEN35_TOY = LlamaConfig(
    vocab_size=50, d_model=32, num_layers=4, ffn_dim=48, architecture="qwen35",
    layer_types=("linear_attention",) * 3 + ("full_attention",), num_heads=2,
    num_kv_heads=1, head_dim=16, rotary_dim=4, linear_num_key_heads=2,
    linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
    linear_conv_kernel_dim=4,
)  # fmt: skip


def test_cached_rows_equal_one_pass_for_every_layer() -> None:
    torch.manual_seed(0)
    model = LlamaModel(QWEN35_TOY).eval()
    ids = torch.randint(0, 50, (2, 9))
    with torch.no_grad():
        whole = model(ids, return_attention=True).attention  # 4 x (2, heads, 9, 9)
        cache, start = model.new_cache(), 0
        for size in (5, 1, 3):
            part = model(ids[:, start : start + size], cache=cache, return_attention=True)
            for layer, (rows, full) in enumerate(zip(part.attention, whole, strict=True)):
                expected = full[:, :, start : start + size, : start + size]
                torch.testing.assert_close(
                    rows, expected, atol=1e-5, rtol=1e-5, msg=f"layer {layer}"
                )
            start += size


def test_attention_after_a_cache_filled_without_it_is_refused_by_name() -> None:
    torch.manual_seed(0)
    model = LlamaModel(QWEN35_TOY).eval()
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]), cache=cache)
        with pytest.raises(ValueError, match="ask for the weights on the cache's first pass"):
            model(torch.tensor([[4]]), cache=cache, return_attention=True)
