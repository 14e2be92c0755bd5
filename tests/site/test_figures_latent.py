"""The latent-attention diagram shows DeepSeek-V3's shapes as the package's layer makes them.

The builder reads them from a ``MultiHeadLatentAttention`` of ``DeepseekV3Config``'s sizes
on the meta device; here they are checked against the config's numbers, so a change in
the layer's cache or kernel inputs (or in transformers' defaults) shows up on the figure.
"""

from __future__ import annotations

import importlib

import matplotlib.style
import pytest

from hooks import figures as hook


def test_latent_attention_shows_what_deepseek_v3_caches_and_attends_over() -> None:
    transformers = pytest.importorskip("transformers")
    c = transformers.DeepseekV3Config()
    r, Dr, H = c.kv_lora_rank, c.qk_rope_head_dim, c.num_attention_heads
    with matplotlib.style.context("default"):
        fig = hook.FIGURES["latent-attention"]()
    texts = " | ".join(text.get_text() for ax in fig.axes for text in ax.texts)
    assert (r, Dr, H) == (512, 64, 128)
    sizes = importlib.import_module("hooks.figures_latent").DEEPSEEK_V3  # the hook's constants
    assert {name: getattr(c, name) for name in sizes} == sizes  # = transformers' defaults
    assert f"cached: {r} + {Dr}\n= {r + Dr} numbers" in texts
    assert f"keys {H} × {c.qk_nope_head_dim + Dr}" in texts  # naive: every head's keys
    assert f"values {H} × {c.v_head_dim}" in texts
    assert f"queries {H} × {r + Dr}" in texts  # absorbed: W_UK folded into the queries
    assert f"keys: the cache\n1 × {r + Dr}" in texts  # one key head, the cache itself
    assert f"weights · c: {H} × {r}" in texts
