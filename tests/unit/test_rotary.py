"""RotaryEmbedding: two equal formulations, scores that depend on distance only, and
Hugging Face's ``LlamaRotaryEmbedding`` as the reference (built from a config, nothing
downloaded)."""

from __future__ import annotations

import math

import pytest
import torch
from support import HF_GROUP, hf_llama

from attnlab import RotaryEmbedding


def test_rotary_complex_view_equals_rotate_half() -> None:
    rope = RotaryEmbedding(8, theta=100.0)
    x = torch.randn(2, 5, 8)
    positions = torch.arange(3, 8)
    torch.testing.assert_close(rope(x, positions), rope.rotate_complex(x, positions))
    torch.testing.assert_close(rope(x, torch.zeros(5, dtype=torch.long)), x)


def test_rotary_score_depends_on_distance_only() -> None:
    rope = RotaryEmbedding(16)
    q, k = torch.randn(1, 16), torch.randn(1, 16)
    scores = [
        (rope(q, torch.tensor([m])) @ rope(k, torch.tensor([m - 3])).T).item() for m in (3, 10, 100)
    ]
    assert scores == pytest.approx([scores[0]] * 3, abs=1e-4)
    moved = (rope(q, torch.tensor([10])) @ rope(k, torch.tensor([5])).T).item()
    assert not math.isclose(moved, scores[0], abs_tol=1e-3)


@pytest.mark.xdist_group(HF_GROUP)
def test_rotary_equals_hf() -> None:
    transformers, modeling_llama = hf_llama()
    config = transformers.LlamaConfig(
        hidden_size=32, num_attention_heads=4, head_dim=8, rope_theta=500000.0
    )
    hf_rope = modeling_llama.LlamaRotaryEmbedding(config)
    x = torch.randn(1, 4, 6, 8)
    positions = torch.arange(6)
    cos, sin = hf_rope(x, positions[None])
    ours_cos, ours_sin = RotaryEmbedding(8, 500000.0).cos_sin(positions)
    torch.testing.assert_close(ours_cos, cos[0])
    torch.testing.assert_close(ours_sin, sin[0])
    expected, _ = modeling_llama.apply_rotary_pos_emb(x, x, cos, sin)
    torch.testing.assert_close(RotaryEmbedding(8, 500000.0)(x, positions), expected)


def test_rotary_holds_no_tensor_and_follows_its_input() -> None:
    """The frequencies are computed where they are used (HF's inv_freq, exactly): a module
    built on the meta device, as load_smollm2 builds the model, needs no patching after."""
    transformers, modeling_llama = hf_llama()
    config = transformers.LlamaConfig(
        hidden_size=32, num_attention_heads=4, head_dim=8, rope_theta=500000.0
    )
    hf_inv_freq = modeling_llama.LlamaRotaryEmbedding(config).inv_freq
    with torch.device("meta"):
        rope = RotaryEmbedding(8, 500000.0)
    assert list(rope.buffers()) == [] and list(rope.parameters()) == []
    torch.testing.assert_close(rope.inv_freq, hf_inv_freq)  # theta ** -x vs 1 / theta ** x: an ulp
    x = torch.randn(2, 6, 8)
    torch.testing.assert_close(
        rope(x, torch.arange(6)), RotaryEmbedding(8, 500000.0)(x, torch.arange(6))
    )
    assert rope(x.to("meta"), torch.arange(6)).device.type == "meta"


@pytest.mark.xdist_group(HF_GROUP)
def test_default_base_is_llamas_10000() -> None:
    """RotaryEmbedding(D) with no theta: transformers' LlamaRotaryEmbedding of a default
    LlamaConfig (rope_theta 10 000), and the frequencies 10000 ** (-2i / D) written out."""
    transformers, modeling_llama = hf_llama()
    config = transformers.LlamaConfig(hidden_size=16, num_attention_heads=2, head_dim=8)
    hf_rotary = modeling_llama.LlamaRotaryEmbedding(config)
    ours = RotaryEmbedding(8)
    positions = torch.arange(40)
    with torch.no_grad():
        cos, sin = hf_rotary(torch.zeros(1, 40, 16), positions[None])  # (1, 40, 8) each
    expected_cos, expected_sin = ours.cos_sin(positions)
    torch.testing.assert_close(expected_cos, cos[0])
    torch.testing.assert_close(expected_sin, sin[0])
    written = torch.tensor([10000.0 ** (-i / 8) for i in (0, 2, 4, 6)])
    torch.testing.assert_close(ours.frequencies(), written)


@pytest.mark.parametrize("theta", [0, -1.0, True, "10000"])
def test_theta_must_be_a_positive_number(theta: object) -> None:
    with pytest.raises(ValueError, match=f"theta must be a positive number; got {theta!r}"):
        RotaryEmbedding(4, theta)  # type: ignore[arg-type]


def test_a_base_at_most_one_is_allowed() -> None:
    """Any positive base is taken; theta = 1 turns every pair at the angle of its position."""
    rope = RotaryEmbedding(4, 1)
    torch.testing.assert_close(
        rope.angles(torch.arange(3.0)), torch.arange(3.0)[:, None].expand(3, 2)
    )
    assert RotaryEmbedding(4, 0.5).theta == 0.5


@pytest.mark.parametrize(
    ("shape", "positions", "got"),
    [
        ((3, 6), torch.arange(3), r"x \(3, 6\) and positions \(3,\)"),  # x too wide
        ((3, 4), torch.arange(2), r"x \(3, 4\) and positions \(2,\)"),  # too few positions
        ((3, 4), torch.zeros(3, 1), r"x \(3, 4\) and positions \(3, 1\)"),  # not 1-D
        ((3, 4), [0, 1, 2], r"x \(3, 4\) and positions \?$"),  # not a tensor
    ],
)
@pytest.mark.parametrize("method", ["forward", "rotate_complex"])
def test_rotation_refuses_x_and_positions_that_do_not_fit(
    shape: tuple[int, ...], positions: object, got: str, method: str
) -> None:
    rope = RotaryEmbedding(4)
    with pytest.raises(ValueError, match=r"D = 4 and positions shape \(T,\); got " + got):
        getattr(rope, method)(torch.randn(shape), positions)


def test_angles_refuse_positions_that_are_not_one_dimensional() -> None:
    with pytest.raises(
        ValueError, match=r"positions must be a tensor of shape \(T,\); got \(2, 3\)"
    ):
        RotaryEmbedding(4).angles(torch.zeros(2, 3))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_rotates_in_float32_and_returns_its_dtype(dtype: torch.dtype) -> None:
    """A half-precision x comes back in its dtype: the float32 rotation, rounded once."""
    torch.manual_seed(5)
    rope = RotaryEmbedding(8)
    x, positions = torch.randn(2, 5, 8).to(dtype), torch.arange(5)
    expected = rope(x.float(), positions).to(dtype)
    for rotated in (rope(x, positions), rope.rotate_complex(x, positions)):
        assert rotated.dtype == dtype
        torch.testing.assert_close(rotated, expected)
